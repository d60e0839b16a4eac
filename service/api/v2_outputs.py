"""A served model as the Open Inference Protocol sees it: its metadata (one input
``x``, the outputs of its task) and its predictions as output tensors.

Classifiers (dense online PA/CW/AROW/SCW, LL-SVM): ``label`` ``[batch]``, ``score``
``[batch]`` (the predicted label's), ``scores`` ``[batch, classes]``, ``classes``
``[classes]`` (the labels in the order of the ``scores`` columns), and
``confidence`` ``[batch]`` for CW/AROW/SCW once the model knows two labels. Labels
are INT64 when every label of the model is an integer, else BYTES (strings).
Rankers (dense RankSVM, LambdaMART): ``score`` ``[batch]``, and ``probability``
``[batch]`` for a binary model imported from LightGBM. Every value is the one
``POST /predict`` answers for the same rows (the same ``predict_batch``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from service.api.errors import ApiError
from service.api.v2_tensors import INPUT, Tensor, bad
from service.engine.model_handle import ModelHandle
from service.models.base import ModelAdapter


def output_names(adapter: ModelAdapter) -> list[str]:
    if adapter.tensor_task == "rank":  # a binary LightGBM import adds its probability
        binary = getattr(adapter, "objective", None) == "binary"
        return ["score", "probability"] if binary else ["score"]
    return ["label", "score", "scores", "classes"] + (
        ["confidence"] if adapter.has_confidence() else []
    )


def label_datatype(classes: list[Any]) -> str:
    return "INT64" if classes and all(_int64(c) for c in classes) else "BYTES"


def _int64(v: Any) -> bool:
    return type(v) is int and -(2**63) <= v < 2**63


def metadata(h: ModelHandle, width: int) -> dict[str, Any]:
    a = h.adapter
    classes = a.classes()
    labels = label_datatype(classes)
    k = -1 if a.online else len(classes)  # an online classifier learns new labels
    shapes = {
        "label": (labels, [-1]),
        "score": ("FP64", [-1]),
        "probability": ("FP64", [-1]),
        "scores": ("FP64", [-1, k]),
        "classes": (labels, [k]),
        "confidence": ("FP64", [-1]),
    }
    params = {"kind": a.kind, "task": a.tensor_task}
    if "algorithm" in a.config:
        params["algorithm"] = a.config["algorithm"]
    return {
        "name": h.name,
        "versions": [str(h.version)],
        "platform": f"learnserve_{a.kind}",
        "inputs": [{"name": INPUT, "datatype": "FP64", "shape": [-1, width]}],
        "outputs": [
            {"name": n, "datatype": shapes[n][0], "shape": shapes[n][1]} for n in output_names(a)
        ],
        "parameters": params,
    }


def output_tensors(
    preds: list[dict[str, Any]], wanted: list[tuple[str, bool]], explicit: bool
) -> list[tuple[Tensor, bool]]:
    """The tensors ``wanted`` ((name, binary) pairs) of ``predict_batch``'s answer.
    ``confidence`` is left out while the model has none (fewer than two labels),
    unless the request named it (then 400)."""
    n = len(preds)
    out: list[tuple[Tensor, bool]] = []
    classes = list(preds[0]["scores"]) if "scores" in preds[0] else []
    label_type = label_datatype(classes)
    for name, binary in wanted:
        if name in ("score", "confidence", "probability"):
            values = [p[name] for p in preds]
            if None in values:
                if not explicit:
                    continue
                raise bad("the model has no confidence yet (it knows one label)", "outputs")
            t = Tensor(name, "FP64", [n], _finite(np.array(values, dtype=np.float64)))
        elif name == "scores":
            rows = [list(p["scores"].values()) for p in preds]
            t = Tensor(name, "FP64", [n, len(classes)], _finite(np.array(rows, dtype=np.float64)))
        else:  # label, classes
            values = [p["label"] for p in preds] if name == "label" else classes
            t = _labels(name, values, label_type)
        out.append((t, binary))
    return out


def _labels(name: str, values: list[Any], datatype: str) -> Tensor:
    if datatype == "INT64":
        return Tensor(name, datatype, [len(values)], np.array(values, dtype=np.int64))
    return Tensor(name, datatype, [len(values)], [str(v) for v in values])


def _finite(a: np.ndarray) -> np.ndarray:
    """The model's figures, refused (400 naming the row) when one is not finite: the
    feature values are too large for its weights (as ``/predict`` refuses them)."""
    bad_rows = ~np.isfinite(a) if a.ndim == 1 else ~np.isfinite(a).all(axis=1)
    if bad_rows.any():
        i = int(np.argmax(bad_rows))
        raise ApiError(
            400,
            "invalid_input",
            f"inputs[0].data[{i}]: the model's score for these feature values is not "
            "finite; their magnitude is too large for the model's weights",
            f"inputs[0].data[{i}]",
        )
    return a
