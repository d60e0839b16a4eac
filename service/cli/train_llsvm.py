"""``learnserve train llsvm``: train a Locally Linear SVM on dense data.

Input formats (chosen from the file name):

- MNIST idx (``*-images-idx3-ubyte[.gz]``): the labels file is found beside it
  (``*-labels-idx1-ubyte[.gz]``) unless ``--train-labels`` is given; pixels are
  divided by 255 (``--scale`` overrides).
- CSV (``*.csv``): the label in the first column, numeric features after it.
- anything else: SVMlight/LIBSVM with 1-based feature indices.

CSV and SVMlight features are used as written unless ``--scale C`` divides them
by ``C``. The scale is saved in the model and applied again by ``evaluate``. Rows
are normalised to unit length by default only with >= 100 features (images), where
a constant scale then has no effect; with fewer features the length is kept, so
scale the features to about [0, 1] yourself.

The size of the model and of the training (anchors, neighbours, passes,
normalisation) follows a rule on the data unless a flag sets it
(:mod:`learners.llsvm.defaults`, measured in ``docs/llsvm-defaults.md``); the chosen
values and the reason for each are printed and saved in the model's metadata.

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
from learners.llsvm.defaults import resolve
from service.cli.phases import COMPILE_NOTE, phase, reading

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


# The command's help (main registers it with this text: it is longer than a docstring
# would be, and states the rule the unset flags follow).
COMMAND_HELP = (
    "Train a Locally Linear SVM (Ladicky & Torr, ICML 2011) and write the artifact.\n\n"
    "Unset, --anchors, --neighbours, --passes and --normalize follow a rule on the "
    "training data (n examples, d features, C classes), printed before training: "
    "anchors = min(max(100, 2C), max(n/10, C)); neighbours = min(8, anchors); "
    "passes = clamp(ceil(60000 C / n), 10, 200), so every class's scorer sees about "
    "60,000 of its own examples (MNIST: 10 passes, UCI letter: 98); normalize = d >= 100. "
    "Measured: MNIST 2.02 %, USPS 5.2 %, letter 6.1 % test error (docs/llsvm-defaults.md). "
    "A flag that is given always wins."
)


def _bar(err: Console) -> Progress:
    return Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(bar_width=16),  # with the info column, fits 80 columns
        MofNCompleteColumn(),
        TextColumn("{task.fields[info]}"),
        TimeElapsedColumn(),
        console=err,
    )


def _check_flags(
    fixed: dict[str, Any],
    anchors: int | None,
    neighbours: int | None,
    passes: int | None,
    normalize: bool | None,
) -> None:
    """Fail on a bad flag before the data is read (the rule fills the unset ones from
    the data later): unset ones get a stand-in value that cannot fail."""
    probe = LLSVM(
        n_anchors=anchors if anchors is not None else max(neighbours or 1, 1),
        n_neighbours=neighbours if neighbours is not None else 1,
        passes=passes if passes is not None else 1,
        normalize=normalize if normalize is not None else True,
        **fixed,
    )
    try:
        probe.check_params()
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


def train_llsvm(
    train: Annotated[Path, typer.Option(help="Training file: idx images, CSV or SVMlight.")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Where to write the model.")],
    train_labels: Annotated[
        Path | None, typer.Option(help="idx labels file (default: found beside the images).")
    ] = None,
    scale: Annotated[
        float | None, typer.Option(help="Divide features by this (default: 255 for idx, else 1).")
    ] = None,
    anchors: Annotated[
        int | None,
        typer.Option(
            help="Anchor points (k-means centres), each carrying one linear model per class. "
            "More: finer local models, a bigger model (anchors x d x C floats) and slower "
            "prediction; fewer: closer to one linear SVM. "
            "Default: min(max(100, 2 x classes), max(n/10, classes))."
        ),
    ] = None,
    neighbours: Annotated[
        int | None,
        typer.Option(
            help="Nearest anchors whose models are blended for an example. More: smoother "
            "decision (MNIST 2.02 % -> 1.89 % at 12) but training and prediction cost grow "
            "linearly; 1: a hard partition. Default: min(8, anchors)."
        ),
    ] = None,
    passes: Annotated[
        int | None,
        typer.Option(
            help="SGD passes over the shuffled data (the model averages the second half). "
            "Too few under-fits (UCI letter: 12 % error at 10 passes, 6.1 % at 98); time "
            "grows linearly. Default: clamp(ceil(60000 x classes / n), 10, 200)."
        ),
    ] = None,
    lam: Annotated[
        float,
        typer.Option(
            help="Regularisation lambda (per unit-length row). Larger: smoother, simpler "
            "local models (3e-5 more than doubles letter's error); smaller than the default "
            "changed nothing measurable."
        ),
    ] = 3e-7,
    t0: Annotated[
        float,
        typer.Option(
            help="Step offset: step = 1/(lam (t + t0)). Larger: smaller, safer early steps."
        ),
    ] = 100.0,
    skip: Annotated[
        int, typer.Option(help="Apply the regulariser every SKIP steps (speed only).")
    ] = 200,
    weighting: Annotated[
        str,
        typer.Option(
            help="Local coordinates: relative (exp(-beta (d^2/d1^2 - 1)), scale-free), "
            "exponential (exp(-beta d^2)) or inverse (1/d, the paper's)."
        ),
    ] = "relative",
    beta: Annotated[
        float,
        typer.Option(
            help="Sharpness of the relative/exponential weights: larger favours the "
            "nearest anchor (harder partition), smaller blends more evenly."
        ),
    ] = 3.0,
    multiclass: Annotated[
        str, typer.Option(help="ovr (one hinge per class) | crammer_singer.")
    ] = "ovr",
    anchor_init: Annotated[
        str,
        typer.Option(
            help="kmeans_per_class (anchors split evenly between classes, k-means within "
            "each) | kmeans (over all rows: follows the data density, ignores labels)."
        ),
    ] = "kmeans_per_class",
    kmeans_iter: Annotated[
        int, typer.Option(help="Lloyd iterations after k-means++ seeding (0: seeds only).")
    ] = 20,
    normalize: Annotated[
        bool | None,
        typer.Option(
            help="Scale rows to unit length: right for images, where length is mostly ink; "
            "wrong when the length carries information (few features). Default: on when "
            "there are >= 100 features."
        ),
    ] = None,
    valid: Annotated[
        Path | None,
        typer.Option(
            help="Held-out file (same formats as --train; idx labels found beside it): its "
            "error is printed and recorded in the artifact (GET /models/{name} shows it)."
        ),
    ] = None,
    limit: Annotated[int | None, typer.Option(help="Train on the first N examples only.")] = None,
    seed: Annotated[int, typer.Option(help="Random seed (anchors, shuffling).")] = 0,
) -> None:
    err = Console(stderr=True)
    fixed: dict[str, Any] = {
        "lam": lam, "t0": t0, "skip": skip, "weighting": weighting, "beta": beta,
        "multiclass": multiclass, "anchors": anchor_init, "kmeans_iter": kmeans_iter,
        "seed": seed,
    }  # fmt: skip
    _check_flags(fixed, anchors, neighbours, passes, normalize)
    try:
        X, y, used = read_dense(train, labels=train_labels, scale=scale)
    except (OSError, ValueError) as exc:
        raise typer.BadParameter(str(exc), param_hint="--train") from None
    if limit is not None:
        X, y = X[:limit], y[:limit]
    n_classes = int(np.unique(y).shape[0])
    given = {"n_anchors": anchors, "n_neighbours": neighbours, "passes": passes,
             "normalize": normalize}  # fmt: skip
    try:
        params, notes = resolve(X.shape[0], X.shape[1], max(n_classes, 1), given)
        model = LLSVM(**params, **fixed)
        model.check_params()  # e.g. --neighbours above the anchors the rule chose
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    err.print(
        f"[bold]{train.name}[/]: {X.shape[0]} examples, {X.shape[1]} features, "
        f"{n_classes} classes, scale 1/{used:g}"
    )
    for key, note in notes.items():
        err.print(f"  {key} = {params[key]}  ({note})")
    start = time.perf_counter()
    with _bar(err) as bar:
        placing = bar.add_task("anchors", total=None, info="k-means")
        task = bar.add_task("passes", total=model.passes, info="", start=False)

        def anchor_progress(done: int, total: int) -> None:
            bar.update(placing, completed=done, total=total)

        def progress(p: int, m: dict[str, float]) -> None:
            if p == 0:
                bar.update(placing, info="done")
                bar.start_task(task)
            info = f"error {m['train_error']:.4f} hinge {m['hinge_loss']:.4f}"
            bar.update(task, completed=p + 1, info=info)

        try:
            model.fit(X, y, progress=progress, anchor_progress=anchor_progress)
        except ValueError as exc:  # FeatureError is a ValueError
            raise typer.BadParameter(str(exc), param_hint="--train") from None
    model.meta_ = {
        "input_scale": used,
        "train_file": train.name,
        "train_examples": int(X.shape[0]),
        "train_seconds": round(time.perf_counter() - start, 3),
        "defaults": notes,
    }
    if valid is not None:
        metrics = _error_on(model, valid, used, "--valid")
        n = metrics.pop("examples")
        model.meta_["validation"] = {"file": valid.name, "n": n, "metrics": metrics}
        err.print(f"validation ({valid.name}, {n} examples): error {metrics['error']:.4f}")
    model.save(output)
    err.print(
        f"wrote {output} ({output.stat().st_size / 1e6:.1f} MB) in "
        f"{time.perf_counter() - start:.1f} s, {len(model.classes_)} classes"
    )


def evaluate_model(
    model: LLSVM, test: Path, test_query: Path | None = None, test_labels: Path | None = None
) -> dict[str, Any]:
    """Accuracy and error of an LL-SVM on a test file (same formats as training)."""
    if test_query is not None:
        raise typer.BadParameter("llsvm models take no --test-query", param_hint="--test-query")
    scale = float(model.meta_.get("input_scale", 1.0))
    return _error_on(model, Path(test), scale, "--test", test_labels, command="evaluate")


def _error_on(
    model: LLSVM,
    path: Path,
    scale: float,
    option: str,
    labels: Path | None = None,
    command: str = "train",
) -> dict[str, Any]:
    """Accuracy, error and size of ``model`` on a labelled file (as --train reads it)."""
    reading(command, path)
    try:
        X, y, _ = read_dense(path, labels=labels, scale=scale, n_features=model.n_features_)
        phase(command, f"scoring {X.shape[0]} examples ({COMPILE_NOTE})")
        pred = model.predict(X)
    except (OSError, FeatureError, ValueError) as exc:
        raise typer.BadParameter(str(exc), param_hint=option) from None
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
