"""`learnserve train llsvm` + `learnserve evaluate` end to end (subprocess), on sklearn digits."""

from __future__ import annotations

import gzip
import json
import os
import re
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from learners.llsvm import LLSVM
from learners.llsvm.defaults import resolve

EXE = Path(sys.executable).with_name("learnserve")


@pytest.fixture(scope="module")
def digits_split():
    sk = pytest.importorskip("sklearn.datasets")
    ms = pytest.importorskip("sklearn.model_selection")
    X, y = sk.load_digits(return_X_y=True)
    return ms.train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    # A wide terminal keeps typer's boxed error messages on one line.
    env = {**os.environ, "COLUMNS": "400", "TERM": "dumb"}
    return subprocess.run([str(EXE), *args], capture_output=True, text=True, timeout=300, env=env)


def _write_csv(path: Path, X: np.ndarray, y: np.ndarray) -> None:
    np.savetxt(path, np.c_[y, X], delimiter=",", fmt="%g")


def _write_svmlight(path: Path, X: np.ndarray, y: np.ndarray) -> None:
    with open(path, "w") as fh:
        for row, label in zip(X, y):
            feats = " ".join(f"{j + 1}:{v:g}" for j, v in enumerate(row) if v != 0)
            fh.write(f"{label} {feats}\n")


def _write_idx(prefix: Path, X: np.ndarray, y: np.ndarray) -> Path:
    imgs = (X * 15).astype(np.uint8).reshape(-1, 8, 8)  # digits pixels are 0..16
    head = struct.pack(">BBBB", 0, 0, 8, 3) + struct.pack(">III", *imgs.shape)
    images = prefix.with_name(prefix.name + "-images-idx3-ubyte.gz")
    images.write_bytes(gzip.compress(head + imgs.tobytes()))
    head = struct.pack(">BBBB", 0, 0, 8, 1) + struct.pack(">I", y.shape[0])
    labels = prefix.with_name(prefix.name + "-labels-idx1-ubyte.gz")
    labels.write_bytes(gzip.compress(head + y.astype(np.uint8).tobytes()))
    return images


def _train_eval(train: Path, test: Path, model: Path, *extra: str) -> dict:
    r = _run("train", "llsvm", "--train", str(train), "-o", str(model), *extra)
    assert r.returncode == 0, r.stderr
    assert "wrote" in r.stderr
    r = _run("evaluate", str(model), "--test", str(test), "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_csv_train_and_evaluate(tmp_path, digits_split):
    """Digits as CSV, `--scale 16`, no other flag: the rule picks 100 anchors, 8
    neighbours, 200 passes, raw rows. Measured accuracy 0.9815 (= the API with the
    same parameters; the fixed MNIST defaults gave 0.9796)."""
    Xtr, Xte, ytr, yte = digits_split
    _write_csv(tmp_path / "train.csv", Xtr, ytr)
    _write_csv(tmp_path / "test.csv", Xte, yte)
    r = _run("train", "llsvm", "--train", str(tmp_path / "train.csv"), "-o",
             str(tmp_path / "m.lsart"), "--scale", "16")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "1257 examples, 64 features, 10 classes" in r.stderr
    assert "passes = 200  (rule: ceil(60,000 x 10 classes / 1,257 examples) = 478" in r.stderr
    assert "normalize = False  (rule: 64 features < 100)" in r.stderr
    # both progress bars ran to the end: k-means (10 classes x 21 units) and the passes
    assert re.search(r"anchors\s.*210/210", r.stderr) and re.search(r"passes\s.*200/200", r.stderr)
    r = _run("evaluate", str(tmp_path / "m.lsart"), "--test", str(tmp_path / "test.csv"), "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["accuracy"] == pytest.approx(0.9815, abs=0.006)
    assert out["error"] == pytest.approx(1 - out["accuracy"]) and out["examples"] == len(yte)
    model = LLSVM.load(tmp_path / "m.lsart")
    assert model.meta_["input_scale"] == 16.0
    assert model.meta_["defaults"]["passes"].startswith("rule: ")
    assert (model.passes, model.normalize, model.n_anchors) == (200, False, 100)
    params, _ = resolve(len(ytr), 64, 10, {})
    api = LLSVM(**params).fit(Xtr / 16.0, ytr).score(Xte / 16.0, yte)
    assert out["accuracy"] == pytest.approx(api, abs=1e-12)


def test_flags_override_the_rule(tmp_path, digits_split):
    Xtr, Xte, ytr, yte = digits_split
    _write_csv(tmp_path / "train.csv", Xtr, ytr)
    _write_csv(tmp_path / "test.csv", Xte, yte)
    flags = [
        "--passes",
        "3",
        "--anchors",
        "20",
        "--normalize",
        "--valid",
        str(tmp_path / "test.csv"),
    ]
    r = _run("train", "llsvm", "--train", str(tmp_path / "train.csv"), "-o",
             str(tmp_path / "m.lsart"), *flags)  # fmt: skip
    assert r.returncode == 0, r.stderr
    # --valid: the held-out error, printed and recorded in the artifact (GET
    # /models/{name} shows it), is what `learnserve evaluate` measures on that file
    recorded = LLSVM.load(tmp_path / "m.lsart").meta_["validation"]
    assert f"validation (test.csv, {len(yte)} examples): error " in r.stderr
    ev = _run("evaluate", str(tmp_path / "m.lsart"), "--test", str(tmp_path / "test.csv"), "--json")
    out = json.loads(ev.stdout)
    assert (recorded["file"], recorded["n"]) == ("test.csv", len(yte))
    assert recorded["metrics"]["error"] == pytest.approx(out["error"], abs=1e-12)
    assert (
        "passes = 3  (set)" in r.stderr and "n_neighbours = 8  (rule: min(8, the given" in r.stderr
    )
    model = LLSVM.load(tmp_path / "m.lsart")
    assert (model.passes, model.n_anchors, model.normalize) == (3, 20, True)
    assert len(model.history_) == 3


def test_help_explains_the_knobs_and_the_rule():
    r = _run("train", "llsvm", "--help")
    assert r.returncode == 0
    text = " ".join(r.stdout.split())  # rich wraps the help text in boxes
    text = re.sub(r"[│╭╮╰╯─]", " ", text)
    text = " ".join(text.split())
    phrases = ("passes = clamp(ceil(60000 C / n), 10, 200)", "normalize = d >= 100",
               "Too few under-fits", "More: smoother decision", "A flag that is given")  # fmt: skip
    for phrase in phrases:
        assert phrase in text, phrase


def test_svmlight_and_idx_formats(tmp_path, digits_split):
    Xtr, Xte, ytr, yte = digits_split
    _write_svmlight(tmp_path / "train.svm", Xtr, ytr)
    _write_svmlight(tmp_path / "test.svm", Xte, yte)
    out = _train_eval(tmp_path / "train.svm", tmp_path / "test.svm", tmp_path / "s.lsart",
                      "--anchors", "50", "--passes", "5")  # fmt: skip
    assert out["accuracy"] >= 0.96
    tr = _write_idx(tmp_path / "dtrain", Xtr / 16.0, ytr)
    te = _write_idx(tmp_path / "dtest", Xte / 16.0, yte)
    out = _train_eval(tr, te, tmp_path / "i.lsart", "--anchors", "50", "--passes", "5")
    assert out["accuracy"] >= 0.96
    assert LLSVM.load(tmp_path / "i.lsart").meta_["input_scale"] == 255.0


def test_cli_errors_are_clear(tmp_path, digits_split):
    Xtr, Xte, ytr, yte = digits_split
    lonely = tmp_path / "x-images-idx3-ubyte.gz"
    lonely.write_bytes(_write_idx(tmp_path / "y", Xtr[:20] / 16, ytr[:20]).read_bytes())
    r = _run("train", "llsvm", "--train", str(lonely), "-o", str(tmp_path / "m"))
    assert r.returncode == 2 and "no labels file" in r.stderr
    _write_csv(tmp_path / "train.csv", Xtr, ytr)
    r = _run("train", "llsvm", "--train", str(tmp_path / "train.csv"), "-o", str(tmp_path / "m"),
             "--neighbours", "200")  # fmt: skip
    assert r.returncode == 2 and "must not exceed" in r.stderr
    # bad flags fail before the data is read (here: a file that does not exist)
    for flags, said in (
        (["--lam", "0"], "lam must be"),
        (["--anchors", "4", "--neighbours", "5"], "must not exceed"),
        (["--weighting", "gauss"], "weighting"),
    ):
        r = _run("train", "llsvm", "--train", str(tmp_path / "absent.csv"), "-o",
                 str(tmp_path / "m"), *flags)  # fmt: skip
        assert r.returncode == 2 and said in r.stderr and "absent" not in r.stderr, r.stderr
    r = _run("train", "llsvm", "--train", str(tmp_path / "train.csv"), "-o",
             str(tmp_path / "m.lsart"), "--anchors", "20", "--passes", "1")  # fmt: skip
    assert r.returncode == 0, r.stderr
    _write_csv(tmp_path / "narrow.csv", Xte[:, :10], yte)
    r = _run("evaluate", str(tmp_path / "m.lsart"), "--test", str(tmp_path / "narrow.csv"))
    assert r.returncode == 2 and "10 features, the model expects 64" in r.stderr
