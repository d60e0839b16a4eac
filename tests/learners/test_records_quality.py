"""Accuracy of AROW (and PA-I) on features the records encoder makes from raw data,
pinned to measured values (tolerance: floating-point differences between platforms).

Protocol: one pass over the training records in order, each encoded with the
statistics of the records before it (``learn``), then the test records encoded with
the final statistics (``encode``). ``../shared/data``'s REFERENCE_RESULTS.md has
the peers (Vowpal Wabbit one pass, scikit-learn batch).

- adult-raw: ``adult.data`` in file order, accuracy on ``adult.test``; "?" is a
  missing value (the field is left out). Bin edges were chosen by hand as round
  numbers of each column's range (not tuned on the test file).
- sms-spam: the documented split: ``random.Random(0).shuffle`` of the messages in file
  order, the first 80 % (4,459) train, the rest (1,115) test.

Reproduce: ``.venv/bin/python -m pytest tests/learners/test_records_quality.py -q -rA``
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from learners.io.records import read_csv_records, read_labeled_text
from learners.linear import make_classifier
from learners.records import RecordEncoder
from tests.conftest import require_data

TOL = 0.002
NUMERIC = ["age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week"]
CATEGORICAL = ["workclass", "education", "marital-status", "occupation", "relationship",
               "race", "sex", "native-country"]  # fmt: skip
BINS = {
    "age": [25, 30, 35, 40, 45, 50, 55, 60, 65],
    "fnlwgt": [100000, 150000, 200000, 250000, 300000],
    "education-num": [9, 10, 11, 13, 14],
    "capital-gain": [1, 3000, 5000, 7000, 10000, 15000],
    "capital-loss": [1, 1500, 1800, 2000, 2500],
    "hours-per-week": [20, 30, 40, 41, 46, 50, 60],
}


def adult_config(
    numeric: str,
    interactions: tuple[tuple[str, ...], ...] = (),
    *,
    intercept: bool = True,
    categorical: bool = True,
) -> dict[str, Any]:
    fields: dict[str, Any] = {
        n: {"type": "numeric", "namespace": "n",
            "transform": {"bins": BINS[n]} if numeric == "bins" else numeric}
        for n in NUMERIC
    }  # fmt: skip
    if categorical:
        fields.update({c: {"type": "categorical", "namespace": "c"} for c in CATEGORICAL})
    return {"kind": "records", "bits": 20, "intercept": intercept, "fields": fields,
            "interactions": [list(t) for t in interactions]}  # fmt: skip


@pytest.fixture(scope="module")
def adult() -> tuple[list[dict[str, Any]], list[str], list[dict[str, Any]], list[str]]:
    kw: dict[str, Any] = {"label": "class", "numeric": NUMERIC, "missing": "?"}
    tr, ytr = read_csv_records(require_data("adult-raw", "adult.data"), **kw)
    te, yte = read_csv_records(require_data("adult-raw", "adult.test"), **kw)
    assert (len(tr), len(te)) == (32561, 16281)
    return tr, ytr, te, yte


def one_pass(config: dict[str, Any], data: Any, algo: str = "arow", **params: Any) -> float:
    tr, ytr, te, yte = data
    enc = RecordEncoder(config)
    clf = make_classifier(algo, enc.dim, params)
    clf.update(enc.learn(tr), ytr)
    return float(np.mean(np.asarray(clf.predict(enc.encode(te))) == np.asarray(yte)))


# what each numeric transform and the interactions give, AROW (r=1, diagonal)
ADULT: dict[tuple[str, tuple[tuple[str, ...], ...]], float] = {
    ("none", ()): 0.8488,
    ("log1p", ()): 0.8437,
    ("standardize", ()): 0.8518,
    ("bins", ()): 0.8612,
    ("bins", (("c", "c"),)): 0.8534,
    ("bins", (("c", "n"),)): 0.8495,
    ("standardize", (("c", "n"),)): 0.8460,
}


@pytest.mark.parametrize(("numeric", "inter"), list(ADULT), ids=lambda v: str(v))
def test_adult_raw_one_pass(adult, numeric: str, inter: tuple[tuple[str, ...], ...]) -> None:
    acc = one_pass(adult_config(numeric, inter), adult)
    assert acc == pytest.approx(ADULT[(numeric, inter)], abs=TOL)


def test_adult_raw_meets_the_goal(adult) -> None:
    # the issue's goal, above VW's one pass (0.846 - 0.850) and AROW on a9a (0.8489)
    assert one_pass(adult_config("bins"), adult) >= 0.850


# The intercept: every adult record has one value of each categorical field, so their
# one-hot features already sum to a constant and the intercept adds nothing there (as on
# a9a: PA-I C=1 0.7577 without, 0.7492 with a constant column; AROW 0.8489 / 0.8490).
# With the numeric fields alone (standardized: centred) it is the only bias term.
INTERCEPT = {
    ("arow", None, True): 0.8121,
    ("arow", None, False): 0.7791,
    ("pa1", 0.01, True): 0.8017,
    ("pa1", 0.01, False): 0.7847,
    ("pa1", 1.0, True): 0.7829,
    ("pa1", 1.0, False): 0.7716,
}


@pytest.mark.parametrize("algo_c", [("arow", None), ("pa1", 0.01), ("pa1", 1.0)], ids=str)
def test_intercept_helps_numeric_records(adult, algo_c: tuple[str, float | None]) -> None:
    algo, c = algo_c
    params = {} if c is None else {"C": c}
    acc = {
        ic: one_pass(adult_config("standardize", intercept=ic, categorical=False), adult,
                     algo, **params)
        for ic in (True, False)
    }  # fmt: skip
    for ic in (True, False):
        assert acc[ic] == pytest.approx(INTERCEPT[(algo, c, ic)], abs=TOL)
    assert acc[True] > acc[False] + 0.01


@pytest.fixture(scope="module")
def sms() -> tuple[list[dict[str, Any]], list[str], list[dict[str, Any]], list[str]]:
    return sms_split()


def sms_split() -> tuple[list[dict[str, Any]], list[str], list[dict[str, Any]], list[str]]:
    """The documented split (module docstring): train records, labels, test records, labels."""
    texts, labels = read_labeled_text(require_data("sms-spam", "SMSSpamCollection"))
    pairs = list(zip(texts, labels, strict=True))
    random.Random(0).shuffle(pairs)
    n = int(0.8 * len(pairs))
    assert (len(pairs), n) == (5574, 4459)
    return (
        [{"text": t} for t, _ in pairs[:n]],
        [y for _, y in pairs[:n]],
        [{"text": t} for t, _ in pairs[n:]],
        [y for _, y in pairs[n:]],
    )


def sms_config(**text: Any) -> dict[str, Any]:
    return {"kind": "records", "bits": 20, "fields": {"text": {"type": "text", **text}}}


# AROW one pass; text lower-cased, log(1 + tf), L2-normalised (the defaults)
SMS: dict[str, tuple[dict[str, Any], float]] = {
    "words": ({}, 0.9848),
    "words 1-2": ({"words": {"ngrams": 2}}, 0.9865),
    "words + chars 3-5": ({"chars": {"ngrams": [3, 5]}}, 0.9874),
    "words + chars 2-5": ({"chars": {"ngrams": [2, 5]}}, 0.9883),
    "words + chars 3-5, idf": ({"chars": {"ngrams": [3, 5]}, "idf": True}, 0.9874),
    "words + chars 3-5, not normalised": ({"chars": {"ngrams": [3, 5]}, "normalize": False},
                                          0.9883),
}  # fmt: skip


@pytest.mark.parametrize("name", list(SMS))
def test_sms_spam_one_pass(sms, name: str) -> None:
    text, expect = SMS[name]
    acc = one_pass(sms_config(**text), sms)
    assert acc == pytest.approx(expect, abs=TOL)
    if "chars" in text:
        assert acc >= 0.985  # the issue's goal (VW one pass, words: 0.9776)
