"""``learnserve train fastxml``: train a FastXML extreme multi-label model from an XC file.

The input is the Extreme Classification Repository text format (``N D L`` header,
then ``l1,l2 f:v ...`` per point, 0-based ids). The defaults are the released
FastXML code's (50 trees, at most 10 points per leaf, 100 labels per leaf).

    learnserve train fastxml --train bibtex_train.txt -o bibtex.lsart \\
        --valid bibtex_test.txt --label-names bibtex_label_names.txt
    learnserve evaluate bibtex.lsart --test bibtex_test.txt

The artifact's meta records the training data's shape (``data``: n, d, labels) and,
with ``--valid``, P@1/3/5 and nDCG@1/3/5 on that file (``validation``), which
``GET /models/{name}`` shows once deployed. ``--label-names`` stores the names, and
``/predict`` then answers labels by name.
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
from service.cli import file_metrics
from service.cli.phases import COMPILE_NOTE, KERNELS, phase, reading, say


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
    valid: Annotated[
        Path | None,
        typer.Option(help="Held-out XC file: P@k / nDCG@k on it are saved with the model."),
    ] = None,
) -> None:
    """Train FastXML (Prabhu & Varma, KDD 2014) and write the artifact."""
    err = Console(stderr=True)
    model = FastXML(
        n_trees=trees, max_leaf=max_leaf, labels_per_leaf=labels_per_leaf, c_delta=c_delta,
        c_rank=c_rank, bias=bias, max_outer_iter=max_outer_iter, seed=seed, n_jobs=jobs,
    )  # fmt: skip
    try:
        model.check_params()  # a bad flag fails before the (possibly big) files are read
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    reading("fastxml", train)
    tr = _read(train, "--train")
    if valid is not None:
        reading("fastxml", valid)
    va = _read(valid, "--valid") if valid is not None else None
    model.set_params(label_names=_label_names(label_names, tr.n_labels))
    err.print(
        f"train: {tr.X.n_rows} points, {tr.X.dim} features, {tr.n_labels} labels "
        f"({sum(len(y) for y in tr.Y) / max(1, tr.X.n_rows):.2f} per point)"
    )
    # The bar counts trees, fractionally: a tree's share grows with the rows settled in its
    # leaves (a tree takes seconds on a big file); the node count moves in between.
    columns = [
        TextColumn("[bold]fastxml"), BarColumn(bar_width=24), MofNCompleteColumn(),
        TextColumn("trees {task.fields[nodes]}"), TimeElapsedColumn(),
    ]  # fmt: skip
    compile_kernels(model)
    t0 = time.perf_counter()
    n = tr.X.n_rows
    with Progress(*columns, console=err, transient=False) as bar:
        task = bar.add_task("train", total=trees, nodes="")

        def step(settled: int, total: int, nodes: int) -> None:
            bar.update(task, completed=settled / n, nodes=f"{nodes} nodes")

        model.fit(tr.X, tr.Y, n_labels=tr.n_labels, step_progress=step)
    elapsed = time.perf_counter() - t0
    model.meta_.update(
        index_base=0, train_file=train.name, train_seconds=round(elapsed, 3),
        data={"n": n, "d": tr.X.dim, "labels": tr.n_labels},
    )  # fmt: skip
    if va is not None and valid is not None:
        phase("fastxml", f"scoring --valid {valid.name}")
        metrics = validation_metrics(model, va)
        model.meta_["validation"] = {"file": valid.name, "n": va.X.n_rows, "metrics": metrics}
    model.save(output)
    n_nodes = int(model.forest_["child_pos"].shape[0])
    err.print(f"{trees} trees, {n_nodes} nodes in {elapsed:.2f} s -> {output}")
    if va is not None:
        shown = model.meta_["validation"]["metrics"]
        err.print("valid " + "  ".join(f"{k} {v:.4f}" for k, v in shown.items()))


def validation_metrics(model: FastXML, data: XCData) -> dict[str, float]:
    """P@1/3/5 and nDCG@1/3/5 (lower-case keys, as ``learnserve evaluate`` prints them)."""
    labels, _ = model.predict_topk(_fit_dim(data.X, model.n_features_), k=5)
    return file_metrics.extreme(labels, data.Y)


def compile_kernels(model: FastXML) -> None:
    """Compile the kernels (or load them from numba's disk cache) on a tiny problem with
    the same parameters, saying so: the first run spends ~20 s here, which the tree bar
    would otherwise show as 0/N trees."""
    phase("fastxml", KERNELS)
    t0 = time.perf_counter()
    params = {**model.get_params(deep=False), "n_trees": 1, "n_jobs": 1, "label_names": None}
    X = Batch.from_csr(
        np.array([0, 2, 3, 5, 6]), np.array([0, 1, 1, 0, 2, 2]), np.ones(6), 3
    )  # 4 rows, 3 features, 2 labels: the same array types as any training set
    Y = [np.array([0]), np.array([1]), np.array([0, 1]), np.array([1])]
    FastXML(**params).fit(X, Y, n_labels=2).predict_topk(X, k=2)
    seconds = time.perf_counter() - t0
    say("fastxml", f"kernels ready in {seconds:.1f} s; growing {model.n_trees} trees")


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


def evaluate_model(
    model: FastXML, test: Path, test_query: Path | None = None, test_labels: Path | None = None
) -> dict[str, float]:
    """P@1/3/5 and nDCG@1/3/5 (XC Repository definitions) of a FastXML on an XC file."""
    for given, option in ((test_query, "--test-query"), (test_labels, "--test-labels")):
        if given is not None:
            raise typer.BadParameter(f"fastxml models take no {option}", param_hint=option)
    reading("evaluate", test)
    te = _read(test, "--test")
    phase("evaluate", f"scoring {te.X.n_rows} points ({COMPILE_NOTE})")
    labels, _ = model.predict_topk(_fit_dim(te.X, model.n_features_), k=5)
    return file_metrics.extreme(labels, te.Y)
