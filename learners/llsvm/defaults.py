"""Data-dependent defaults of LL-SVM: a rule on n (examples), d (features) and C (classes).

The fixed defaults of :class:`~learners.llsvm.LLSVM` were tuned on MNIST (60,000
examples, 784 pixels, 10 classes: 2.02 % test error). On UCI letter (16,000
examples, 16 features, 26 classes) the same settings gave 11.97 % where the paper
reports 5.32 %: the model was *under-trained*, not mis-shaped (training error
13.6 % after the 10 passes). Measured on letter with everything else fixed:

======  =======  =======  =======  =======
passes  10       40       100      200
error   11.97 %  7.27 %   6.10 %   5.55 %
======  =======  =======  =======  =======

while 260 anchors instead of 100 (7.42 % at 40 passes), lambda from 3e-9 to 3e-7
(7.20-7.27 % at 40 passes; 3e-5 gave 16.6 %), t0 = 10,000 or beta 1 / 10 did not
help. What letter lacks is SGD steps *per class*: a one-vs-rest scorer learns from
its own class's examples, and letter has 615 of them per pass where MNIST has
6,000. Hence the rule for the number of passes:

``passes = clamp(ceil(60,000 * C / n), 10, 200)``: every class's scorer sees about
60,000 examples of its own class over the whole training, as on MNIST with 10
passes (MNIST keeps exactly its 10 passes; letter gets 98, USPS 83; small sets stop
at 200, a few seconds at their size).

``normalize = d >= 100``: unit-length rows suit images (the length of a pixel row
mostly measures ink or brightness: MNIST 2.22 % -> 2.02 %, USPS 6.23 % -> 5.23 %
at 80 passes); with few features the length is information (letter 5.55 % raw vs
5.78 % normalised at 200 passes, sklearn digits (d = 64) 1.48 % vs 2.04 %, River's
2-d Bananas 11.5 % vs 38.1 %).

``n_anchors = min(max(100, 2 C), max(n // 10, C))``: 100 suffices up to 50 classes
(more anchors did not help letter); with more classes each class keeps about two
anchors (the per-class k-means needs one at least); tiny sets keep >= 10 examples
per anchor. ``n_neighbours = min(8, n_anchors)``.

Everything else (``lam``, ``t0``, ``skip``, ``beta``, the weighting, the per-class
k-means init) keeps the MNIST-tuned value: none of them moved letter's error
beyond noise (one test error on letter is 0.025 points; the standard error of a
5.5 % error on 4,000 examples is 0.36 points).

>>> rule = default_params(16000, 16, 26)
>>> rule["passes"].value, rule["normalize"].value, rule["n_anchors"].value
(98, False, 100)
>>> default_params(60000, 784, 10)["passes"].value
10
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ANCHORS_BASE",
    "EXAMPLES_PER_CLASS",
    "MAX_PASSES",
    "MIN_PASSES",
    "NEIGHBOURS",
    "NORMALIZE_MIN_FEATURES",
    "Choice",
    "default_params",
    "resolve",
]

EXAMPLES_PER_CLASS = 60_000  # own-class SGD steps each one-vs-rest scorer gets (MNIST: 10 x 6,000)
MIN_PASSES = 10
MAX_PASSES = 200
NORMALIZE_MIN_FEATURES = 100
ANCHORS_BASE = 100
NEIGHBOURS = 8


@dataclass(frozen=True)
class Choice:
    """One default: its value and why (shown by ``learnserve train llsvm``)."""

    value: Any
    reason: str


def default_params(n: int, d: int, n_classes: int) -> dict[str, Choice]:
    """The rule's ``n_anchors``, ``n_neighbours``, ``passes`` and ``normalize`` for
    ``n`` examples of ``d`` features in ``n_classes`` classes (see the module doc)."""
    if n < 1 or d < 1 or n_classes < 1:
        raise ValueError(f"need n, d, n_classes >= 1, got {n}, {d}, {n_classes}")
    want = max(ANCHORS_BASE, 2 * n_classes)
    cap = max(n // 10, n_classes)
    anchors = min(want, cap, n)
    neighbours = min(NEIGHBOURS, anchors)
    raw = math.ceil(EXAMPLES_PER_CLASS * n_classes / n)
    passes = min(max(raw, MIN_PASSES), MAX_PASSES)
    normalize = d >= NORMALIZE_MIN_FEATURES
    return {
        "n_anchors": Choice(
            anchors,
            f"max({ANCHORS_BASE}, 2 x {n_classes} classes) = {want}"
            + (f", capped at {cap} (n/10, >= classes)" if anchors < want else ""),
        ),
        "n_neighbours": Choice(neighbours, f"min({NEIGHBOURS}, anchors)"),
        "passes": Choice(
            passes,
            f"ceil({EXAMPLES_PER_CLASS:,} x {n_classes} classes / {n:,} examples) = {raw}"
            + (f", clamped to [{MIN_PASSES}, {MAX_PASSES}]" if passes != raw else ""),
        ),
        "normalize": Choice(
            normalize,
            f"{d} features {'>=' if normalize else '<'} {NORMALIZE_MIN_FEATURES}",
        ),
    }


def resolve(
    n: int, d: int, n_classes: int, given: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, str]]:
    """``(params, notes)``: ``given`` (LLSVM keyword arguments, ``None`` = unset) with
    every unset key of the rule filled in; ``notes[key]`` says where each rule key's
    value came from (``"set"`` or ``"rule: <reason>"``). ``n_neighbours`` follows a
    given ``n_anchors`` (``min(8, n_anchors)``)."""
    rule = default_params(n, d, n_classes)
    params = {k: v for k, v in given.items() if v is not None}
    notes: dict[str, str] = {}
    for key, choice in rule.items():
        if key in params:
            notes[key] = "set"
            continue
        value = choice.value
        if key == "n_neighbours" and notes["n_anchors"] == "set":
            value = min(NEIGHBOURS, params["n_anchors"])
            notes[key] = f"rule: min({NEIGHBOURS}, the given anchors)"
        else:
            notes[key] = f"rule: {choice.reason}"
        params[key] = value
    return params, notes
