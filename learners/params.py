"""scikit-learn's estimator protocol without importing scikit-learn.

:class:`EstimatorParams` gives a model ``get_params(deep=True)``, ``set_params(**p)``
and ``__sklearn_clone__`` from its ``__init__`` signature, so ``sklearn.base.clone``,
``GridSearchCV`` and ``Pipeline`` accept it (scikit-learn finds these methods by
name; nothing here imports it). The rules a model using it keeps:

- every ``__init__`` argument is stored unchanged under its own name;
- fitted state is set by ``fit`` (or ``from_bytes``) in attributes ending in ``_``;
- ``fit`` returns ``self``.

``__sklearn_tags__`` and the ranker's ``get_metadata_routing`` import scikit-learn
inside the method: only scikit-learn calls them.

``set_params`` re-runs ``__init__`` on the merged parameters before it assigns
them (which, for a model that only stores them, changes nothing); the models validate
in ``fit`` and ``check_params()``, as scikit-learn requires.

>>> class Demo(EstimatorParams):
...     def __init__(self, a: int = 1, b: str = "x") -> None:
...         self.a, self.b = a, b
>>> d = Demo().set_params(a=3)
>>> d.get_params()
{'a': 3, 'b': 'x'}
>>> d.__sklearn_clone__().get_params() == d.get_params()
True
"""

from __future__ import annotations

import copy
import inspect
from typing import Any

__all__ = ["EstimatorParams"]


class EstimatorParams:
    """``get_params``/``set_params``/clone for a class whose ``__init__`` stores its
    arguments (see the module docstring)."""

    @classmethod
    def _param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        skip = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
        return [p.name for p in sig.parameters.values() if p.name != "self" and p.kind not in skip]

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in self._param_names():
            value = getattr(self, name)
            if deep and hasattr(value, "get_params") and not isinstance(value, type):
                out.update((f"{name}__{k}", v) for k, v in value.get_params().items())
            out[name] = value
        return out

    def set_params(self, **params: Any) -> Any:
        if not params:
            return self
        names = self._param_names()
        own: dict[str, Any] = {}
        nested: dict[str, dict[str, Any]] = {}
        for key, value in params.items():
            name, sep, sub = key.partition("__")
            if name not in names:
                raise ValueError(
                    f"Invalid parameter {name!r} for estimator {type(self).__name__}. "
                    f"Valid parameters are: {sorted(names)!r}."
                )
            if sep:
                nested.setdefault(name, {})[sub] = value
            else:
                own[name] = value
        if own:
            checked = type(self)(**{**self.get_params(deep=False), **own})
            for name in own:
                setattr(self, name, getattr(checked, name))
        for name, sub_params in nested.items():
            getattr(self, name).set_params(**sub_params)
        return self

    def __sklearn_tags__(self) -> Any:
        # scikit-learn >= 1.6 asks every estimator for its tags. Only scikit-learn calls
        # this, so only then is it imported. ``_estimator_type`` ("classifier" for
        # LL-SVM) picks e.g. stratified folds by default.
        from sklearn.utils import ClassifierTags, Tags, TargetTags

        kind = getattr(self, "_estimator_type", None)
        return Tags(
            estimator_type=kind,
            target_tags=TargetTags(required=True),
            classifier_tags=ClassifierTags() if kind == "classifier" else None,
        )

    def __sklearn_clone__(self) -> Any:
        # An unfitted copy with deep-copied parameters: what sklearn.base.clone makes,
        # without its identity check (a model may normalise a value, e.g. 1 -> 1.0).
        params = self.get_params(deep=False)
        return type(self)(**{k: copy.deepcopy(v) for k, v in params.items()})
