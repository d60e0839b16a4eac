"""The docstring examples of the service modules run (and stay true)."""

from __future__ import annotations

import doctest
import importlib

import pytest


@pytest.mark.parametrize(
    "module",
    [
        "service.settings",
        "service.models.payload",
        "service.models.progressive_metrics",
        "service.models.example_weights",
        "service.models.finite_answers",
        "service.engine.update_outcomes",
        "service.engine.batch_versions",
        "service.models.feedback_rows",
    ],
)
def test_doctests(module: str) -> None:
    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted > 0 and result.failed == 0
