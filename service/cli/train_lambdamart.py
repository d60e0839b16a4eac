"""``learnserve train lambdamart``: train a LambdaMART ranker from SVMlight/LETOR files.

Query groups come from ``qid:`` tokens in the file or from a LightGBM-style
``.query`` sidecar (``--train-query``). The defaults are LightGBM's
``examples/lambdarank`` configuration. The artifact's meta records
``index_base`` (1 for the usual 1-based SVMlight files, 0 with ``--zero-based``)
so the service can accept sparse keys as they are written in the training file, the
training data's shape (``data``: n documents, d features, queries) and, with
``--valid``, NDCG@1/3/5/10 on it (``validation``), shown by ``GET /models/{name}``.

    learnserve train lambdamart --train rank.train --train-query rank.train.query \\
        --valid rank.test --valid-query rank.test.query -o ranker.lsart
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from learners.io.svmlight import SvmlightData, read_svmlight
from learners.ranking.lambdamart import LambdaMART
from service.cli import file_metrics
from service.cli.phases import COMPILE_NOTE, phase, reading

EVAL_AT = file_metrics.RANKING_AT


def _read(path: Path, query: Path | None, option: str, zero_based: bool = False) -> SvmlightData:
    try:
        data = read_svmlight(path, zero_based=zero_based, query_file=query)
    except (OSError, ValueError) as exc:
        raise typer.BadParameter(str(exc), param_hint=option) from None
    if data.qid is None:
        raise typer.BadParameter(
            f"{path} has no qid: tokens; give its query sizes with {option}-query",
            param_hint=option,
        )
    return data


def _groups(data: SvmlightData) -> np.ndarray:
    g = data.group_sizes
    assert g is not None  # _read refuses files without query information
    return g


def _widen(data: SvmlightData, dim: int) -> Any:
    """The rows with dimension ``dim`` (>= the file's own)."""
    from learners.features import Batch

    X = data.X
    return Batch(X.indptr, X.indices, X.values, dim)


def train_lambdamart(
    train: Annotated[Path, typer.Option(help="Training file (SVMlight/LETOR).")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Where to write the model.")],
    train_query: Annotated[Path | None, typer.Option(help="LightGBM .query file.")] = None,
    valid: Annotated[Path | None, typer.Option(help="Validation file.")] = None,
    valid_query: Annotated[Path | None, typer.Option(help="Validation .query file.")] = None,
    trees: Annotated[int, typer.Option(help="Boosting iterations.")] = 100,
    num_leaves: Annotated[int, typer.Option(help="Most leaves per tree.")] = 31,
    learning_rate: Annotated[float, typer.Option(help="Shrinkage of each tree's output.")] = 0.1,
    min_data_in_leaf: Annotated[int, typer.Option(help="Fewest documents in a leaf.")] = 50,
    min_sum_hessian_in_leaf: Annotated[
        float, typer.Option(help="Smallest sum of second derivatives in a leaf.")
    ] = 5.0,
    bagging_fraction: Annotated[
        float, typer.Option(help="Fraction of queries sampled for each bagging round.")
    ] = 0.9,
    bagging_freq: Annotated[
        int, typer.Option(help="Resample the bag every N trees (0: no bagging).")
    ] = 1,
    lambda_l2: Annotated[float, typer.Option(help="L2 penalty on leaf values.")] = 0.0,
    early_stopping_rounds: Annotated[
        int | None, typer.Option(help="Stop when validation NDCG@10 has not improved for N trees.")
    ] = None,
    seed: Annotated[int, typer.Option(help="Random seed (bagging); same seed, same model.")] = 0,
    max_bin: Annotated[int, typer.Option(help="Most histogram bins per feature.")] = 255,
    zero_based: Annotated[bool, typer.Option(help="Feature indices start at 0.")] = False,
) -> None:
    """Train LambdaMART (LightGBM-compatible lambdarank) and write the artifact."""
    err = Console(stderr=True)
    tr = _read(train, train_query, "--train", zero_based)
    va = _read(valid, valid_query, "--valid", zero_based) if valid is not None else None
    if valid_query is not None and valid is None:
        raise typer.BadParameter("--valid-query needs --valid", param_hint="--valid-query")
    if early_stopping_rounds is not None and va is None:
        raise typer.BadParameter(
            "early stopping needs --valid", param_hint="--early-stopping-rounds"
        )
    dim = max(tr.X.dim, va.X.dim if va is not None else 0)
    try:
        model = LambdaMART(
            n_estimators=trees, learning_rate=learning_rate, num_leaves=num_leaves,
            min_data_in_leaf=min_data_in_leaf, min_sum_hessian_in_leaf=min_sum_hessian_in_leaf,
            lambda_l2=lambda_l2, bagging_fraction=bagging_fraction, bagging_freq=bagging_freq,
            max_bin=max_bin, early_stopping_rounds=early_stopping_rounds, eval_at=EVAL_AT,
            seed=seed,
        )  # fmt: skip
        model.check_params()
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    valid_arg = None
    if va is not None:
        valid_arg = (_widen(va, dim), va.y, _groups(va))
    err.print(
        f"train: {tr.X.n_rows} documents, {len(_groups(tr))} queries, {dim} features"
        + (f"; valid: {va.X.n_rows} documents" if va is not None else "")
    )
    # Fits 80 columns: a 20-cell bar and one metric (all four are printed at the end).
    columns = [
        TextColumn("[bold]lambdamart"), BarColumn(bar_width=20), MofNCompleteColumn(),
        TextColumn("{task.fields[metric]}"), TimeElapsedColumn(),
    ]  # fmt: skip
    t0 = time.perf_counter()
    with Progress(*columns, console=err, transient=False) as bar:
        task = bar.add_task("train", total=trees, metric="")

        def progress(it: int, metrics: dict[str, float]) -> None:
            last = list(metrics.items())[-1:]  # the deepest cut-off (ndcg@10)
            text = "".join(f"valid {k} {v:.4f}" for k, v in last)
            bar.update(task, completed=it, metric=text)

        model.fit(_widen(tr, dim), tr.y, _groups(tr), valid=valid_arg, progress=progress)
        bar.update(task, total=bar.tasks[0].completed)
    elapsed = time.perf_counter() - t0
    model.meta_["index_base"] = 0 if zero_based else 1
    model.meta_["train_file"] = train.name
    model.meta_["train_seconds"] = round(elapsed, 3)
    model.meta_["data"] = {"n": tr.X.n_rows, "d": dim, "queries": len(_groups(tr))}
    last = model.evals_result_[model.n_trees_ - 1] if model.evals_result_ else None
    if last is not None and va is not None and valid is not None:
        # NDCG@k of the saved model (its last kept tree) on --valid: GET /models/{name}
        # shows it once deployed.
        model.meta_["validation"] = {
            "file": valid.name, "n": va.X.n_rows, "queries": len(_groups(va)),
            "metrics": dict(last),
        }  # fmt: skip
    model.save(output)
    err.print(f"{model.n_trees_} trees in {elapsed:.2f} s -> {output}")
    if last is not None:
        err.print("valid " + "  ".join(f"{k} {v:.4f}" for k, v in last.items()))


def evaluate_model(
    model: LambdaMART, test: Path, test_query: Path | None, test_labels: Path | None = None
) -> dict[str, float]:
    """NDCG@1/3/5/10 of a LambdaMART model on a test file (LightGBM's definition)."""
    if test_labels is not None:
        raise typer.BadParameter(
            "lambdamart models take no --test-labels", param_hint="--test-labels"
        )
    zero_based = model.meta_.get("index_base", 1) == 0
    reading("evaluate", test)
    te = _read(test, test_query, "--test", zero_based)
    phase("evaluate", f"scoring {te.X.n_rows} documents ({COMPILE_NOTE})")
    # Features beyond the model's are never tested by a tree: predict ignores them.
    scores = model.predict(te.X)
    return file_metrics.ranking(scores, te.y, _groups(te))
