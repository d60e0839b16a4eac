"""The docstring examples of the client modules run (and stay true)."""

from __future__ import annotations

import doctest
import importlib

import pytest


@pytest.mark.parametrize(
    "module", ["service.client.errors", "service.client.files", "service.cli.models"]
)
def test_doctests(module: str) -> None:
    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted > 0 and result.failed == 0
