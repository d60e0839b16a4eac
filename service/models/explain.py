"""``POST /models/{name}/explain``: the features an input makes and what each adds to
the score, as Vowpal Wabbit's ``--audit`` prints them.

Body: ``{"x": <features>}`` (what ``/predict`` takes as an instance's ``x``) or
``{"instances": [{"x": ...}, ...]}`` (at most :data:`MAX_INSTANCES`). Answer, per input::

    {"features": [{"name": "job=clerk", "index": 7310, "value": 1.0,
                   "weights": [0.21, -0.21], "contributions": [0.21, -0.21]}, ...],
     "scores": [0.83, -0.83]}

with ``labels`` (the order of ``weights``, ``contributions`` and ``scores``) once for
the answer. ``index`` is the column in the model's weights (0-based, what
``GET /models/{name}/weights`` lists); ``contributions[k] = value * weights[k]`` and
``scores[k]`` is their sum, the model's score ``w_k · x`` of label ``k`` (a binary
model scores its second label with the first one's negated weights; a ranker has one
``w`` and ``labels: [null]``; a model that has learned nothing has ``labels: []``).
A regressor (``labels: [null]``) predicts ``m + w · x``: its answer has ``baseline``
(``m``, the running mean of the targets learned), ``scores`` is ``[/predict's value]``,
``baseline`` plus the contributions, and ``clipped`` says whether the prediction was
clipped to the range of targets seen (``sgd_regression``), when it is not that sum.

Names, by feature kind: ``records`` as :meth:`learners.records.RecordEncoder.explain`
gives them (``age#3``, ``job=clerk``, ``note^free``; several names may share a column,
each listed); ``hashed`` as sent (``age``, or ``job=clerk`` for a string value);
``sparse`` the key as sent; ``dense`` none (``null``). Dense and sparse list the non-zero
values only. Errors are the ``/predict`` ones (422 naming ``x.<field>`` or
``instances[i].x.<field>``), also for a contribution or score that overflows (``x`` or
``instances[i].x``: an answer's numbers are finite).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from learners.feature_keys import hashed_indices
from learners.features import FeatureSpec
from learners.intercept import INTERCEPT_NAME
from service.errors import ServiceError, invalid
from service.models.json_fields import items_field, require_list
from service.models.online_config import encode_features

if TYPE_CHECKING:
    from service.settings import Settings

MAX_INSTANCES = 100  # an audit is for reading: a few inputs, each with every feature named


def read_inputs(body: dict[str, Any]) -> tuple[list[Any], str]:
    """The ``x`` of each input, and where the body holds them (``"x"`` or
    ``"instances"``), for errors to name the body's own field."""
    keys = set(body)
    if keys == {"x"}:
        return [body["x"]], "x"
    if keys == {"instances"}:
        return items_field(require_list(body, "instances", MAX_INSTANCES), "instances", "x"), (
            "instances"
        )
    if not keys & {"x", "instances"}:
        raise invalid('x: field required (or "instances": [{"x": ...}, ...])', "x")
    extra = sorted(keys - {"x"} if "x" in keys else keys - {"instances"})[0]
    raise invalid(f"{extra}: unknown field (the body holds x or instances, not both)", extra)


def _encode(spec: FeatureSpec, xs: list[Any], form: str, settings: Settings) -> Any:
    """``/predict``'s encoding (and its errors); a single ``x``'s errors name ``x``."""
    try:
        return encode_features(spec, xs, "instances", settings)
    except ServiceError as e:
        if form == "x" and e.field is not None and e.field.startswith("instances[0].x"):
            field = e.field.replace("instances[0].x", "x", 1)
            raise ServiceError(
                e.kind, e.code, e.message.replace("instances[0].x", "x", 1), field
            ) from None
        raise


def _hashed_names(x: dict[str, Any]) -> list[tuple[str, float]]:
    # FeatureSpec.hashed's rule: a string value v of key k is the feature "k=v", value 1
    return [(f"{k}={v}", 1.0) if isinstance(v, str) else (str(k), float(v)) for k, v in x.items()]


def features_of(spec: FeatureSpec, x: Any, row: tuple[np.ndarray, np.ndarray]) -> list[Any]:
    """``(name, column, value)`` of one input already encoded (``row``: its columns and
    values in the batch)."""
    if spec.kind == "records":
        return list(spec.encoder.explain(x))
    if spec.kind == "hashed":
        pairs = _hashed_names(x)
        cols = hashed_indices([n for n, _ in pairs], spec.dim - 1).tolist()
        out = [(n, c, v) for (n, v), c in zip(pairs, cols, strict=True)]
        if spec.intercept_column is not None:  # the constant the parser adds to every row
            out.append((INTERCEPT_NAME, spec.intercept_column, 1.0))
        return out
    cols, vals = row
    nonzero = vals != 0.0
    name = spec.kind == "sparse"
    base = spec.index_base
    return [
        (str(c + base) if name else None, int(c), float(v))
        for c, v in zip(cols[nonzero].tolist(), vals[nonzero].tolist(), strict=True)
    ]


def _weight_rows(model: Any) -> tuple[list[Any], list[np.ndarray]]:
    """The labels and the weights that score each (a ranker: ``[None]`` and ``coef_``)."""
    if hasattr(model, "label_weights"):
        labels = list(model.labels_)
        return labels, [model.label_weights(lab)[0] for lab in labels]
    return [None], [np.asarray(model.coef_, dtype=np.float64)]


def explain(
    spec: FeatureSpec, model: Any, body: dict[str, Any], settings: Settings
) -> dict[str, Any]:
    """The answer's ``labels`` and ``explanations`` (see the module's doc)."""
    xs, form = read_inputs(body)
    batch = _encode(spec, xs, form, settings)
    labels, rows = _weight_rows(model)
    # a regressor predicts ŷ = m + coef_·x (m: the running mean of its targets): its
    # score is that, with m as the ``baseline`` (SGD's clipped to the targets' range)
    regressor = hasattr(model, "y_mean_") and hasattr(model, "predict_details")
    predicted = model.predict_details(batch)[0].tolist() if regressor else None
    out = []
    for i, x in enumerate(xs):
        lo, hi = int(batch.indptr[i]), int(batch.indptr[i + 1])
        feats = features_of(spec, x, (batch.indices[lo:hi], batch.values[lo:hi]))
        cols = np.array([c for _, c, _ in feats], dtype=np.int64)
        vals = np.array([v for _, _, v in feats], dtype=np.float64)
        w = np.stack([r[cols] for r in rows], axis=1) if rows else np.zeros((len(feats), 0))
        with np.errstate(over="ignore", invalid="ignore"):
            contrib = w * vals[:, None]
            scores = contrib.sum(axis=0)
            extra: dict[str, Any] = {}
            if predicted is not None:
                baseline = float(model.y_mean_)
                total = float(scores.sum()) + baseline
                scores = np.array([predicted[i]])
                clipped = not np.isclose(total, predicted[i], rtol=1e-9, atol=1e-12)
                extra = {"baseline": baseline, "clipped": bool(clipped)}
        if not (np.isfinite(contrib).all() and np.isfinite(scores).all()):
            # as /predict (service.models.finite_answers): never a JSON null for a number
            loc = "x" if form == "x" else f"instances[{i}].x"
            raise invalid(f"{loc}: a contribution or score overflows (not finite)", loc)
        out.append(
            {
                "features": [
                    {
                        "name": name,
                        "index": col,
                        "value": value,
                        "weights": w[k].tolist(),
                        "contributions": contrib[k].tolist(),
                    }
                    for k, (name, col, value) in enumerate(feats)
                ],
                "scores": scores.tolist(),
                **extra,
            }
        )
    return {"labels": labels, "explanations": out}
