"""Issue 31 item 3: the learning gauges (``learnserve_online_*``) of models restored from
a checkpoint are on ``/metrics`` from the start, with the values they had before the
restart, not only once the models learn again (the accuracy-drop alert and the learning
dashboard would go blank after every deploy).

A real ``learnserve serve`` process learns a classifier, a regressor and a ranker,
checkpoints them, stops; a second process on the same data directory serves
``/metrics`` before any update."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from tests.service.procs import free_port, stop_process
from tests.service.serving import start_learnserve

DIM = 4


def examples(rng: np.random.Generator, n: int, regression: bool) -> list[dict[str, Any]]:
    X = rng.normal(size=(n, DIM)).round(4)
    s = X @ np.array([1.0, -0.5, 0.25, 0.0])
    y: list[Any] = (
        (100.0 + 10.0 * s).round(3).tolist()
        if regression
        else ["+1" if v > 0 else "-1" for v in s.tolist()]
    )
    return [{"x": x, "y": t} for x, t in zip(X.tolist(), y, strict=True)]


def queries(rng: np.random.Generator, n: int) -> list[dict[str, Any]]:
    out = []
    for q in range(n):
        X = rng.normal(size=(5, DIM)).round(4)
        rel = np.clip(np.round(X @ np.array([1.0, -0.5, 0.2, 0.0]) + 1.5), 0, 4).astype(int)
        items = [{"x": x, "relevance": int(r)} for x, r in zip(X.tolist(), rel, strict=True)]
        out.append({"qid": f"q{q}", "items": items})
    return out


MODELS = {
    "clf": {"algorithm": "arow", "features": {"kind": "dense", "dim": DIM}},
    "reg": {"algorithm": "arow_regression", "features": {"kind": "dense", "dim": DIM}},
    "rank": {"algorithm": "ranksvm", "features": {"kind": "dense", "dim": DIM}},
}
# What each must show (the AUC comes from the once-a-second loop: waited for).
EXPECTED = {
    "clf": ["accuracy", "loss", "log_loss", "roc_auc"],
    "reg": ["mae", "rmse", "r2", "interval_coverage"],
    "rank": ["ndcg_at_10"],
}


def gauges(text: str) -> dict[tuple[str, str], str]:
    """learnserve_online_* series by (figure, model), their values as printed."""
    found = re.findall(r'^learnserve_online_(\w+)\{model="([^"]+)"\} (\S+)$', text, re.M)
    return {(figure, model): v for figure, model, v in found}


def wanted(text: str) -> dict[tuple[str, str], str]:
    g = gauges(text)
    return {k: g[k] for k in [(f, m) for m, fs in EXPECTED.items() for f in fs] if k in g}


def scrape_until_complete(url: str, timeout: float = 10.0) -> dict[tuple[str, str], str]:
    """Every learnserve_online_* gauge once each expected one is there and two scrapes
    1.5 s apart agree (or at ``timeout``): ROC AUC is published about once a second
    (``service.engine.checkpoints.periodic``), so a scrape right after the last update
    may show the AUC of the window before it."""
    deadline = time.monotonic() + timeout
    last: dict[tuple[str, str], str] | None = None
    while True:
        text = httpx.get(f"{url}/metrics").text
        now = gauges(text)
        complete = len(wanted(text)) == sum(map(len, EXPECTED.values()))
        if (complete and now == last) or time.monotonic() > deadline:
            return now
        last = now if complete else None
        time.sleep(1.5 if complete else 0.2)


def test_learning_gauges_are_published_at_restore(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {"LEARNSERVE_DATA_DIR": str(tmp_path / "data")}
    rng = np.random.default_rng(31)
    proc = start_learnserve(port, env)
    try:
        with httpx.Client(base_url=url, timeout=30.0) as c:
            for name, body in MODELS.items():
                assert c.put(f"/models/{name}", json=body).status_code == 201
            for _ in range(4):
                for name in ("clf", "reg"):
                    body = {"examples": examples(rng, 50, name == "reg")}
                    r = c.post(f"/models/{name}/update", json=body)
                    assert r.status_code == 200, r.text
                r = c.post("/models/rank/update", json={"queries": queries(rng, 5)})
                assert r.status_code == 200, r.text
            for name in MODELS:
                assert c.post(f"/models/{name}/checkpoint").status_code == 200
            versions = {n: c.get(f"/models/{n}").json()["version"] for n in MODELS}
        before = scrape_until_complete(url)
        missing = {(f, m) for m, fs in EXPECTED.items() for f in fs} - set(before)
        assert not missing, before
    finally:
        stop_process(proc)

    proc = start_learnserve(port, env)
    try:
        after = scrape_until_complete(url)
        with httpx.Client(base_url=url, timeout=30.0) as c:  # nothing learned since
            assert {n: c.get(f"/models/{n}").json()["version"] for n in MODELS} == versions
        assert after == before
    finally:
        stop_process(proc)
