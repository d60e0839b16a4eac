"""``learnserve import lightgbm MODEL.txt -o rank.lsart``: a LightGBM model as an artifact.

Reads the text a LightGBM ``Booster.save_model`` (or the LightGBM CLI) writes and
writes a LambdaMART artifact that ``learnserve deploy`` / ``PUT
/models/{name}/artifact`` serve; see :mod:`learners.ranking.lightgbm_import` for what
is accepted. A file that is not an acceptable model is refused with exit status 2
and a message naming the line and field; nothing is written then. So is a model a
deploy would refuse for its size: one that needs more memory to serve than
``--max-model-bytes``, or whose artifact is larger than ``--max-artifact-bytes``
(both default to the service's defaults, ``max_model_bytes`` and
``max_artifact_bytes``).

    learnserve import lightgbm model.txt -o rank.lsart
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from learners import artifact
from learners.artifact import DEFAULT_MAX_ARTIFACT_BYTES, DEFAULT_MAX_MODEL_BYTES

import_app = typer.Typer(help="Import a model trained by another library.", no_args_is_help=True)


@import_app.command("lightgbm")
def import_lightgbm(
    model: Annotated[Path, typer.Argument(help="LightGBM model text (Booster.save_model).")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Where to write the artifact.")],
    max_model_bytes: Annotated[
        int, typer.Option(min=1, help="Refuse a model that needs more memory to serve.")
    ] = DEFAULT_MAX_MODEL_BYTES,
    max_artifact_bytes: Annotated[
        int, typer.Option(min=1, help="Refuse a model whose artifact is larger.")
    ] = DEFAULT_MAX_ARTIFACT_BYTES,
) -> None:
    """Convert a LightGBM model (lambdarank, rank_xendcg, regression, binary) to an artifact
    whose scores equal LightGBM's raw scores."""
    from learners.artifact import ArtifactTooLarge
    from learners.ranking.lightgbm_import import LightGBMFormatError, load_lightgbm_model

    try:
        m = load_lightgbm_model(model, max_bytes=max_model_bytes)
    except OSError as exc:
        raise typer.BadParameter(
            f"cannot read {model}: {exc.strerror}", param_hint="MODEL"
        ) from None
    except (LightGBMFormatError, ArtifactTooLarge) as exc:
        raise typer.BadParameter(f"{model}: {exc}", param_hint="MODEL") from None
    m.meta_["train_file"] = model.name
    blob = m.to_bytes()
    if len(blob) > max_artifact_bytes:
        raise typer.BadParameter(
            f"{model}: its artifact would be {len(blob)} bytes, more than the "
            f"{max_artifact_bytes} bytes a deploy accepts (max_artifact_bytes)",
            param_hint="MODEL",
        )
    artifact.save(output, blob)
    what = m.meta_["objective"]
    if m.meta_["average_output"]:
        what += ", random forest: averaged"
    Console(stderr=True).print(f"{m.n_trees_} trees, {m.n_features_} features ({what}) -> {output}")
