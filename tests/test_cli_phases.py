"""The seconds a command spends before it shows anything are named on stderr: FastXML's
training compiles its kernels before the tree bar starts (it sat at 0/50 trees for
~20 s), ``evaluate`` says it is loading the model, reading the file and scoring (it
paused ~6 s in silence). The text is tested, not the time."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tests.client.test_cli_batch_predict import letor_lines, run, write_letor, write_xc


def order(stderr: str, *phrases: str) -> list[int]:
    """The line number of each phrase (each must appear)."""
    lines = stderr.splitlines()
    found = []
    for phrase in phrases:
        at = [i for i, line in enumerate(lines) if phrase in line]
        assert at, (phrase, stderr)
        found.append(at[0])
    return found


def test_fastxml_training_says_it_compiles_before_the_trees(tmp_path: Path) -> None:
    write_xc(tmp_path / "train.txt", 60, 0)
    r = run("train", "fastxml", "--train", tmp_path / "train.txt", "--trees", 2,
            "-o", tmp_path / "x.lsart")  # fmt: skip
    at = order(r.stderr, "fastxml: reading train.txt (",
               "fastxml: compiling kernels (first run only; later runs load them from cache)...",
               "fastxml: kernels ready in", "2/2")  # fmt: skip
    assert at == sorted(at), r.stderr  # named before the bar, which comes last
    assert all(len(line) <= 80 for line in r.stderr.splitlines()), r.stderr


def test_evaluate_names_each_phase(tmp_path: Path) -> None:
    write_xc(tmp_path / "train.txt", 60, 0)
    write_xc(tmp_path / "test.txt", 20, 1)
    run("train", "fastxml", "--train", tmp_path / "train.txt", "--trees", 2,
        "-o", tmp_path / "x.lsart")  # fmt: skip
    write_letor(tmp_path / "r.letor", letor_lines(6, 0), qid=True)
    run("train", "lambdamart", "--train", tmp_path / "r.letor", "--trees", 2, "-o",
        tmp_path / "r.lsart", "--min-data-in-leaf", 5, "--min-sum-hessian-in-leaf", 0)  # fmt: skip
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 40)
    X = rng.normal(size=(40, 3)) + y[:, None]
    np.savetxt(tmp_path / "d.csv", np.c_[y, X], delimiter=",", fmt="%g")
    run("train", "llsvm", "--train", tmp_path / "d.csv", "--passes", 2, "-o", tmp_path / "l.lsart")
    for model, test, rows in [("x.lsart", "test.txt", "20 points"),
                              ("r.lsart", "r.letor", "48 documents"),
                              ("l.lsart", "d.csv", "40 examples")]:  # fmt: skip
        r = run("evaluate", tmp_path / model, "--test", tmp_path / test)
        scoring = f"evaluate: scoring {rows} (a first run also compiles the kernels)..."
        loading = f"evaluate: loading model {model}..."
        at = order(r.stderr, loading, f"evaluate: reading {test} (", scoring)
        assert at == sorted(at), r.stderr
        assert r.stdout.startswith("kind ")  # the metrics stay alone on stdout
