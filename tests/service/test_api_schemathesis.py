"""The OpenAPI document is the truth: schemathesis against a real server.

A ``learnserve serve`` subprocess (embedded SQLite store, API keys on) holds a
model of every kind — online classifiers per feature kind, a multiclass one, a
RankSVM, and deployed LambdaMART, FastXML and LL-SVM artifacts — and schemathesis
(its CLI, every check, all phases including the stateful one, a fixed seed) sends
generated requests to every documented operation. Any failure fails the test,
with schemathesis's report in the message.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

from tests.service.procs import free_port, stop_process
from tests.service.serving import start_learnserve

pytest.importorskip("schemathesis")

ADMIN = "schema-admin-key"
HEADERS = {"Authorization": f"Bearer {ADMIN}"}
DIM = 6


def lambdamart_artifact() -> bytes:
    from learners.ranking.lambdamart import LambdaMART

    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, DIM))
    y = np.clip((X[:, 0] * 2 + 2).round(), 0, 4).astype(int)
    blob: bytes = (
        LambdaMART(n_estimators=3, num_leaves=4, min_data_in_leaf=5).fit(X, y, [20] * 3).to_bytes()
    )
    return blob


def fastxml_artifact() -> bytes:
    from learners.features import Batch
    from learners.xml.fastxml import FastXML

    rng = np.random.default_rng(1)
    X = Batch.from_dense(rng.random((40, DIM)))
    Y = [[i % 5, (i + 1) % 5] for i in range(40)]
    blob: bytes = FastXML(n_trees=2, max_leaf=5, seed=1, n_jobs=1).fit(X, Y).to_bytes()
    return blob


def llsvm_artifact() -> bytes:
    from learners.llsvm.model import LLSVM

    rng = np.random.default_rng(2)
    X = rng.normal(size=(80, DIM))
    y = np.where(X[:, 0] + X[:, 2] > 0, "yes", "no")
    blob: bytes = LLSVM(n_anchors=4, n_neighbours=2, passes=1).fit(X, y).to_bytes()
    return blob


SPARSE = {"kind": "sparse", "dim": DIM}
ONLINE = {
    "dense": {"algorithm": "arow", "features": {"kind": "dense", "dim": DIM}},
    "sparse": {"algorithm": "pa1", "params": {"C": 0.5}, "features": SPARSE},
    # "adult" and "web-ranker" are the names in the document's examples, which
    # schemathesis sends first: those requests reach real models.
    "adult": {"algorithm": "scw1", "params": {"C": 1.0}, "features": {"kind": "hashed", "bits": 8}},
    "multi": {"algorithm": "cw", "features": SPARSE},
    "web-ranker": {"algorithm": "ranksvm", "features": {"kind": "sparse", "dim": 300}},
}


def populate(c: httpx.Client) -> None:
    for name, body in ONLINE.items():
        r = c.put(f"/models/{name}", json=body)
        assert r.status_code == 201, r.text
    rows = [[float(i == j) for j in range(DIM)] for i in range(DIM)]
    learn = {
        "dense": [{"x": r, "y": "+1" if i % 2 else "-1"} for i, r in enumerate(rows)],
        "sparse": [{"x": {str(i): 1.0}, "y": i % 2} for i in range(DIM)],
        "adult": [{"x": {"job": "clerk", "age": i}, "y": ["-1", "+1"][i % 2]} for i in range(DIM)],
        "multi": [{"x": {str(i): 1.0}, "y": "abc"[i % 3]} for i in range(DIM)],
    }  # fmt: skip
    for name, examples in learn.items():
        r = c.post("/update", json={"model": name, "examples": examples})
        assert r.status_code == 200, r.text
    items = [{"x": {str(i): 1.0}, "relevance": i % 3} for i in range(DIM)]
    r = c.post("/update", json={"model": "web-ranker", "queries": [{"qid": "q", "items": items}]})
    assert r.status_code == 200, r.text
    for name, blob in (("ltr", lambdamart_artifact()), ("xml", fastxml_artifact()),
                       ("local", llsvm_artifact())):  # fmt: skip
        r = c.put(
            f"/models/{name}/artifact",
            content=blob,
            headers={"content-type": "application/octet-stream"},
        )
        assert r.status_code == 201, r.text


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data_dir: Path = tmp_path_factory.mktemp("schemathesis")
    port = free_port()
    env = {
        "LEARNSERVE_DATA_DIR": str(data_dir),
        "LEARNSERVE_API_KEYS": f"{ADMIN}=predict+update+admin",
        # Small limits: generated bodies stay cheap (the document states the limits).
        "LEARNSERVE_MAX_DIM": "4096",
        "LEARNSERVE_MAX_LABELS": "20",
        "LEARNSERVE_MAX_BATCH_EXAMPLES": "50",
        "LEARNSERVE_MIN_VERSION_WAIT_SECONDS": "0.05",
    }
    proc = start_learnserve(port, env)
    url = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(base_url=url, headers=HEADERS, timeout=60) as c:
            populate(c)
        yield url
    finally:
        stop_process(proc)
        log = Path(proc.log_path).read_text(errors="replace")
        assert "Traceback" not in log, log[-6000:]


# Where a schema-valid request may still be refused with 422, because validity depends
# on server state the document cannot state: the features and labels an /update or
# /predict carries must fit the named model's config (dimension, kind), and an
# artifact upload must be a learnserve artifact (magic, checksum), not any bytes.
CONFIG = r"""
[[operations]]
include-path-regex = '^/(update|predict|models/\{name\}/(artifact|update|predict))$'
checks.positive_data_acceptance.expected-statuses = ["2xx", "401", "403", "404", "409", "422"]

# A decision model's rank, reward and DSJSON import: the same (the body's model must be
# the path's, the excluded ids among the actions, the event kept, the reward within the
# model's reward_range, an imported line DSJSON), and 413 when an action's crossed
# features exceed the feature limit.
[[operations]]
include-path-regex = '^/models/\{name\}/(rank|reward|decisions)$'
checks.positive_data_acceptance.expected-statuses = ["2xx", "401", "403", "404", "409", "413",
                                                     "422"]

# The same for an import (PUT /models/{name} with an artifact body: any bytes are
# schema-valid, only a learnserve artifact is accepted), for /weights, whose
# ``label`` must be one of the model's labels, and for /explain, whose x must fit the
# model's features as /predict's (a decision model's rank body: as /rank's, 413 too).
[[operations]]
include-name = ["PUT /models/{name}", "GET /models/{name}/weights", "POST /models/{name}/explain"]
checks.positive_data_acceptance.expected-statuses = ["2xx", "401", "403", "404", "409", "413",
                                                     "422"]

# The Open Inference Protocol routes: the same, with its 400 for invalid input (a tensor
# whose shape is not the model's rows) and for models whose input is no tensor.
[[operations]]
include-path-regex = '^/v2/models/'
checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "401", "403", "404", "409",
                                                     "413"]

# Refusals: the defaults, without 5xx, and with 413 (a batch over max_batch_examples,
# documented as maxItems, is 413 "too_large") and 408.
[checks.negative_data_rejection]
expected-statuses = ["400", "401", "403", "404", "405", "406", "408", "409", "413", "415",
                     "422", "428", "429"]
"""


def run_schemathesis(
    url: str,
    report_dir: Path,
    max_examples: int,
    seed: int = 10,
    config_text: str = CONFIG,
    phases: str = "examples,coverage,fuzzing,stateful",
    extra: tuple[str, ...] = (),
) -> str:
    """schemathesis's CLI (every check, a fixed seed) against ``url``; fails the test on
    any failure, with the report in the message; returns the output."""
    exe = Path(sys.executable).with_name("schemathesis")
    config = report_dir / "schemathesis.toml"
    config.write_text(config_text)
    cmd = [
        str(exe) if exe.exists() else "schemathesis",
        "--config-file", str(config),
        "--no-color",
        "run",
        f"{url}/openapi.json",
        "--checks", "all",
        "--phases", phases,
        "--seed", str(seed),
        "--max-examples", str(max_examples),
        "--workers", "1",
        "--header", f"Authorization: Bearer {ADMIN}",
        "--request-timeout", "30",
        "--suppress-health-check", "all",
        "--report", "ndjson",
        "--report-dir", str(report_dir),
        *extra,
    ]  # fmt: skip
    env = {**os.environ, "SCHEMATHESIS_HOOKS": ""}
    # cwd: schemathesis keeps a cache (.schemathesis/) in its working directory.
    r = subprocess.run(
        cmd, capture_output=True, text=True, env=env, timeout=1800, check=False, cwd=report_dir
    )
    out = r.stdout + r.stderr
    (report_dir / "schemathesis.out").write_text(out)
    assert r.returncode == 0, out[-20000:]
    print(out[-3000:])  # the summary, with -s
    return out


def test_schemathesis_finds_nothing(server: str, tmp_path: Path) -> None:
    run_schemathesis(server, tmp_path, int(os.environ.get("SCHEMATHESIS_EXAMPLES", "40")))


@pytest.mark.slow
def test_schemathesis_finds_nothing_long(server: str, tmp_path: Path) -> None:
    run_schemathesis(server, tmp_path, max_examples=300, seed=11)
