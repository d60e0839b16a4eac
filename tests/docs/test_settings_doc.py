"""docs/reference/settings.md is generated from ``Settings``: regenerate and compare."""

from __future__ import annotations

import importlib.util
from types import ModuleType

from service.settings import Settings
from tests.docs.markdown import DOCS


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_settings", DOCS / "gen_settings.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_settings_page_is_up_to_date() -> None:
    expected = _generator().generate()
    current = (DOCS / "reference" / "settings.md").read_text()
    assert current == expected, (
        "docs/reference/settings.md differs from service/settings.py: "
        "run `python docs/gen_settings.py` from the repository root and commit the result"
    )


def test_every_field_has_a_row() -> None:
    text = (DOCS / "reference" / "settings.md").read_text()
    for name in Settings.model_fields:
        assert f"| `LEARNSERVE_{name.upper()}` |" in text, name
