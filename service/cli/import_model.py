"""``learnserve import lightgbm MODEL.txt -o rank.lsart``: a LightGBM model as an artifact.

Reads the text a LightGBM ``Booster.save_model`` (or the LightGBM CLI) writes and
writes a LambdaMART artifact that ``learnserve deploy`` / ``PUT
/models/{name}/artifact`` serve; see :mod:`learners.ranking.lightgbm_import` for what
is accepted. A file that is not an acceptable model is refused with exit status 2
and a message naming the line and field; nothing is written then.

    learnserve import lightgbm model.txt -o rank.lsart
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

import_app = typer.Typer(help="Import a model trained by another library.", no_args_is_help=True)


@import_app.command("lightgbm")
def import_lightgbm(
    model: Annotated[Path, typer.Argument(help="LightGBM model text (Booster.save_model).")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Where to write the artifact.")],
) -> None:
    """Convert a LightGBM model (lambdarank, rank_xendcg, regression, binary) to an artifact
    whose scores equal LightGBM's raw scores."""
    from learners.ranking.lightgbm_import import LightGBMFormatError, load_lightgbm_model

    try:
        m = load_lightgbm_model(model)
    except OSError as exc:
        raise typer.BadParameter(
            f"cannot read {model}: {exc.strerror}", param_hint="MODEL"
        ) from None
    except LightGBMFormatError as exc:
        raise typer.BadParameter(f"{model}: {exc}", param_hint="MODEL") from None
    m.meta_["train_file"] = model.name
    m.save(output)
    what = m.meta_["objective"]
    if m.meta_["average_output"]:
        what += ", random forest: averaged"
    Console(stderr=True).print(f"{m.n_trees_} trees, {m.n_features_} features ({what}) -> {output}")
