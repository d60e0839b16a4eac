"""``learners.records.sklearn.RecordTransformer`` in scikit-learn pipelines: on SMS (the
split of ``test_records_quality``) before this project's AROW it gives the in-process
encoder + AROW's accuracy; before scikit-learn's LogisticRegression, a pinned figure;
and it behaves as a scikit-learn estimator (params, clone, fit resets, partial_fit)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline

from learners.linear.sklearn import AROWClassifier
from learners.records import RecordEncoder
from learners.records.sklearn import RecordTransformer
from tests.learners.test_records_quality import SMS, one_pass, sms_config, sms_split

TOL = 0.002


@pytest.fixture(scope="module")
def sms() -> Any:
    return sms_split()


CHARS = {"chars": {"ngrams": [3, 5]}}
IDF = {"chars": {"ngrams": [3, 5]}, "idf": True}


def _accuracy(pipe: Pipeline, data: Any) -> float:
    tr, ytr, te, yte = data
    pipe.fit(tr, ytr)
    return float(np.mean(pipe.predict(te) == np.asarray(yte)))


def test_before_arow_it_gives_the_in_process_accuracy(sms: Any) -> None:
    # words + chars 3-5 keep no statistics: the very rows of RecordEncoder.learn
    pipe = Pipeline(
        [("records", RecordTransformer(sms_config(**CHARS))), ("arow", AROWClassifier())]
    )
    acc = _accuracy(pipe, sms)
    assert acc == pytest.approx(one_pass(sms_config(**CHARS), sms), abs=TOL)
    assert acc == pytest.approx(SMS["words + chars 3-5"][1], abs=TOL)


def test_with_idf_within_the_tolerance_of_the_online_protocol(sms: Any) -> None:
    # fit_transform encodes the training records with the final idf, the online protocol
    # each with the idf of the records before it: not the same rows, nearly the accuracy
    pipe = Pipeline([("records", RecordTransformer(sms_config(**IDF))), ("arow", AROWClassifier())])
    acc = _accuracy(pipe, sms)
    assert acc == pytest.approx(0.9874, abs=TOL)  # measured
    assert abs(acc - one_pass(sms_config(**IDF), sms)) <= 0.005


def test_before_scikit_learns_logistic_regression(sms: Any) -> None:
    pipe = Pipeline(
        [("records", RecordTransformer(sms_config(**CHARS))), ("lr", LogisticRegression())]
    )
    # scikit-learn defaults (C=1, lbfgs), not tuned: measured
    assert _accuracy(pipe, sms) == pytest.approx(0.9749, abs=TOL)


CONFIG = {"kind": "records", "bits": 8,
          "fields": {"age": {"type": "numeric", "transform": "standardize"},
                     "job": {"type": "categorical"}}}  # fmt: skip
RECORDS = [{"age": 39, "job": "clerk"}, {"age": 50}, {"job": "exec"}, {"age": 23, "job": None}]


def test_estimator_basics() -> None:
    t = RecordTransformer(CONFIG)
    assert t.get_params() == {"config": CONFIG}
    assert clone(t).get_params()["config"] == CONFIG
    with pytest.raises(NotFittedError):
        t.transform(RECORDS)
    X = t.fit_transform(RECORDS)
    assert sp.isspmatrix_csr(X) and X.dtype == np.float64 and X.shape == (4, 256)
    # the rows RecordEncoder gives with the statistics of all four records
    enc = RecordEncoder(CONFIG)
    enc.observe(RECORDS)
    b = enc.encode(RECORDS)
    assert np.array_equal(X.toarray(), sp.csr_matrix((b.values, b.indices, b.indptr)).toarray())
    # transform changes nothing; fit starts again; partial_fit adds in order
    digest = t.encoder_.state_digest()
    t.transform(RECORDS[:1])
    assert t.encoder_.state_digest() == digest
    assert t.fit(RECORDS).encoder_.state_digest() == digest
    parts = RecordTransformer(CONFIG).partial_fit(RECORDS[:2]).partial_fit(iter(RECORDS[2:]))
    assert parts.encoder_.state_digest() == digest
    assert t.set_params(config={**CONFIG, "bits": 4}).fit(RECORDS).transform(RECORDS).shape == (
        4,
        16,
    )
    assert clone(t).config["bits"] == 4 and not hasattr(clone(t), "encoder_")
    with pytest.raises(ValueError, match="bits"):
        RecordTransformer({**CONFIG, "bits": 0}).fit(RECORDS)


def test_learners_import_without_scikit_learn_or_scipy() -> None:
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('sklearn', 'scipy'):\n"
        "            raise ImportError('blocked ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import learners, learners.records, learners.features, learners.linear\n"
        "from learners.records import RecordEncoder\n"
        "fields = {'a': {'type': 'numeric'}}\n"
        "print(RecordEncoder({'kind': 'records', 'bits': 4, 'fields': fields}).dim)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert (out.returncode, out.stdout.strip()) == (0, "16"), out.stderr
