"""`learnserve train fastxml` and `learnserve evaluate` on Bibtex, as subprocesses."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from learners.io.xc import read_xc
from learners.xml import FastXML, xml_metrics
from tests.conftest import require_data

REPO = Path(__file__).resolve().parents[1]
CLI = REPO / ".venv" / "bin" / "learnserve"


def _cli(*args: object, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    exe = [str(CLI)] if CLI.exists() else [sys.executable, "-m", "service.cli"]
    return subprocess.run(
        [*exe, *map(str, args)], capture_output=True, text=True, timeout=timeout, cwd=REPO
    )


def test_train_then_evaluate_matches_python_api(tmp_path):
    train = require_data("bibtex", "bibtex_train.txt")
    test = require_data("bibtex", "bibtex_test.txt")
    names = require_data("bibtex", "bibtex_label_names.txt")
    out = tmp_path / "bibtex.lsart"
    r = _cli("train", "fastxml", "--train", train, "-o", out, "--trees", 4, "--seed", 1,
             "--label-names", names)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "4880 points, 1836 features, 159 labels" in r.stderr
    assert "4/4" in r.stderr and "4 trees" in r.stderr  # the progress bar reached the end
    r = _cli("evaluate", out, "--test", test, "--json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert set(got) == {"p@1", "p@3", "p@5", "ndcg@1", "ndcg@3", "ndcg@5"}
    assert got["p@1"] > 0.5  # 4 trees already rank a true label first for most points

    model = FastXML.load(out)
    assert model.n_trees == 4 and model.seed == 1 and model.n_labels_ == 159
    assert model.meta_["index_base"] == 0 and model.meta_["train_file"] == "bibtex_train.txt"
    assert model.label_names is not None and len(model.label_names) == 159
    # the same training through the Python API gives the same model and metrics
    tr, te = read_xc(train), read_xc(test)
    ref = FastXML(n_trees=4, seed=1).fit(tr.X, tr.Y, n_labels=tr.n_labels)
    for name, arr in ref.forest_.items():
        assert np.array_equal(arr, model.forest_[name]), name
    labels, _ = ref.predict_topk(te.X, k=5)
    want = xml_metrics(labels, te.Y)
    for k, v in want.items():
        assert got[k.lower()] == pytest.approx(v, abs=1e-12)


def test_bad_arguments_are_reported(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("1 3 2\n0 9:1\n")
    r = _cli("train", "fastxml", "--train", bad, "-o", tmp_path / "m.lsart")
    assert r.returncode != 0
    assert "feature '9:1' is outside [0, 3)" in r.stderr
    good = tmp_path / "good.txt"
    good.write_text("2 3 2\n0 0:1\n1 1:1\n")
    r = _cli("train", "fastxml", "--train", good, "-o", tmp_path / "m.lsart", "--trees", 0)
    assert r.returncode != 0 and "n_trees must be a positive integer" in r.stderr
    # a bad flag fails before the data is read (here: a file that does not exist)
    r = _cli("train", "fastxml", "--train", tmp_path / "absent.txt", "-o", tmp_path / "m.lsart",
             "--c-delta", 0)  # fmt: skip
    assert r.returncode != 0 and "c_delta must be > 0" in r.stderr and "absent" not in r.stderr
    r = _cli("evaluate", tmp_path / "missing.lsart", "--test", good)
    assert r.returncode != 0 and "cannot read" in r.stderr
