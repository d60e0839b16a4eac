"""``learnserve train llsvm``: train a Locally Linear SVM on dense data.

Input formats (chosen from the file name):

- MNIST idx (``*-images-idx3-ubyte[.gz]``): the labels file is found beside it
  (``*-labels-idx1-ubyte[.gz]``) unless ``--train-labels`` is given; pixels are
  divided by 255 (``--scale`` overrides).
- CSV (``*.csv``): the label in the first column, numeric features after it.
- anything else: SVMlight/LIBSVM with 1-based feature indices.

CSV and SVMlight features are used as written unless ``--scale C`` divides them
by ``C``. The scale is saved in the model and applied again by ``evaluate``. With
the default row normalisation of :class:`LLSVM` a constant scale has no effect;
for low-dimensional data whose vector length matters (2-d points, say) pass
``--no-normalize`` and scale the features to about [0, 1] yourself.

    learnserve train llsvm --train mnist/train-images-idx3-ubyte.gz -o mnist.lsart
    learnserve evaluate mnist.lsart --test mnist/t10k-images-idx3-ubyte.gz
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from learners.features import FeatureError
from learners.io.idx import read_idx, read_labelled_csv
from learners.io.svmlight import read_svmlight
from learners.llsvm import LLSVM
from service.cli import train_app

_IMAGES = re.compile(r"-images-idx3-ubyte(\.gz)?$")


def _is_idx(path: Path) -> bool:
    return bool(_IMAGES.search(path.name))


def _labels_beside(images: Path) -> Path:
    m = _IMAGES.search(images.name)
    assert m is not None
    for suffix in (m.group(1) or "", ".gz", ""):
        cand = images.with_name(images.name[: m.start()] + "-labels-idx1-ubyte" + suffix)
        if cand.exists():
            return cand
    raise ValueError(
        f"no labels file beside {images} (give --train-labels / name it *-labels-idx1-ubyte)"
    )


def read_dense(
    path: Path,
    *,
    labels: Path | None = None,
    scale: float | None = None,
    n_features: int | None = None,
) -> tuple[np.ndarray, np.ndarray, float]:
    """``(X, y, scale_used)`` from an idx, CSV or SVMlight file (see the module doc)."""
    if _is_idx(path):
        images = read_idx(path)
        lab = read_idx(labels if labels is not None else _labels_beside(path))
        if lab.ndim != 1 or lab.shape[0] != images.shape[0]:
            raise ValueError(f"{path}: {images.shape[0]} images but {lab.shape} labels")
        X = images.reshape(images.shape[0], -1).astype(np.float64)
        y: np.ndarray = lab.astype(np.int64)
        scale = 255.0 if scale is None else scale
    elif path.suffix.lower() == ".csv":
        X, y = read_labelled_csv(path)
    else:
        data = read_svmlight(path, n_features=n_features)
        X, y = data.X.to_dense(), data.y
    if n_features is not None and X.shape[1] != n_features:
        raise ValueError(f"{path}: {X.shape[1]} features, the model expects {n_features}")
    s = 1.0 if scale is None else float(scale)
    if not np.isfinite(s) or s <= 0:
        raise ValueError(f"scale must be a positive number, got {scale}")
    return (X / s if s != 1.0 else X), y, s


@train_app.command("llsvm")
def train_llsvm(
    train: Annotated[Path, typer.Option(help="Training file: idx images, CSV or SVMlight.")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Where to write the model.")],
    train_labels: Annotated[
        Path | None, typer.Option(help="idx labels file (default: found beside the images).")
    ] = None,
    scale: Annotated[
        float | None, typer.Option(help="Divide features by this (default: 255 for idx, else 1).")
    ] = None,
    anchors: Annotated[int, typer.Option(help="Anchor points (k-means centres).")] = 100,
    neighbours: Annotated[int, typer.Option(help="Nearest anchors per example.")] = 8,
    passes: Annotated[int, typer.Option(help="SGD passes over the shuffled data.")] = 10,
    lam: Annotated[float, typer.Option(help="Regularisation lambda.")] = 3e-7,
    t0: Annotated[float, typer.Option(help="Step offset: step = 1/(lam (t + t0)).")] = 100.0,
    skip: Annotated[int, typer.Option(help="Apply the regulariser every SKIP steps.")] = 200,
    weighting: Annotated[str, typer.Option(help="relative | exponential | inverse.")] = "relative",
    beta: Annotated[
        float, typer.Option(help="Sharpness of the (relative/exponential) weights.")
    ] = 3.0,
    multiclass: Annotated[str, typer.Option(help="ovr | crammer_singer.")] = "ovr",
    anchor_init: Annotated[
        str, typer.Option(help="kmeans_per_class | kmeans.")
    ] = "kmeans_per_class",
    normalize: Annotated[bool, typer.Option(help="Scale rows to unit length.")] = True,
    limit: Annotated[int | None, typer.Option(help="Train on the first N examples only.")] = None,
    seed: Annotated[int, typer.Option(help="Random seed (anchors, shuffling).")] = 0,
) -> None:
    """Train a Locally Linear SVM (Ladicky & Torr, ICML 2011) and write the artifact."""
    err = Console(stderr=True)
    try:
        model = LLSVM(
            n_anchors=anchors, n_neighbours=neighbours, lam=lam, t0=t0, skip=skip, passes=passes,
            weighting=weighting, beta=beta, multiclass=multiclass, anchors=anchor_init,
            normalize=normalize, seed=seed,
        )  # fmt: skip
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    try:
        X, y, used = read_dense(train, labels=train_labels, scale=scale)
    except (OSError, ValueError) as exc:
        raise typer.BadParameter(str(exc), param_hint="--train") from None
    if limit is not None:
        X, y = X[:limit], y[:limit]
    err.print(
        f"[bold]{train.name}[/]: {X.shape[0]} examples, {X.shape[1]} features, scale 1/{used:g}"
    )
    start = time.perf_counter()
    with Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(bar_width=16),  # with the info column, fits 80 columns
        MofNCompleteColumn(),
        TextColumn("{task.fields[info]}"),
        TimeElapsedColumn(),
        console=err,
    ) as bar:
        task = bar.add_task("llsvm", total=passes, info="placing anchors")

        def progress(p: int, m: dict[str, float]) -> None:
            info = f"error {m['train_error']:.4f} hinge {m['hinge_loss']:.4f}"
            bar.update(task, completed=p + 1, info=info)

        try:
            model.fit(X, y, progress=progress)
        except ValueError as exc:  # FeatureError is a ValueError
            raise typer.BadParameter(str(exc), param_hint="--train") from None
    model.meta_ = {"input_scale": used, "train_file": train.name, "train_examples": int(X.shape[0])}
    model.save(output)
    err.print(
        f"wrote {output} ({output.stat().st_size / 1e6:.1f} MB) in "
        f"{time.perf_counter() - start:.1f} s, {len(model.classes_)} classes"
    )


def evaluate_file(model_path: Path, test: Path, test_query: Path | None = None) -> dict[str, Any]:
    """Accuracy and error of a saved LL-SVM on a test file (same formats as training)."""
    del test_query  # ranking only
    model = LLSVM.load(model_path)
    scale = float(model.meta_.get("input_scale", 1.0))
    try:
        X, y, _ = read_dense(Path(test), scale=scale, n_features=model.n_features_)
        pred = model.predict(X)
    except (OSError, FeatureError, ValueError) as exc:
        raise typer.BadParameter(str(exc), param_hint="--test") from None
    truth = _as_label_type(y, model.classes_)
    acc = float(np.mean(pred == truth))
    return {"accuracy": acc, "error": 1.0 - acc, "examples": int(X.shape[0])}


def _as_label_type(y: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """Test labels in the model's label type (files give floats; string models compare as str)."""
    if classes.dtype.kind == "U":
        return np.asarray(y).astype(str)
    arr = np.asarray(y)
    if arr.dtype.kind == "f" and np.all(arr == np.round(arr)):
        return arr.astype(np.int64)
    return arr
