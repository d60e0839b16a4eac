"""Online models as artifacts: export a model's state, start a model from one.

Export (``GET /models/{name}/state``): the learner's artifact (the container of
:mod:`learners.artifact`, kind ``"linear"``, ``"ranksvm"`` or ``"regression"``, what
checkpoints hold),
taken under the model's lock at a version, with ``meta["service"]`` saying where it
came from (model, config, version, examples learned, state digest) and
``meta["features"]`` (the spec); ``learners.load(blob)`` reads it.

Import (``PUT /models/{name}`` with an artifact body): the artifact is validated and
loaded in a thread (the loaders are the trust boundary: anything malformed is a 422
naming the problem, nothing is created), then the model is created *with the
artifact as its checkpoint at position 0*, in one atomic store step
(``Store.create_model_from_checkpoint``): every worker restores it like any other
model, from that checkpoint and the log after it, so the state is bit-exact (same
``state_digest``) everywhere and the same updates give the same digests as on the
model it was exported from. The config records the artifact's SHA-256
(``"imported"``): the same artifact PUT again is idempotent (200), another one a 409.

A decision model's export is its reward model's artifact (kind ``"regression"``) with
its decision state in ``meta.decisions`` and its config in ``meta.service.config``
(:mod:`service.models.decision_state` checks both): it imports as a decision model (a
challenger's as a standalone one), without the decisions awaiting a reward (they are in
the exported model's decision log).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import numpy as np

from learners.artifact import Artifact, ArtifactError, ArtifactTooLarge
from learners.artifact import loads as artifact_loads
from learners.feature_keys import hashed_indices
from learners.feature_names import FeatureNames
from learners.features import FeatureSpec
from service.engine import catalog
from service.engine.model_handle import ModelHandle, pack_checkpoint
from service.engine.registry import Registry
from service.errors import Kind, ServiceError, invalid
from service.models import record_entries
from service.models.base import ModelAdapter
from service.models.kinds import adapter_class
from service.settings import Settings

ONLINE_KINDS = ("linear", "ranksvm", "regression")
FIELD = "artifact"
_FULL_HASH = 0xFFFFFFFF  # feature names are kept with their full 32-bit hash


def _refuse(message: str) -> ServiceError:
    return invalid(f"artifact: {message}", FIELD)


def load_online_artifact(
    blob: bytes, settings: Settings
) -> tuple[type[ModelAdapter], dict[str, Any], ModelAdapter, int, bool]:
    """Validate an uploaded artifact of an online model: (adapter class, config, the
    loaded adapter, examples it learned, whether its bytes must be re-written: names
    over this server's limit were dropped). Runs in a thread (hashing and copying up
    to the artifact's size)."""
    try:
        art = artifact_loads(blob, max_bytes=settings.max_model_bytes)
    except ArtifactTooLarge as e:
        raise ServiceError(Kind.TOO_LARGE, "model_too_large", f"artifact: {e}", FIELD) from None
    except ArtifactError as e:
        raise _refuse(str(e)) from None
    if _is_decision(art.meta):
        return _load_decision(art, settings)
    if art.kind not in ONLINE_KINDS:
        raise _refuse(
            f"holds a {art.kind!r} model, not an online one {list(ONLINE_KINDS)}; deploy "
            "batch models with PUT /models/{name}/artifact"
        )
    features = art.meta.get("features")
    if not isinstance(features, dict):
        raise _refuse(
            "meta.features is missing: the artifact does not say how examples are encoded "
            "(in Python, set model.features_ = FeatureSpec.sparse(dim) (or .dense, .hashed) "
            "before model.to_bytes())"
        )
    cls = adapter_class(art.kind)
    try:
        if art.kind == "linear":
            from learners.linear import LinearClassifier

            model: Any = LinearClassifier.from_artifact(art)
            body = {"algorithm": model.algorithm, "params": model.params, "features": features}
            if len(model.labels_) > settings.max_labels:
                raise _refuse(
                    f"the model has {len(model.labels_)} labels, more than the limit of "
                    f"{settings.max_labels}"
                )
        elif art.kind == "regression":
            from learners.regression import LinearRegressor

            model = LinearRegressor.from_artifact(art)
            # the spec as written (no intercept unless it says so), not a new model's default
            written = (
                features if features.get("kind") == "records" else {"intercept": False, **features}
            )
            body = {"algorithm": f"{model.algorithm}_regression", "params": model.params,
                    "features": written}  # fmt: skip
        else:
            from learners.ranking.ranksvm import RankSVM

            model = RankSVM.from_artifact(art, max_bytes=settings.max_model_bytes)
            body = {"algorithm": "ranksvm", "params": model.params, "features": features}
    except ArtifactTooLarge as e:
        raise ServiceError(Kind.TOO_LARGE, "model_too_large", f"artifact: {e}", FIELD) from None
    except (ArtifactError, ValueError, KeyError, TypeError) as e:
        raise _refuse(str(e)) from None
    # (a regressor's variances are checked by LinearRegressor.from_artifact)
    check_state(art.arrays.get("sigma") if art.kind == "linear" else None, model)
    try:
        config = cls.normalize_config(body, settings)
    except ServiceError as e:  # e.g. a dimension over this server's max_dim
        raise _refuse(f"its config is refused here: {e.message}") from None
    if FeatureSpec.from_config(config["features"]).dim != model.dim:
        raise _refuse("meta.features does not match the model's dimension")
    rewrite = _trim_names(model, settings)
    config["imported"] = art.checksum
    learned = _examples_learned(art, model)
    adapter = cls(config, model)
    load_calibration = getattr(adapter, "load_calibration", None)
    if load_calibration is not None:  # a binary classifier's probability map, when exported
        try:
            load_calibration(art.meta)
        except ValueError as e:
            raise _refuse(str(e)) from None
    spec = getattr(adapter, "spec", None)
    if spec is not None and spec.stateful:  # a records model's statistics (its state too)
        try:
            record_entries.restore_statistics(spec, art.meta)
        except (ValueError, KeyError, TypeError) as e:
            raise _refuse(f"meta.{record_entries.META_KEY}: {e}") from None
    check_digest(art, adapter)
    return cls, config, adapter, learned, rewrite


def _trim_names(model: Any, settings: Settings) -> bool:
    """Names over this server's limit dropped: whether the stored state must then be
    re-written."""
    names = model.feature_names_
    if names is None or len(names) <= settings.max_feature_names:
        return False
    model.feature_names_ = _first(names, settings.max_feature_names)
    return True


def _examples_learned(art: Artifact, model: Any) -> int:
    service = art.meta.get("service")
    learned = service.get("examples_learned") if isinstance(service, dict) else None
    if isinstance(learned, bool) or not isinstance(learned, int) or learned < 0:
        learned = int(getattr(model, "n_seen_", 0))
    return learned


def _is_decision(meta: dict[str, Any]) -> bool:
    """Whether an artifact's meta says it holds a decision model (its decision state,
    or a decision model's config)."""
    service = meta.get("service")
    config = service.get("config") if isinstance(service, dict) else None
    return "decisions" in meta or (isinstance(config, dict) and config.get("kind") == "decision")


def _load_decision(
    art: Artifact, settings: Settings
) -> tuple[type[ModelAdapter], dict[str, Any], ModelAdapter, int, bool]:
    """``load_online_artifact`` of a decision model's export
    (:mod:`service.models.decision_state`): its reward model, its config rebuilt from
    ``meta.service.config`` (without ``follows``: a challenger's export imports as a
    standalone model, re-written without its own estimate) and its decision state."""
    from learners.regression import LinearRegressor
    from service.models import decision_state
    from service.models.decision import DecisionAdapter

    if art.kind != "regression":
        raise _refuse(
            f"holds a decision model's state, whose reward model is of kind "
            f"'regression', but the artifact's kind is {art.kind!r}"
        )
    try:
        decision_state.check_arrays(art.arrays)
        model = LinearRegressor.from_artifact(art)
        body, challenger = decision_state.import_body(art.meta, model)
    except (ArtifactError, ValueError, KeyError, TypeError) as e:
        raise _refuse(str(e)) from None
    check_state(None, model, crossed=True)
    cls = adapter_class("decision")
    try:
        config = cls.normalize_config(body, settings)
    except ServiceError as e:
        raise _refuse(f"its config (meta.service.config) is refused here: {e.message}") from None
    spec, held = FeatureSpec.from_config(config["features"]), model.features_
    if held is None:
        raise _refuse(
            "meta.features is missing: the artifact does not say how the reward "
            "model's rows are encoded"
        )
    if spec.dim != model.dim or spec.to_config() != held.to_config():
        raise _refuse(
            f"meta.features {held.to_config()} does not match the features of "
            f"meta.service.config {spec.to_config()}"
        )
    rewrite = _trim_names(model, settings) or challenger
    config["imported"] = art.checksum
    adapter = cls(config, model)
    assert isinstance(adapter, DecisionAdapter)
    try:
        decision_state.restore(adapter, art.meta["decisions"], challenger, art.arrays)
    except ValueError as e:
        raise _refuse(str(e)) from None
    check_digest(art, adapter)
    decision_state.standalone(adapter)
    return cls, config, adapter, _examples_learned(art, model), rewrite


def check_state(sigma: np.ndarray | None, model: Any, crossed: bool = False) -> None:
    """Refuse (422 naming the array or field) a state the learners cannot reach, though
    the container's checksum holds (a crafted artifact):

    - a negative variance in ``sigma`` (CW, AROW, SCW: every update multiplies a
      variance by a factor in [0, 1]; 0 itself is reachable, by rounding, e.g. AROW
      after one example with a feature value of 1e8, so it is accepted);
    - a ``feature_names_hash`` entry that is not the hash of its name (the names
      would then be shown under other weights than those they feed); ``crossed``: a
      decision model's, whose crosses (``c:<context>|<action part>``) are at columns
      combined from two hashes (``service.models.decision_names``), not checked here;
    - a ``meta.service.state_digest`` (what an export records) that is not the digest
      of the state the artifact holds.
    """
    if sigma is not None:
        var = sigma if sigma.ndim == 2 else np.diagonal(sigma, axis1=1, axis2=2)
        bad = np.argwhere(var < 0.0)
        if bad.size:
            r, j = (int(v) for v in bad[0])
            at = f"sigma[{r}, {j}]" if sigma.ndim == 2 else f"sigma[{r}, {j}, {j}]"
            raise _refuse(
                f"array 'sigma' holds a negative variance ({at} = {float(var[r, j])!r}); "
                "the variances of a confidence-weighted model are >= 0"
            )
    names = getattr(model, "feature_names_", None)
    if names is not None and len(names):
        listed = names.names()
        held = names.to_arrays()["feature_names_hash"].astype(np.int64)
        want = hashed_indices(listed, _FULL_HASH)
        differs = held != want
        if crossed:
            differs &= ~np.fromiter((n.startswith("c:") and "|" in n for n in listed), bool,
                                    count=len(listed))  # fmt: skip
        wrong = np.flatnonzero(differs)
        if wrong.size:
            i = int(wrong[0])
            raise _refuse(
                f"array 'feature_names_hash' does not match the names: entry {i} "
                f"({listed[i]!r}) holds {int(held[i])}, the name hashes to {int(want[i])} "
                f"({wrong.size} of {len(listed)} entries differ)"
            )


def check_digest(art: Artifact, model: Any) -> None:
    """``meta.service.state_digest`` (when the artifact records one) against the state."""
    service = art.meta.get("service")
    if not isinstance(service, dict) or "state_digest" not in service:
        return  # not an export of this service (e.g. written with learners' to_bytes)
    recorded = service["state_digest"]
    actual = model.state_digest()  # the adapter's: the learner's (+ record statistics)
    if recorded != actual:
        held = sorted(k for k in art.arrays if not k.startswith("feature_names"))
        # what besides the arrays the digest covers: a decision model's meta.decisions
        rest = "meta.decisions and counts" if "decisions" in art.meta else "labels and counts"
        raise _refuse(
            f"meta.service.state_digest is {recorded!r}, but the state the artifact holds "
            f"(arrays {held}, {rest}) has the digest {actual!r}: "
            "the state was changed after the export"
        )


def _first(names: FeatureNames, n: int) -> FeatureNames:
    kept = FeatureNames(names.limit)
    kept.add(names.names()[:n])
    return kept


async def import_model(registry: Registry, name: str, blob: bytes) -> tuple[ModelHandle, bool]:
    """Create ``name`` from an artifact (see the module docstring)."""
    load = load_online_artifact
    cls, config, adapter, learned, rewrite = await asyncio.to_thread(load, blob, registry.settings)
    # The checkpoint the store keeps: the handle's bookkeeping (a new log: chain head
    # "" at position 0) and the learner's bytes: the artifact as sent (validated), or
    # re-written when the names over the limit were dropped.
    meta = {"examples_learned": learned, "head": ""}

    def pack() -> memoryview:
        return pack_checkpoint(meta, adapter.snapshot()() if rewrite else blob)

    ckpt = await asyncio.to_thread(pack)
    return await catalog.create(registry, name, cls, config, ckpt)


async def export_state(h: ModelHandle) -> tuple[bytes, int, str]:
    """``(artifact bytes, version, state digest)`` of an online model, consistent: the
    copy is taken under the model's lock, the serialising done after, off the loop."""
    async with h.lock:
        version = h.version
        digest = h.adapter.state_digest()
        meta = {
            "service": {
                "model": h.name,
                "config": h.config,
                "version": version,
                "examples_learned": h.examples_learned,
                "state_digest": digest,
                "exported_at": time.time(),
            }
        }
        serialise = await asyncio.to_thread(h.adapter.snapshot, meta)
    blob = await asyncio.to_thread(lambda: bytes(serialise()))
    return blob, version, digest
