"""Session-wide fixtures: where the real data sets are."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

_REPO = Path(__file__).resolve().parents[1]


def shared_data_dir() -> Path:
    """``../shared/data`` beside the checkout, or ``$LEARNSERVE_SHARED_DATA``."""
    env = os.environ.get("LEARNSERVE_SHARED_DATA")
    return Path(env) if env else (_REPO.parent / "shared" / "data").resolve()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    d = shared_data_dir()
    if not d.is_dir():
        pytest.skip(f"real data sets not found at {d} (set LEARNSERVE_SHARED_DATA)")
    return d


def require_data(*parts: str) -> Path:
    """Path to a data file under shared/data, or skip the test with the reason."""
    p = shared_data_dir().joinpath(*parts)
    if not p.exists():
        pytest.skip(f"data file {p} is absent (../shared/data not present)")
    return p
