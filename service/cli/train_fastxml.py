"""``learnserve train fastxml``: train a FastXML extreme multi-label model from an XC file.

The input is the Extreme Classification Repository text format (``N D L`` header,
then ``l1,l2 f:v ...`` per point, 0-based ids). The defaults are the released
FastXML code's (50 trees, at most 10 points per leaf, 100 labels per leaf).

    learnserve train fastxml --train bibtex_train.txt -o bibtex.lsart
    learnserve evaluate bibtex.lsart --test bibtex_test.txt
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import numpy as np
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from learners.features import Batch
from learners.io.xc import XCData, read_xc
from learners.xml.fastxml import FastXML
from learners.xml.metrics import xml_metrics
from service.cli import train_app


def _read(path: Path, option: str) -> XCData:
    try:
        return read_xc(path)
    except (OSError, ValueError) as exc:
        raise typer.BadParameter(str(exc), param_hint=option) from None


def _label_names(path: Path | None, n_labels: int) -> list[str] | None:
    if path is None:
        return None
    try:
        names = [line.rstrip("\r\n") for line in path.read_text(encoding="utf-8").splitlines()]
    except OSError as exc:
        raise typer.BadParameter(str(exc), param_hint="--label-names") from None
    names = [n for n in names if n]
    if len(names) != n_labels:
        raise typer.BadParameter(
            f"{path} has {len(names)} names for {n_labels} labels", param_hint="--label-names"
        )
    return names


@train_app.command("fastxml")
def train_fastxml(
    train: Annotated[Path, typer.Option(help="Training file (XC Repository text format).")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Where to write the model.")],
    trees: Annotated[int, typer.Option(help="Number of trees.")] = 50,
    max_leaf: Annotated[int, typer.Option(help="Most points a leaf may hold.")] = 10,
    labels_per_leaf: Annotated[int, typer.Option(help="Label scores kept per leaf.")] = 100,
    c_delta: Annotated[float, typer.Option(help="Logistic-loss weight C_delta.")] = 1.0,
    c_rank: Annotated[float, typer.Option(help="nDCG weight C_r.")] = 1.0,
    bias: Annotated[float, typer.Option(help="Constant bias feature value.")] = 1.0,
    max_outer_iter: Annotated[int, typer.Option(help="Rounds of (delta, r) <-> w.")] = 1,
    seed: Annotated[int, typer.Option(help="Random seed (tree splits).")] = 0,
    jobs: Annotated[int | None, typer.Option(help="Threads (default: all cores).")] = None,
    label_names: Annotated[
        Path | None, typer.Option(help="File with one label name per line, in id order.")
    ] = None,
) -> None:
    """Train FastXML (Prabhu & Varma, KDD 2014) and write the artifact."""
    err = Console(stderr=True)
    tr = _read(train, "--train")
    names = _label_names(label_names, tr.n_labels)
    try:
        model = FastXML(
            n_trees=trees, max_leaf=max_leaf, labels_per_leaf=labels_per_leaf, c_delta=c_delta,
            c_rank=c_rank, bias=bias, max_outer_iter=max_outer_iter, seed=seed, n_jobs=jobs,
            label_names=names,
        )  # fmt: skip
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    err.print(
        f"train: {tr.X.n_rows} points, {tr.X.dim} features, {tr.n_labels} labels "
        f"({sum(len(y) for y in tr.Y) / max(1, tr.X.n_rows):.2f} per point)"
    )
    columns = [
        TextColumn("[bold]fastxml"), BarColumn(bar_width=30), MofNCompleteColumn(),
        TextColumn("trees"), TimeElapsedColumn(),
    ]  # fmt: skip
    t0 = time.perf_counter()
    with Progress(*columns, console=err, transient=False) as bar:
        task = bar.add_task("train", total=trees)
        model.fit(tr.X, tr.Y, n_labels=tr.n_labels, progress=lambda t: bar.advance(task))
    elapsed = time.perf_counter() - t0
    model.meta_.update(index_base=0, train_file=train.name, train_seconds=round(elapsed, 3))
    model.save(output)
    n_nodes = int(model.forest_["child_pos"].shape[0])
    err.print(f"{trees} trees, {n_nodes} nodes in {elapsed:.2f} s -> {output}")


def _fit_dim(X: Batch, dim: int) -> Batch:
    """``X`` with dimension ``dim``: features the model never saw carry no weight, drop them."""
    if X.dim == dim:
        return X
    if X.dim < dim:
        return Batch(X.indptr, X.indices, X.values, dim)
    keep = X.indices < dim
    rows = np.repeat(np.arange(X.n_rows), np.diff(X.indptr))[keep]
    indptr = np.zeros(X.n_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=X.n_rows), out=indptr[1:])
    return Batch(indptr, X.indices[keep], X.values[keep], dim)


def evaluate_file(model_path: Path, test: Path, test_query: Path | None = None) -> dict[str, float]:
    """P@1/3/5 and nDCG@1/3/5 (XC Repository definitions) of a saved FastXML on an XC file."""
    if test_query is not None:
        raise typer.BadParameter("fastxml models take no --test-query", param_hint="--test-query")
    model = FastXML.load(model_path)
    te = _read(test, "--test")
    labels, _ = model.predict_topk(_fit_dim(te.X, model.n_features_), k=5)
    return xml_metrics(labels, te.Y, (1, 3, 5))
