"""Descriptions of a classifier prediction's ``confidence`` and ``probability`` (OpenAPI)."""

from __future__ import annotations

CONFIDENCE_DOC = (
    "online classifiers: CW, AROW, SCW: Φ(m/√v), the probability, under the model's "
    "Gaussian distribution of weights N(μ, Σ), that a weight vector drawn from it ranks "
    "the predicted label above the runner-up, with m = (μ_pred − μ_runner)·x and "
    "v = xᵀ(Σ_pred + Σ_runner)x (a binary model: m = |μ·x|, v = xᵀΣx); 0.5 for x = 0. "
    "It says how sure the model is of its own ranking given its weights' variances, not "
    "how often such predictions are right: it ignores label noise and the model's errors "
    "(AROW on a9a.t: at least 0.999 for 86% of rows, 89% of which are right). Use "
    "`probability` for that. null for PA, PA-I, PA-II (no variances) and while the model "
    "knows one label"
)
PROBABILITY_DOC = (
    "binary online classifiers (all seven algorithms): the calibrated probability that "
    "the predicted label is right: 1 / (1 + exp(-a·z)) of the link's score z "
    "(GET /models/{name}: online_metrics.probability), with a >= 0 the logistic "
    "regression (no intercept) of the model's last 1,000 progressive (scored before "
    "learned) examples, refit as it learns (GET /models/{name}: calibration). Never below "
    "0.5: the predicted label is the more probable. Expected calibration error on a9a.t "
    "after one pass over a9a: 0.011 (AROW) to 0.023 (PA, CW). Absent for multiclass "
    "models (no calibrated per-label probability) and while the model knows one label"
)
