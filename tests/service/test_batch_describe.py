"""Batch models trained by the CLI on real data, deployed and described over real HTTP:
FastXML on a Bibtex subset with ``--label-names`` (``/predict`` answers names) and
``--valid``; LambdaMART on LightGBM's lambdarank example with ``--valid``. ``GET
/models/{name}`` shows the training parameters, the data's shape and the validation
metrics the CLI recorded, and none of the online-only fields; artifacts without that
metadata (trained through the Python API, or before it was recorded) still describe."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from learners.io.xc import read_xc
from learners.llsvm.model import LLSVM
from learners.ranking.lambdamart import LambdaMART
from learners.xml import FastXML
from service.settings import Settings
from tests.conftest import require_data
from tests.service.serving import ServerThread, learnserve_cmd

REPO = Path(__file__).resolve().parents[2]
OCTETS = {"content-type": "application/octet-stream"}
ONLINE_ONLY = {"examples_learned", "entries_skipped", "online_metrics", "last_checkpoint",
               "checkpoint_backoff"}  # fmt: skip
N_TRAIN, N_VALID, TREES = 1500, 500, 3


def cli(*args: Any) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(
        [*learnserve_cmd(), *map(str, args)], capture_output=True, text=True, timeout=600,
        cwd=REPO,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    return r


def xc_head(src: Path, dst: Path, n: int) -> Path:
    """The first ``n`` points of an XC file (header ``N D L`` rewritten)."""
    lines = src.read_text().splitlines()
    _, d, labels = lines[0].split()
    dst.write_text("\n".join([f"{n} {d} {labels}", *lines[1 : n + 1]]) + "\n")
    return dst


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    data_dir = tmp_path_factory.mktemp("describe")
    with ServerThread(Settings(data_dir=str(data_dir))) as srv, srv.client() as c:
        yield c


@pytest.fixture(scope="module")
def bibtex(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("bibtex")
    train = xc_head(require_data("bibtex", "bibtex_train.txt"), tmp / "train.txt", N_TRAIN)
    valid = xc_head(require_data("bibtex", "bibtex_test.txt"), tmp / "valid.txt", N_VALID)
    names = require_data("bibtex", "bibtex_label_names.txt")
    out = tmp / "bibtex.lsart"
    r = cli("train", "fastxml", "--train", train, "--valid", valid, "--label-names", names,
            "--trees", TREES, "--seed", 1, "-o", out)  # fmt: skip
    assert f"{TREES}/{TREES}" in r.stderr and "valid p@1" in r.stderr
    return {"train": train, "valid": valid, "names": names, "model": out}


def test_fastxml_predict_answers_label_names(client: httpx.Client, bibtex: dict[str, Path]):
    blob = bibtex["model"].read_bytes()
    r = client.put("/models/tags/artifact", content=blob, headers=OCTETS)
    assert r.status_code == 201, r.text
    names = [n for n in bibtex["names"].read_text().splitlines() if n]
    model = FastXML.load(bibtex["model"])
    assert model.label_names == names  # what the CLI stored

    va = read_xc(bibtex["valid"])
    rows = va.X.take(list(range(40)))
    want_ids, want_scores = model.predict_topk(rows, k=3)
    dense = rows.to_dense()
    instances = [{"x": {str(j): float(v) for j, v in enumerate(row) if v}} for row in dense]
    r = client.post("/predict", json={"model": "tags", "k": 3, "instances": instances})
    assert r.status_code == 200, r.text
    preds = r.json()["predictions"]
    for p, ids, sc in zip(preds, want_ids.tolist(), want_scores.tolist(), strict=True):
        assert p["ids"] == ids
        assert p["labels"] == [names[i] for i in ids]  # e.g. "TAG_ontology"
        assert p["scores"] == pytest.approx(sc)
    assert all(lab.startswith("TAG_") for p in preds for lab in p["labels"])
    # A model without names answers ids as labels (and as ids).
    model.label_names = None
    c = client.put("/models/tags-ids/artifact", content=model.to_bytes(), headers=OCTETS)
    assert c.status_code == 201, c.text
    r = client.post("/predict", json={"model": "tags-ids", "k": 3, "instances": instances[:5]})
    assert [p["labels"] for p in r.json()["predictions"]] == want_ids[:5].tolist()


def test_fastxml_describe_shows_training(client: httpx.Client, bibtex: dict[str, Path]):
    blob = bibtex["model"].read_bytes()
    client.put("/models/tags-d/artifact", content=blob, headers=OCTETS)
    info = client.get("/models/tags-d").json()
    assert not ONLINE_ONLY & set(info), info.keys()
    assert info["kind"] == "fastxml" and info["version"] == 1
    assert info["artifact"]["size"] == len(blob)
    assert info["artifact"]["checksum"] == info["state_digest"]
    t = info["training"]
    assert t["params"]["n_trees"] == TREES and t["params"]["seed"] == 1
    assert t["params"]["max_leaf"] == 10 and "label_names" not in t["params"]
    assert t["data"] == {"n": N_TRAIN, "d": 1836, "labels": 159, "label_names": True}
    assert t["train_file"] == "train.txt" and t["train_seconds"] > 0
    v = t["validation"]
    assert v["file"] == "valid.txt" and v["n"] == N_VALID
    # the recorded metrics are what `learnserve evaluate` measures on the same file
    got = json.loads(cli("evaluate", bibtex["model"], "--test", bibtex["valid"], "--json").stdout)
    assert v["metrics"] == pytest.approx(got, abs=1e-12)
    # measured: 3 trees (seed 1) on the first 1500 Bibtex points, the first 500 test points
    assert v["metrics"]["p@1"] == pytest.approx(0.486, abs=0.01)
    # GET /models lists the same description
    listed = {m["name"]: m for m in client.get("/models").json()["models"]}
    assert listed["tags-d"]["training"] == t


def test_lambdamart_describe_shows_validation_ndcg(client: httpx.Client, tmp_path: Path):
    d = require_data("lightgbm-lambdarank")
    out = tmp_path / "ranker.lsart"
    cli("train", "lambdamart", "--train", d / "rank.train", "--train-query",
        d / "rank.train.query", "--valid", d / "rank.test", "--valid-query",
        d / "rank.test.query", "--trees", 5, "-o", out)  # fmt: skip
    r = client.put("/models/ltr/artifact", content=out.read_bytes(), headers=OCTETS)
    assert r.status_code == 201, r.text
    info = client.get("/models/ltr").json()
    assert not ONLINE_ONLY & set(info)
    t = info["training"]
    assert t["params"]["n_estimators"] == 5 and t["params"]["num_leaves"] == 31
    assert t["data"] == {"n": 3005, "d": 300, "queries": 201}
    assert t["best_iteration"] == 5 and t["index_base"] == 1
    v = t["validation"]
    assert (v["file"], v["n"], v["queries"]) == ("rank.test", 768, 50)
    got = json.loads(cli("evaluate", out, "--test", d / "rank.test", "--test-query",
                         d / "rank.test.query", "--json").stdout)  # fmt: skip
    assert v["metrics"] == pytest.approx(got, abs=1e-9)


def test_artifacts_without_training_metadata_still_describe(client: httpx.Client):
    """Models fitted through the Python API (as every artifact before the CLI recorded
    data and validation): the params and the shape known from the model, no validation."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 5))
    y = np.clip((X[:, 0] * 2 + 2).round(), 0, 4).astype(int)
    ranker = LambdaMART(n_estimators=4, num_leaves=4, min_data_in_leaf=5).fit(X, y, [20] * 10)
    assert client.put("/models/old-rank/artifact", content=ranker.to_bytes(),
                      headers=OCTETS).status_code == 201  # fmt: skip
    info = client.get("/models/old-rank").json()
    t = info["training"]
    assert t["params"]["n_estimators"] == 4 and t["data"] == {"d": 5}
    assert "validation" not in t and "train_file" not in t and not ONLINE_ONLY & set(info)

    labels = np.where(X[:, 0] + X[:, 2] > 0, "yes", "no")
    clf = LLSVM(n_anchors=4, n_neighbours=2, passes=3).fit(X, labels)
    assert client.put("/models/old-clf/artifact", content=clf.to_bytes(),
                      headers=OCTETS).status_code == 201  # fmt: skip
    t = client.get("/models/old-clf").json()["training"]
    assert t["data"] == {"d": 5, "classes": 2} and "classes" not in t["params"]
    assert t["params"]["n_anchors"] == 4
    # the last SGD pass's training error, as recorded per pass in the artifact
    assert t["final_pass"] == pytest.approx(clf.history_[-1])
    assert "validation" not in t
