"""The metrics ``learnserve evaluate`` prints, computed from a model's answers: one
function per kind of task, used by ``evaluate`` (local model) and by ``predict`` (the
service's answers), so both print the same figures for the same model and file.

Keys are lower case, ``name@k`` for a cut-off, in the order printed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

RANKING_AT = (1, 3, 5, 10)  # LightGBM's lambdarank example's eval_at
XML_AT = (1, 3, 5)


def ranking(scores: Any, relevance: Any, groups: Any) -> dict[str, float]:
    """NDCG@1/3/5/10 (LightGBM's definition: gain ``2**r - 1``, mean over queries)."""
    from learners.ranking.ndcg import ndcg_at_k

    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(relevance, dtype=np.float64)
    g = np.asarray(groups, dtype=np.int64)
    return {f"ndcg@{k}": ndcg_at_k(s, y, g, k) for k in RANKING_AT}


def ndcg_gain_problem(relevance: Sequence[float]) -> str | None:
    """Why NDCG's ``2**r - 1`` gain does not apply (``None``: it does): LightGBM takes
    integer labels in [0, 30]; RankSVM learns from any real relevance."""
    bad = next((r for r in relevance if not (float(r).is_integer() and 0 <= r <= 30)), None)
    if bad is None:
        return None
    return f"relevance {bad!r} is not an integer in [0, 30] (NDCG's 2**r - 1 gain)"


def extreme(top: np.ndarray, truth: Sequence[np.ndarray]) -> dict[str, float]:
    """P@1/3/5 and nDCG@1/3/5 (XC Repository definitions) of the top-5 label ids of each
    row (``-1`` pads a shorter list) against the true label sets."""
    from learners.xml.metrics import xml_metrics

    return {k.lower(): v for k, v in xml_metrics(top, list(truth), XML_AT).items()}


def pad_top(ids: Sequence[Sequence[int]], k: int = max(XML_AT)) -> np.ndarray:
    """Label id lists (best first, perhaps shorter than ``k``) as an ``(n, k)`` array."""
    out = np.full((len(ids), k), -1, dtype=np.int64)
    for i, row in enumerate(ids):
        row = list(row)[:k]
        out[i, : len(row)] = row
    return out


def classification(predicted: Sequence[Any], truth: Sequence[Any]) -> dict[str, Any]:
    """Accuracy, error and the number of examples."""
    n = len(truth)
    correct = sum(int(p == t) for p, t in zip(predicted, truth, strict=True))
    acc = correct / n if n else 0.0
    return {"accuracy": acc, "error": 1.0 - acc, "examples": n}


def label_values(y: np.ndarray) -> list[Any]:
    """A file's labels as the service answers them: integral floats as ints."""
    arr = np.asarray(y)
    if arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
        return [int(v) for v in arr.tolist()]
    return list(arr.tolist())


def display(kind: str, metrics: dict[str, Any]) -> str:
    """One ``key  value`` line per metric, floats rounded to 4 digits, keys aligned."""
    width = max([len("kind"), *map(len, metrics)])
    lines = [f"{'kind':<{width}}  {kind}"]
    for key, value in metrics.items():
        shown = f"{value:.4f}" if isinstance(value, float) else str(value)
        lines.append(f"{key:<{width}}  {shown}")
    return "\n".join(lines) + "\n"
