"""Panels say what they show: a panel that claims the dashboard's time range queries it,
and the panels of sharded ownership, flat or empty in the default ``replicate`` mode, sit
in a collapsed row that names the mode and say so themselves."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.conftest import DASHBOARDS
from tests.deploy.test_dashboards import metric_names

# Series only LEARNSERVE_OWNERSHIP=sharded gives a meaning (service/fleet/placement.py).
FLEET_METRICS = {
    "learnserve_owned_models",
    "learnserve_fleet_members",
    "learnserve_lru_bytes",
    "learnserve_lru_models",
    "learnserve_lru_hits_total",
    "learnserve_lru_misses_total",
    "learnserve_lru_evictions_total",
    "learnserve_log_entries_applied_total",
}


def with_rows(path: Path) -> Iterator[tuple[dict[str, Any] | None, dict[str, Any]]]:
    """(the row holding it or None, panel) for every panel of a dashboard."""
    for top in json.loads(path.read_text())["panels"]:
        if top["type"] == "row":
            for p in top.get("panels", []):
                yield top, p
        else:
            yield None, top


def reads(panel: dict[str, Any]) -> set[str]:
    return set().union(*(metric_names(t["expr"]) for t in panel["targets"]))


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_a_panel_about_the_time_range_queries_the_time_range(path: Path) -> None:
    for _, p in with_rows(path):
        says = "time range" in f"{p['title']} {p.get('description', '')}".lower()
        queries = any("[$__range]" in t["expr"] for t in p["targets"])
        assert says == queries, f"{p['title']!r}: says time range {says}, queries it {queries}"
        if queries:  # one figure per series; a time series would draw a sliding range
            assert p["type"] != "timeseries", p["title"]
            assert "(time range)" in p["title"], p["title"]


def test_the_checkpoint_duration_panel_covers_the_time_range() -> None:
    store = next(p for p in DASHBOARDS if p.name == "store.json")
    panel = next(p for _, p in with_rows(store) if p["title"].startswith("Checkpoint duration"))
    for target in panel["targets"]:
        assert "learnserve_checkpoint_duration_seconds_bucket" in target["expr"]
        assert "[$__range]" in target["expr"] and target.get("instant") is True


def test_sharded_only_panels_are_in_a_collapsed_row_that_says_so() -> None:
    found = []
    for path in DASHBOARDS:
        for row, p in with_rows(path):
            if not reads(p) & FLEET_METRICS:
                continue
            found.append(p["title"])
            where = f"{path.name} / {p['title']!r}"
            assert row is not None and row["collapsed"] is True, f"{where}: not in a collapsed row"
            assert "LEARNSERVE_OWNERSHIP=sharded only" in row["title"], where
            assert "default LEARNSERVE_OWNERSHIP=replicate" in p["description"], where
            # nothing else hides in that row
            assert all(reads(q) & FLEET_METRICS for q in row["panels"]), row["title"]
    assert len(found) == 4, found


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_rows_are_laid_out_like_grafana_saves_them(path: Path) -> None:
    """A collapsed row carries its panels below its own line; ids stay unique."""
    top = json.loads(path.read_text())["panels"]
    ids = [p["id"] for p in top] + [q["id"] for p in top for q in p.get("panels", [])]
    assert len(ids) == len(set(ids))
    for p in top:
        if p["type"] != "row":
            assert "panels" not in p
            continue
        assert p["gridPos"] == {"x": 0, "y": p["gridPos"]["y"], "w": 24, "h": 1}
        assert all(q["gridPos"]["y"] > p["gridPos"]["y"] for q in p["panels"])
        assert p is top[-1] or not p["collapsed"], "panels after a collapsed row would join it"
