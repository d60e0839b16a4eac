"""A served model as the Open Inference Protocol sees it: its metadata (one input
``x``, the outputs of its task) and its predictions as output tensors.

Classifiers (dense online PA/CW/AROW/SCW, LL-SVM): ``label`` ``[batch]``, ``score``
``[batch]`` (the predicted label's), ``scores`` ``[batch, classes]``, ``classes``
``[classes]`` (the labels in the order of the ``scores`` columns), and
``confidence`` ``[batch]`` for CW/AROW/SCW once the model knows two labels. Labels
are INT64 when every label of the model is an integer, else BYTES (strings).
Rankers (dense RankSVM, LambdaMART): ``score`` ``[batch]``, and ``probability``
``[batch]`` for a binary model imported from LightGBM. Regressors (dense online PA and
AROW regression): ``value`` ``[batch]``, and for AROW ``variance`` ``[batch]`` and
``interval`` ``[batch, 2]`` (the central 90 % interval, low then high). Every value is the one
``POST /predict`` answers for the same rows (the same ``predict_batch``).

What a request asks of its outputs (:func:`requested_outputs`) is done or refused
(400 naming the part), never ignored (null is the same as absent): ``binary_data``
(per output) and ``binary_data_output`` (the request's default) must be booleans (the
binary tensor data extension); ``classification: k`` on ``scores`` answers the classification
extension's top-k instead: BYTES ``[batch, min(k, classes)]``, each element
``"<score>:<index>:<label>"`` (index: the class's column in ``scores``), best first,
ties by index. Shared memory is refused, as is an output named twice.

>>> wanted, named = requested_outputs(
...     {"outputs": [{"name": "scores", "parameters": {"classification": 2}}]},
...     ["label", "score", "scores", "classes"])
>>> wanted, named
([Wanted(name='scores', binary=False, classification=2)], True)
>>> preds = [{"label": 7, "score": 2.5, "scores": {3: -1.0, 7: 2.5, 9: 0.25}}]
>>> t, binary = output_tensors(preds, wanted, named)[0]
>>> t.datatype, t.shape, t.data
('BYTES', [1, 2], ['2.5:1:7', '0.25:2:9'])
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from service.api.errors import ApiError
from service.api.request_bodies import type_name
from service.api.v2_tensors import INPUT, Tensor, bad
from service.engine.model_handle import ModelHandle
from service.models.base import ModelAdapter


def output_names(adapter: ModelAdapter) -> list[str]:
    if adapter.tensor_task == "regress":  # AROW adds its predictive variance and interval
        return ["value"] + (["variance", "interval"] if adapter.has_confidence() else [])
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
        "value": ("FP64", [-1]),
        "variance": ("FP64", [-1]),
        "interval": ("FP64", [-1, 2]),
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


class Wanted(NamedTuple):
    """An output to answer: its name, as binary data or not, and the number of top
    classes to answer instead of its values (the classification extension), if any."""

    name: str
    binary: bool
    classification: int | None = None


_OUTPUT_PARAMS = ("binary_data", "classification")


def requested_outputs(req: dict[str, Any], available: list[str]) -> tuple[list[Wanted], bool]:
    """The outputs to answer: those the request names, else (no ``outputs``, or an empty
    list) all ``available``; and whether it named them."""
    params = _absent(req.get("parameters"), {})
    if type(params) is not dict:
        raise bad(f"must be an object, got {type_name(params)}", "parameters")
    default = _absent(params.get("binary_data_output"), False)
    if type(default) is not bool:
        raise bad(_not_bool(default), "parameters.binary_data_output")
    asked = _absent(req.get("outputs"), [])
    if type(asked) is not list:
        raise bad(f"must be an array of {{'name': ...}}, got {type_name(asked)}", "outputs")
    if not asked:
        return [Wanted(n, default) for n in available], False
    out: list[Wanted] = []
    first: dict[str, int] = {}
    for i, o in enumerate(asked):
        where = f"outputs[{i}]"
        at = where + ".name"
        if type(o) is not dict:
            raise bad(f"must be an object {{'name': ...}}, got {type_name(o)}", where)
        name = o.get("name")
        if type(name) is not str or name not in available:
            raise bad(f"{name!r:.80} is not one of this model's outputs {available}", at)
        if name in first:
            raise bad(f"{name!r} is asked for twice (also outputs[{first[name]}])", at)
        first[name] = i
        out.append(_wanted(name, _absent(o.get("parameters"), {}), default, available, where))
    return out, True


def _wanted(name: str, p: Any, default: bool, available: list[str], where: str) -> Wanted:
    where += ".parameters"
    if type(p) is not dict:
        raise bad(f"must be an object, got {type_name(p)}", where)
    for key in p:
        if key not in _OUTPUT_PARAMS:
            why = (
                "shared memory is not supported: outputs travel in the response body"
                if key.startswith("shared_memory_")
                else f"not an output parameter of this server ({', '.join(_OUTPUT_PARAMS)})"
            )
            raise bad(why, f"{where}.{key[:40]}")
    binary = _absent(p.get("binary_data"), default)
    if type(binary) is not bool:
        raise bad(_not_bool(binary), f"{where}.binary_data")
    k = p.get("classification")
    if k is None:
        return Wanted(name, binary)
    where += ".classification"
    if "scores" not in available:
        raise bad("this model ranks: it has no per-class scores to classify", where)
    if name != "scores":
        raise bad(f"classification is offered on 'scores' (one per class), not {name!r}", where)
    if type(k) is not int or k < 1:
        raise bad(f"must be a count of classes (an integer >= 1), got {k!r:.40}", where)
    return Wanted(name, binary, k)


def _absent(v: Any, default: Any) -> Any:
    """``default`` for an absent field or a null one (as for ``inputs[0].parameters``)."""
    return default if v is None else v


def _not_bool(v: Any) -> str:
    return f"must be true or false (the binary tensor data extension), got {v!r:.40}"


def output_tensors(
    preds: list[dict[str, Any]], wanted: list[Wanted], named: bool
) -> list[tuple[Tensor, bool]]:
    """The tensors ``wanted`` of ``predict_batch``'s answer, with whether each is binary.
    ``confidence`` is left out while the model has none (fewer than two labels),
    unless the request named it (then 400)."""
    n = len(preds)
    out: list[tuple[Tensor, bool]] = []
    classes = list(preds[0]["scores"]) if "scores" in preds[0] else []
    label_type = label_datatype(classes)
    for name, binary, top in wanted:
        if name == "interval":  # a regressor's [low, high] per row
            rows = [p["interval"] for p in preds]
            t = Tensor(name, "FP64", [n, 2], _finite(np.array(rows, dtype=np.float64)))
        elif name in ("score", "confidence", "probability", "value", "variance"):
            values = [p[name] for p in preds]
            if None in values:
                if not named:
                    continue
                raise bad("the model has no confidence yet (it knows one label)", "outputs")
            t = Tensor(name, "FP64", [n], _finite(np.array(values, dtype=np.float64)))
        elif name == "scores":
            rows = [list(p["scores"].values()) for p in preds]
            scores = _finite(np.array(rows, dtype=np.float64).reshape(n, len(classes)))
            if top is None:
                t = Tensor(name, "FP64", [n, len(classes)], scores)
            else:
                t = _top_classes(scores, classes, top)
        else:  # label, classes
            values = [p["label"] for p in preds] if name == "label" else classes
            t = _labels(name, values, label_type)
        out.append((t, binary))
    return out


def _top_classes(scores: np.ndarray, classes: list[Any], k: int) -> Tensor:
    """The classification extension's answer for ``scores``: per row, the ``k`` best
    classes as ``"<score>:<index>:<label>"`` (``k`` at most the number of classes)."""
    k = min(k, len(classes))
    order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    labels = [str(c) for c in classes]
    data = [f"{float(row[j])!r}:{j}:{labels[j]}" for row, js in zip(scores, order, strict=True)
            for j in js]  # fmt: skip
    return Tensor("scores", "BYTES", [len(scores), k], data)


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
