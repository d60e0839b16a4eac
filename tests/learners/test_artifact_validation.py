"""Malformed artifacts are refused by the loaders with an ArtifactError naming what is
wrong (the container's header, each kind's structure, non-finite scores, memory)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from learners import artifact
from learners.artifact import ArtifactError, ArtifactTooLarge
from learners.features import Batch
from learners.ranking.lambdamart import forest_need
from tests.learners.artifact_tools import (
    KINDS,
    LOADERS,
    edit_header,
    reseal,
    small_batch,
    split,
    valid_blobs,
    with_arrays,
    with_params,
)


def refused(blob: bytes, kind: str, match: str, **kw: Any) -> ArtifactError:
    with pytest.raises(ArtifactError, match=match) as info:
        LOADERS[kind](blob, **kw)
    return info.value


@pytest.mark.parametrize("kind", KINDS)
def test_valid_artifacts_load(kind: str) -> None:
    assert LOADERS[kind](valid_blobs()[kind]).kind == kind


# ------------------------------------------------------------------ the container


def test_deeply_nested_header_json() -> None:
    header, body = split(valid_blobs()["llsvm"])
    raw = json.dumps(header).encode()
    deep = b'{"x": ' + b"[" * 100_000 + b"]" * 100_000 + b", " + raw[1:]
    refused(reseal(deep, body), "llsvm", "nested too deeply")
    moderately = {**header, "meta": {"x": json.loads("[" * 200 + "]" * 200)}}
    refused(reseal(moderately, body), "llsvm", "nested more than 64 levels deep")


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"name": 7}, r"arrays\[0\]\.name must be a string, got 7"),
        ({"name": ["W"]}, r"arrays\[0\]\.name must be a string"),
        ({"dtype": ["float64"]}, "unsupported dtype"),
        ({"dtype": "object"}, "unsupported dtype 'object'"),
        ({"shape": [2**62, 4]}, "not an integer in"),
        ({"shape": [10**30]}, "not an integer in"),
        ({"shape": [-4]}, "not an integer in"),
        ({"shape": [2.0, 5]}, "not an integer in"),
        ({"shape": [True]}, "not an integer in"),
        ({"shape": [0, 2**47, 2**47]}, "impossibly large"),
        ({"shape": "4,5"}, "shape must be a list"),
        ({"offset": -8}, "offset must be a non-negative integer"),
        ({"offset": 2**40}, "lies outside the artifact body"),
        ({"nbytes": 8}, "but the header says 8"),
        ({"nbytes": "160"}, "nbytes must be a non-negative integer"),
    ],
)
def test_bad_array_entries(change: dict[str, Any], match: str) -> None:
    def fn(h: dict[str, Any]) -> None:
        h["arrays"][0].update(change)

    refused(edit_header(valid_blobs()["llsvm"], fn), "llsvm", match)


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("arrays", {"W": 1}, "'arrays' must be a JSON array"),
        ("params", [], "'params' must be a JSON object"),
        ("kind", 3, "'kind' must be a JSON string"),
        ("created_at", "yesterday", "'created_at' must be a number"),
    ],
)
def test_bad_header_fields(field: str, value: Any, match: str) -> None:
    blob = edit_header(valid_blobs()["llsvm"], lambda h: h.update({field: value}))
    with pytest.raises(ArtifactError, match=match):
        artifact.loads(blob)


def test_duplicate_array_names() -> None:
    def fn(h: dict[str, Any]) -> None:
        h["arrays"][1]["name"] = h["arrays"][0]["name"]

    refused(edit_header(valid_blobs()["llsvm"], fn), "llsvm", "appears twice")


def test_header_entry_not_an_object() -> None:
    blob = edit_header(valid_blobs()["llsvm"], lambda h: h["arrays"].append("W"))
    refused(blob, "llsvm", r"arrays\[3\] must be a JSON object")


def test_truncated_and_trailing() -> None:
    blob = valid_blobs()["fastxml"]
    refused(blob[:-1], "fastxml", "truncated")
    refused(blob[:20], "fastxml", "truncated")
    refused(blob + b"\x00" * 8, "fastxml", "trailing")


def test_array_memory_is_checked_before_copying() -> None:
    blob = valid_blobs()["llsvm"]
    err = refused(blob, "llsvm", "max_model_bytes", max_bytes=64)
    assert isinstance(err, ArtifactTooLarge) and err.what == "arrays"


# ------------------------------------------------------------------ LambdaMART


def ranker_arrays() -> dict[str, np.ndarray]:
    return artifact.loads(valid_blobs()["lambdamart"]).arrays


@pytest.mark.parametrize(
    ("name", "bad", "match"),
    [
        ("feature", lambda a: a.astype(np.float64), "'feature' must be 1-d int32, got float64"),
        ("left", lambda a: a.astype(np.int8), "'left' must be 1-d int32, got int8"),
        ("node_off", lambda a: a.astype(np.int32), "'node_off' must be 1-d int64"),
        ("feature", lambda a: a.reshape(1, -1), "'feature' must be 1-d int32"),
        ("feature", lambda a: np.full_like(a, 5), r"feature\[0\] = 5 is outside \[0, 5\)"),
        ("feature", lambda a: np.full_like(a, -1), r"feature\[0\] = -1 is outside"),
        ("left", lambda a: np.full_like(a, 99), "points outside the tree or backwards"),
        ("left", lambda a: np.zeros_like(a), "points outside the tree or backwards"),
        ("right", lambda a: np.full_like(a, -1), "do not form a tree"),
        ("node_off", lambda a: a[::-1].copy(), "node_off must run from 0"),
        ("leaf_off", lambda a: a[:-1].copy(), "must both be n_trees \\+ 1 long"),
        ("threshold", lambda a: np.where(np.arange(a.size) == 1, np.nan, a), r"threshold\[1\]"),
        ("leaf_value", lambda a: np.full_like(a, np.inf), "scores must be finite"),
        ("leaf_value", lambda a: np.full_like(a, 1e308), "scores would overflow"),
        ("threshold", lambda a: a[:-1].copy(), "one entry per node"),
    ],
)
def test_lambdamart_inconsistent_trees(name: str, bad: Any, match: str) -> None:
    arrays = ranker_arrays()
    blob = with_arrays(valid_blobs()["lambdamart"], **{name: bad(arrays[name])})
    refused(blob, "lambdamart", match)


def test_lambdamart_node_off_not_monotonic() -> None:
    no = ranker_arrays()["node_off"].copy()
    no[1], no[2] = no[2], no[1]
    blob = with_arrays(valid_blobs()["lambdamart"], node_off=no)
    refused(blob, "lambdamart", "node_off is not monotonic|one more leaf")


@pytest.mark.parametrize("n", [0, -3, 2**62, 10**30, 1.5, "5", None, True])
def test_lambdamart_bad_n_features(n: Any) -> None:
    blob = with_params(valid_blobs()["lambdamart"], "meta", n_features=n)
    refused(blob, "lambdamart", "meta.n_features")


def test_lambdamart_n_features_costs_nothing_to_load() -> None:
    # Declared features cost no memory (they took 8 bytes each: 2.4 GB for 300M, issue
    # #20): scoring maps the features the trees test, so the artifact loads in 1 MiB.
    small = LOADERS["lambdamart"](valid_blobs()["lambdamart"], max_bytes=1 << 20)
    for n in (300_000_000, 2**31 - 1):
        blob = with_params(valid_blobs()["lambdamart"], "meta", n_features=n)
        m = LOADERS["lambdamart"](blob, max_bytes=1 << 20)
        assert m.n_features_ == n
        batch = small_batch(small, np.random.default_rng(0), rows=6)
        wide = Batch(batch.indptr, batch.indices, batch.values, n)
        assert np.array_equal(m.predict(wide), small.predict(batch))


def test_lambdamart_trees_held_to_the_memory_limit() -> None:
    # What scoring derives from the trees (per node and leaf) counts, checked before
    # it is allocated.
    blob = valid_blobs()["lambdamart"]
    art = artifact.loads(blob)
    nn, nl = art.arrays["feature"].shape[0], art.arrays["leaf_value"].shape[0]
    need = forest_need(sum(a.nbytes for a in art.arrays.values()), nn, nl, 5)
    err = refused(blob, "lambdamart", rf"trees \({nn} nodes, {nl} leaves\)", max_bytes=need - 1)
    assert isinstance(err, ArtifactTooLarge) and err.need == need
    assert "max_model_bytes" in str(err)
    assert LOADERS["lambdamart"](blob, max_bytes=need).n_features_ == 5


# ------------------------------------------------------------------ FastXML


@pytest.mark.parametrize(
    ("name", "bad", "match"),
    [
        ("w_idx", lambda a: a.astype(np.float64), "'w_idx' must be 1-d int64"),
        ("leaf_lab", lambda a: a.astype(np.int8), "'leaf_lab' must be 1-d int64"),
        ("leaf_lab", lambda a: np.full_like(a, 3), r"leaf label is outside \[0, 3\)"),
        ("w_idx", lambda a: np.full_like(a, 6), "feature id is outside"),
        ("child_pos", lambda a: np.where(a >= 0, 10**6, a), "out of range"),
        ("w_ptr", lambda a: a[::-1].copy(), "w_ptr/w_idx/w_val are inconsistent"),
        ("w_val", lambda a: np.full_like(a, np.nan), "non-finite"),
        ("leaf_val", lambda a: np.full_like(a, np.inf), "non-finite"),
        ("leaf_val", lambda a: np.full_like(a, 1e308), "scores would overflow"),
    ],
)
def test_fastxml_inconsistent_forest(name: str, bad: Any, match: str) -> None:
    arrays = artifact.loads(valid_blobs()["fastxml"]).arrays
    blob = with_arrays(valid_blobs()["fastxml"], **{name: bad(arrays[name])})
    refused(blob, "fastxml", match)


@pytest.mark.parametrize("key", ["n_features", "n_labels"])
@pytest.mark.parametrize("v", [0, -1, 2**62, 10**30, 2.5, "7"])
def test_fastxml_bad_sizes(key: str, v: Any) -> None:
    refused(with_params(valid_blobs()["fastxml"], **{key: v}), "fastxml", f"params.{key}")


def test_fastxml_label_scratch_held_to_the_memory_limit() -> None:
    blob = with_params(valid_blobs()["fastxml"], n_labels=2**39)
    err = refused(blob, "fastxml", "params.n_labels", max_bytes=1 << 30)
    assert isinstance(err, ArtifactTooLarge)


# ------------------------------------------------------------------ LL-SVM


@pytest.mark.parametrize(
    ("name", "value", "match"),
    [
        ("W", np.nan, "'W' has non-finite"),
        ("b", np.inf, "'b' has non-finite"),
        ("anchors", np.nan, "'anchors' has non-finite"),
        ("anchors", 1e200, "too large to measure distances"),
    ],
)
def test_llsvm_non_finite_weights(name: str, value: float, match: str) -> None:
    a = artifact.loads(valid_blobs()["llsvm"]).arrays[name].copy()
    a.reshape(-1)[0] = value
    refused(with_arrays(valid_blobs()["llsvm"], **{name: a}), "llsvm", match)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"classes": [2**70, 1], "label_type": "int"}, "beyond int64"),
        ({"classes": ["a", "a"]}, "duplicates"),
        ({"classes": ["a", 1]}, "not all str"),
        ({"n_features": 2**62}, "inconsistent shapes"),
        ({"n_features": 1.5}, "params.n_features"),
        ({"steps": -1}, "params.steps"),
        ({"n_neighbours": 9}, "bad params|inconsistent"),
    ],
)
def test_llsvm_bad_params(change: dict[str, Any], match: str) -> None:
    refused(with_params(valid_blobs()["llsvm"], **change), "llsvm", match)


def test_llsvm_wrong_dtype() -> None:
    W = artifact.loads(valid_blobs()["llsvm"]).arrays["W"]
    refused(with_arrays(valid_blobs()["llsvm"], W=W.astype(np.float64)), "llsvm", "inconsistent")


def test_read_header_gives_params_and_meta_without_the_arrays() -> None:
    blob = artifact.dumps(
        "demo", {"c": 1.5, "names": ["a", "b"]}, {"w": np.arange(1000.0)},
        meta={"data": {"n": 7}}, created_at=12.0,
    )  # fmt: skip
    h = artifact.read_header(blob)
    assert (h["kind"], h["params"], h["meta"], h["created_at"]) == (
        "demo", {"c": 1.5, "names": ["a", "b"]}, {"data": {"n": 7}}, 12.0,
    )  # fmt: skip
    assert h["format_version"] == artifact.FORMAT_VERSION
    assert h["arrays"][0]["shape"] == [1000]
    for bad, words in [(b"x" * 40, "magic"), (blob[:10], "truncated"), (blob[:30], "header")]:
        with pytest.raises(ArtifactError, match=words):
            artifact.read_header(bad)
