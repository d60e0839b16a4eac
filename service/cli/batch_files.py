"""``learnserve predict`` for FastXML and LL-SVM models: the test file is read exactly as
``learnserve train`` reads the kind's training file (the same readers), whole, then
sent in batches; the metrics ``learnserve evaluate`` prints follow on stderr.

- fastxml: the Extreme Classification Repository text format (``N D L`` header, then
  ``l1,l2 f:v ...``); features past the model's are dropped (as ``evaluate`` does). Each
  line: ``y`` (the true label ids), ``labels`` (top ``--k``, default 5), and with
  ``--scores`` their ``ids`` and ``scores``; then P@1/3/5 and nDCG@1/3/5.
- llsvm: MNIST idx images (labels found beside them, or ``--labels``), CSV (label
  first) or SVMlight, chosen by name; divided by the artifact's ``input_scale`` (255
  for idx) as in training. Each line: ``y``, ``label``, ``score`` (and ``scores``);
  then accuracy and error.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import IO, Any

import typer

from learners.features import Batch
from service.cli import file_metrics
from service.cli.phases import reading
from service.cli.prediction_output import row_writer
from service.client import Client, ModelInfo
from service.client.files import FileFormatError, Row


def _n_features(info: ModelInfo) -> int:
    n = info.raw.get("n_features")
    if not isinstance(n, int):
        raise typer.BadParameter(f"model {info.name!r} has no artifact deployed yet")
    return n


def _spans(n: int, batch: int) -> Iterator[tuple[int, int]]:
    for start in range(0, n, batch):
        yield start, min(start + batch, n)


def _sparse_rows(X: Batch, lo: int, hi: int) -> list[dict[str, float]]:
    """Rows ``lo..hi`` as ``{"column": value}`` (0-based, as the model's columns)."""
    out = []
    for i in range(lo, hi):
        a, b = int(X.indptr[i]), int(X.indptr[i + 1])
        out.append(
            dict(zip(map(str, X.indices[a:b].tolist()), X.values[a:b].tolist(), strict=True))
        )
    return out


def predict_fastxml(
    c: Client,
    model: str,
    info: ModelInfo,
    file: Path,
    fmt: str | None,
    fh: IO[str],
    out_fmt: str,
    batch: int,
    k: int | None,
    with_scores: bool,
    min_version: int | None,
) -> str:
    from learners.io.xc import read_xc
    from service.cli.train_fastxml import _fit_dim

    if fmt not in (None, "xc"):
        raise typer.BadParameter(
            "a fastxml model reads the Extreme Classification Repository text format "
            f"(`N D L` header; as `train fastxml`): --format xc, got {fmt!r}",
            param_hint="--format",
        )
    n_features = _n_features(info)
    reading("predict", file)
    try:
        data = read_xc(file)
    except ValueError as exc:
        raise FileFormatError(
            f"{exc}; a fastxml model reads what `train fastxml` reads: the Extreme "
            "Classification Repository format (an `N D L` header, then `l1,l2 f:v ...`)"
        ) from None
    X = _fit_dim(data.X, n_features)
    keep = k or 5
    ask = max(keep, max(file_metrics.XML_AT))  # P@5 needs five
    write = row_writer(fh, out_fmt, with_scores)
    top: list[list[int]] = []
    for lo, hi in _spans(X.n_rows, batch):
        res = c.predict(model, _sparse_rows(X, lo, hi), k=ask, min_version=min_version)
        for i, p in zip(range(lo, hi), res.predictions, strict=True):
            top.append(p.ids or [])
            shown = replace(
                p,
                labels=None if p.labels is None else p.labels[:keep],
                ids=None if p.ids is None else p.ids[:keep],
                scores=p.scores[:keep] if isinstance(p.scores, list) else p.scores,
            )
            write(Row(None, data.Y[i].tolist(), where=f"{file}:{i + 2}"), shown)
    metrics = file_metrics.extreme(file_metrics.pad_top(top), data.Y)
    return f"predicted {X.n_rows} points\n" + file_metrics.display("fastxml", metrics)


def llsvm_format(path: Path) -> str:
    """What ``train llsvm`` reads a file as, from its name."""
    from service.cli.train_llsvm import _is_idx

    if _is_idx(path):
        return "idx"
    return "csv" if path.suffix.lower() == ".csv" else "svmlight"


def predict_llsvm(
    c: Client,
    model: str,
    info: ModelInfo,
    file: Path,
    fmt: str | None,
    labels: Path | None,
    fh: IO[str],
    out_fmt: str,
    batch: int,
    with_scores: bool,
    min_version: int | None,
) -> str:
    from service.cli.train_llsvm import read_dense

    detected = llsvm_format(file)
    if fmt not in (None, detected):
        raise typer.BadParameter(
            f"a llsvm model reads {file.name} as {detected} (by its name, as `train llsvm`): "
            "idx images (*-images-idx3-ubyte[.gz]), *.csv (label first) or SVMlight",
            param_hint="--format",
        )
    if labels is not None and detected != "idx":
        raise typer.BadParameter("only idx images take a labels file", param_hint="--labels")
    n_features = _n_features(info)
    training = info.raw.get("training")
    scale = training.get("input_scale", 1.0) if isinstance(training, dict) else 1.0
    reading("predict", file)
    try:
        X, y, _ = read_dense(file, labels=labels, scale=float(scale), n_features=n_features)
    except ValueError as exc:
        raise FileFormatError(str(exc)) from None
    truth = file_metrics.label_values(y)
    write = row_writer(fh, out_fmt, with_scores)
    predicted: list[Any] = []
    for lo, hi in _spans(X.shape[0], batch):
        res = c.predict(model, X[lo:hi].tolist(), min_version=min_version)
        for i, p in zip(range(lo, hi), res.predictions, strict=True):
            predicted.append(p.label)
            write(Row(None, truth[i], where=f"{file}:{i}"), p)
    metrics = file_metrics.classification(predicted, truth)
    return f"predicted {X.shape[0]} examples\n" + file_metrics.display("llsvm", metrics)
