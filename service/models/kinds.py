"""Model kinds the service hosts, each one adapter module (see :mod:`service.models.base`).

``ALGORITHMS`` maps the ``"algorithm"`` of a ``PUT /models/{name}`` body to a
kind; ``ADAPTERS`` maps a kind (stored in the model's config as ``"kind"``) to
its adapter class. Imports are lazy so a kind's learners load only when used.
"""

from __future__ import annotations

import importlib
from typing import Any

from service.errors import invalid
from service.models.base import ModelAdapter

ADAPTERS: dict[str, str] = {
    "linear": "service.models.linear:LinearAdapter",
    "ranksvm": "service.models.ranksvm:RankSVMAdapter",
    "regression": "service.models.regression:RegressionAdapter",
    "decision": "service.models.decision_follower:DecisionKind",
    # batch kinds: deployed with PUT /models/{name}/artifact (kind = the artifact's kind)
    "lambdamart": "service.models.lambdamart:LambdaMARTAdapter",
    "llsvm": "service.models.llsvm:LLSVMAdapter",
    "fastxml": "service.models.fastxml:FastXMLAdapter",
}

ALGORITHMS: dict[str, str] = {
    "pa": "linear",
    "pa1": "linear",
    "pa2": "linear",
    "cw": "linear",
    "arow": "linear",
    "scw1": "linear",
    "scw2": "linear",
    "ranksvm": "ranksvm",
    "pa_regression": "regression",
    "pa1_regression": "regression",
    "pa2_regression": "regression",
    "arow_regression": "regression",
    "sgd_regression": "regression",
    "decision": "decision",
}


def adapter_class(kind: str) -> type[ModelAdapter]:
    try:
        target = ADAPTERS[kind]
    except KeyError:
        raise ValueError(f"unknown model kind {kind!r}") from None
    module, _, attr = target.partition(":")
    cls: type[ModelAdapter] = getattr(importlib.import_module(module), attr)
    return cls


def adapter_for_body(body: dict[str, Any]) -> type[ModelAdapter]:
    """The adapter class for a ``PUT /models/{name}`` body, from its ``algorithm``."""
    algorithm = body.get("algorithm")
    kind = ALGORITHMS.get(algorithm) if isinstance(algorithm, str) else None
    if kind is None:
        raise invalid(
            f"algorithm: must be one of {sorted(ALGORITHMS)}, got {algorithm!r}", "algorithm"
        )
    return adapter_class(kind)
