"""JSON request bodies three ways (issue 30): the numba scanners, the orjson fallback the
service takes when a scanner returns None, and msgspec, per body shape and size.

    taskset -c 1 .venv/bin/python bench/json_decoders.py [--quick] [--compile cold|cache|none]

Shapes: ``dense`` (a9a-like rows of 123 values, 0.0/1.0, ~14 ones), ``sparse`` (the same
as ``{"index": 1.0}`` maps, keys 0-122), ``hashed`` (~14 string keys a row, ``"w=word":
1`` plus a categorical and a number), ``adult`` (raw records: 6 numbers, 8 categories,
the served binned config), ``sms`` (raw records: one short text, words + chars 3-5), each
as an ``/update`` body (``examples`` with labels) and a ``/predict`` body (``instances``)
of 1, 10, 100 and 1000 rows. CPU time per body (``time.process_time``) of:

- ``scan``: the service's scanner (``service/models/fast_json*.py``; ``/predict`` sparse:
  the batch models' ``scan_sparse_instances``; hashed ``/predict`` has none), compiled
  before timing;
- ``orjson``: the general path (``parse_json_object``, ``require_list``,
  ``split_examples`` / ``items_field``, ``dense_matrix`` / ``encode_fast`` /
  ``encode_features``) up to the same output;
- ``msgspec``: one ``msgspec.json.Decoder`` of typed Structs per shape and endpoint,
  reused, then numpy to the same arrays (dense: ``np.array``; sparse: ``dict[int,
  float]`` rows to CSR + ``canonical_rows``; hashed and records: ``encode_features``, the
  service's encoder, as the orjson path);
- ``build``: that numpy / encoder step alone, on rows msgspec decoded before timing
  (``msgspec - build`` is the decoding; for hashed and records the orjson path runs the
  same step after ``orjson.loads``).

Every reader's output is checked equal (arrays bit for bit) to the scanner's before
timing. Rounds interleave the readers (order rotated); each keeps its best round. Then
each scanner module's first call in a fresh process after ``import numpy, numba``
(``--compile cold``: an empty numba cache, the first start; then that cache, a later
start), and ``import msgspec`` likewise: CPU seconds (``resource.getrusage``) and peak
RSS (``VmHWM``). JSON on stdout and in ``bench/results/json_decoders.json``, a table on
stderr.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from itertools import accumulate, chain
from pathlib import Path
from typing import Annotated, Any

import msgspec
import numpy as np

_HERE = Path(__file__).resolve().parent  # (bench/http.py would shadow the stdlib's http)
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

from bench._common import write_results  # noqa: E402
from bench._features_data import ADULT_FEATURES, SMS_FEATURES  # noqa: E402
from learners.csr_batch import Batch, canonical_rows  # noqa: E402
from learners.features import FeatureSpec  # noqa: E402
from service.models.fast_json import scan_dense_examples  # noqa: E402
from service.models.fast_json_dense_instances import scan_dense_instances  # noqa: E402
from service.models.fast_json_instances import scan_sparse_instances  # noqa: E402
from service.models.fast_json_maps import scan_map_examples  # noqa: E402
from service.models.fast_json_records import (  # noqa: E402
    scan_records_examples,
    scan_records_instances,
)
from service.models.json_fields import (  # noqa: E402
    items_field,
    parse_json_object,
    require_list,
    require_str,
)
from service.models.linear_inputs import dense_matrix, encode_fast, split_examples  # noqa: E402
from service.models.online_config import encode_features  # noqa: E402
from service.settings import Settings  # noqa: E402

DIM, BITS, NNZ = 123, 18, 14
SHAPES = ("dense", "sparse", "hashed", "adult", "sms")
SETTINGS = Settings()
N_MAX, F_MAX = SETTINGS.max_batch_examples, SETTINGS.max_features_per_example
SPEC = {"dense": FeatureSpec.dense(DIM), "sparse": FeatureSpec.sparse(DIM),
        "hashed": FeatureSpec.hashed(BITS), "adult": FeatureSpec.records(ADULT_FEATURES),
        "sms": FeatureSpec.records(SMS_FEATURES)}  # fmt: skip
CATS = {
    "workclass": ["Private", "Self-emp-not-inc", "Local-gov", "State-gov", "Federal-gov"],
    "education": ["HS-grad", "Some-college", "Bachelors", "Masters", "Assoc-voc", "11th"],
    "marital-status": ["Married-civ-spouse", "Never-married", "Divorced", "Widowed"],
    "occupation": ["Prof-specialty", "Craft-repair", "Exec-managerial", "Adm-clerical", "Sales"],
    "relationship": ["Husband", "Not-in-family", "Own-child", "Unmarried", "Wife"],
    "race": ["White", "Black", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other"],
    "sex": ["Male", "Female"],
    "native-country": ["United-States", "Mexico", "Philippines", "Germany", "Canada", "India"],
}
SYL = ["ca", "lo", "fre", "te", "win", "mo", "sto", "pa", "re", "di", "gu", "ne", "ur", "ok"]


# ------------------------------------------------------------------------ bodies
def _rows(shape: str, n: int, rng: np.random.Generator) -> tuple[list[Any], list[Any]]:
    vocab = sorted({"".join(rng.choice(SYL, size=k)) for k in rng.integers(1, 4, 3000)})
    zipf = 1 / np.arange(1, len(vocab) + 1)
    zipf /= zipf.sum()
    words = lambda k: [vocab[j] for j in rng.choice(len(vocab), k, p=zipf)]  # noqa: E731
    xs: list[Any] = []
    for _ in range(n):
        on = np.sort(rng.choice(DIM, NNZ, replace=False))
        if shape == "dense":
            row = np.zeros(DIM)
            row[on] = 1.0
            xs.append(row.tolist())
        elif shape == "sparse":
            xs.append({str(j): 1.0 for j in on})
        elif shape == "hashed":
            x: dict[str, Any] = {f"w={w}": 1 for w in words(NNZ - 2)}
            xs.append({**x, "src": str(rng.choice(["web", "app", "sms"])),
                       "len": int(rng.integers(5, 160))})  # fmt: skip
        elif shape == "adult":
            rec: dict[str, Any] = {
                "age": int(rng.integers(17, 91)), "fnlwgt": int(rng.lognormal(12, 0.5)),
                "education-num": int(rng.integers(1, 17)),
                "hours-per-week": int(rng.integers(1, 99)),
                "capital-gain": int(rng.integers(1, 99999)) if rng.random() < 0.08 else 0,
                "capital-loss": int(rng.integers(1, 4356)) if rng.random() < 0.05 else 0,
            }  # fmt: skip
            for field, values in CATS.items():
                if rng.random() > 0.04:  # "?" in Adult: the field left out
                    rec[field] = str(rng.choice(values))
            xs.append(rec)
        else:
            text = words(int(rng.integers(4, 26)))
            text[0] = text[0].capitalize()
            if rng.random() < 0.2:
                text.insert(int(rng.integers(len(text))), f"£{rng.integers(1, 999)}")
            xs.append({"text": " ".join(text) + str(rng.choice([".", "!", "?", "..."]))})
    labels = {"dense": ["-1", "+1"], "sparse": [-1, 1], "hashed": ["ham", "spam"],
              "adult": ["<=50K", ">50K"], "sms": ["ham", "spam"]}[shape]  # fmt: skip
    return xs, [labels[int(b)] for b in rng.random(n) < 0.25]


def make_body(shape: str, endpoint: str, n: int, seed: int = 0) -> bytes:
    """A body as a Python client sends it (``json.dumps``: ", " and ": ", \\u escapes)."""
    xs, ys = _rows(shape, n, np.random.default_rng(seed))
    if endpoint == "update":
        items = [{"x": x, "y": y} for x, y in zip(xs, ys, strict=True)]
        return json.dumps({"model": shape, "examples": items}).encode()
    return json.dumps({"model": shape, "instances": [{"x": x} for x in xs]}).encode()


# ---------------------------------------------------------------------- readers
def _decoders(xtype: Any) -> tuple[msgspec.json.Decoder, msgspec.json.Decoder]:
    opts = {"forbid_unknown_fields": True, "kw_only": True}
    weight = Annotated[float, msgspec.Meta(gt=0)]  # refused when <= 0: 0.0 says "absent"
    ex = msgspec.defstruct("Example", [("x", xtype), ("y", str | int), ("weight", weight, 0.0)],
                           **opts)  # fmt: skip
    inst = msgspec.defstruct("Instance", [("x", xtype)], **opts)
    upd = msgspec.defstruct("Update", [("model", str), ("examples", list[ex])], **opts)
    pred = msgspec.defstruct("Predict", [("model", str | None, None), ("instances", list[inst])],
                             **opts)  # fmt: skip
    return msgspec.json.Decoder(upd), msgspec.json.Decoder(pred)


RECORD = dict[str, float | str | list[str] | None]
DECODERS = {"dense": _decoders(list[float]), "sparse": _decoders(dict[int, float]),
            "hashed": _decoders(dict[str, float | str]), "adult": _decoders(RECORD),
            "sms": _decoders(RECORD)}  # fmt: skip


def _labels(exs: list[Any]) -> tuple[list[Any], list[float] | None] | None:
    ys = [e.y for e in exs]
    if "" in ys or len(ys) > N_MAX:  # (the general path words the refusal)
        return None
    ws = [e.weight for e in exs]
    return ys, ([w or 1.0 for w in ws] if any(ws) else None)


def _csr(xs: list[dict[int, float]], dim: int) -> Batch | None:
    """CSR of the rows (numpy calls kept few: each costs ~1 us, and small bodies are many);
    ``canonical_rows`` only when a row is not in increasing order."""
    lens = list(map(len, xs))
    keys = list(chain.from_iterable(xs))
    if 0 in lens or max(lens) > F_MAX or min(keys) < 0 or max(keys) >= dim:
        return None  # (an empty row: the general path decides)
    indptr = np.fromiter(accumulate(lens, initial=0), np.int64, len(lens) + 1)
    idx = np.array(keys, np.int64)
    vals = np.array(list(chain.from_iterable(map(dict.values, xs))), np.float64)
    step = np.diff(idx)
    step[indptr[1:-1] - 1] = 1  # (a new row may start lower)
    if (step > 0).all():
        return Batch(indptr, idx, vals, dim)
    return Batch(*canonical_rows(indptr, idx, vals), dim)


def _matrix(xs: list[list[float]]) -> np.ndarray | None:
    try:
        X = np.array(xs, np.float64)
    except ValueError:  # ragged rows
        return None
    return X if X.shape == (len(xs), DIM) else None


def ms_features(shape: str, xs: list[Any], where: str) -> Any:
    if shape == "dense":
        return _matrix(xs)
    if shape == "sparse":
        return _csr(xs, DIM)
    return encode_features(SPEC[shape], xs, where, SETTINGS)


def ms_update(shape: str, raw: bytes) -> Any:
    try:
        body = DECODERS[shape][0].decode(raw)
    except msgspec.ValidationError:
        return None
    exs = body.examples
    ls = _labels(exs) if exs else None
    feats = None if ls is None else ms_features(shape, [e.x for e in exs], "examples")
    if feats is None:
        return None
    return (body.model, feats, *ls) + ((None,) if shape in ("adult", "sms") else ())


def ms_predict(shape: str, raw: bytes) -> Any:
    try:
        body = DECODERS[shape][1].decode(raw)
    except msgspec.ValidationError:
        return None
    inst = body.instances
    if not inst or len(inst) > N_MAX:
        return None
    feats = ms_features(shape, [i.x for i in inst], "instances")
    if feats is None or shape in ("adult", "sms", "hashed"):
        return feats
    return body.model, feats


def or_update(shape: str, raw: bytes) -> Any:
    body = parse_json_object(raw)
    model = require_str(body, "model")
    xs, ys, ws = split_examples(require_list(body, "examples", N_MAX))
    spec = SPEC[shape]
    if shape == "dense":
        return model, dense_matrix(spec, xs, raw), ys, ws
    batch = encode_fast(spec, xs, "examples", SETTINGS, b"")
    return (model, batch, ys, ws, None) if spec.kind == "records" else (model, batch, ys, ws)


def or_predict(shape: str, raw: bytes) -> Any:
    body = parse_json_object(raw)
    xs = items_field(require_list(body, "instances", N_MAX), "instances", "x")
    spec = SPEC[shape]
    if shape == "dense":
        return body.get("model"), dense_matrix(spec, xs, raw)
    batch = encode_fast(spec, xs, "instances", SETTINGS, raw)
    return (require_str(body, "model"), batch) if shape == "sparse" else batch


SCAN: dict[tuple[str, str], Callable[[bytes], Any]] = {
    ("dense", "update"): lambda r: scan_dense_examples(r, DIM, N_MAX),
    ("dense", "predict"): lambda r: scan_dense_instances(r, DIM, N_MAX),
    ("sparse", "update"): lambda r: scan_map_examples(r, "sparse", DIM, N_MAX, F_MAX),
    ("sparse", "predict"): lambda r: scan_sparse_instances(r, DIM, 0, N_MAX, F_MAX),
    ("hashed", "update"): lambda r: scan_map_examples(r, "hashed", 1 << BITS, N_MAX, F_MAX),
    ("adult", "update"): lambda r: scan_records_examples(r, SPEC["adult"].encoder, N_MAX),
    ("adult", "predict"): lambda r: scan_records_instances(r, SPEC["adult"].encoder, N_MAX),
    ("sms", "update"): lambda r: scan_records_examples(r, SPEC["sms"].encoder, N_MAX),
    ("sms", "predict"): lambda r: scan_records_instances(r, SPEC["sms"].encoder, N_MAX),
}


def readers(shape: str, endpoint: str) -> dict[str, Callable[[bytes], Any]]:
    out = {"scan": SCAN[shape, endpoint]} if (shape, endpoint) in SCAN else {}
    ms, orj = (ms_update, or_update) if endpoint == "update" else (ms_predict, or_predict)
    out["orjson"] = lambda r: orj(shape, r)
    out["msgspec"] = lambda r: ms(shape, r)
    return out


def _plain(v: Any) -> Any:
    """A reader's output in a form ``==`` compares exactly (arrays by their bits)."""
    if isinstance(v, np.ndarray):
        return (v.dtype.str, v.shape, np.ascontiguousarray(v).tobytes())
    if isinstance(v, Batch):
        v = (v.indptr, v.indices, v.values, v.dim)
    return [_plain(x) for x in v] if isinstance(v, tuple | list) else (type(v).__name__, v)


# ----------------------------------------------------------------------- timing
def time_readers(fns: dict[str, Callable[[bytes], Any]], raw: bytes, target: float,
                 rounds: int) -> tuple[dict[str, float], int]:  # fmt: skip
    """CPU us per body of each reader: best of ``rounds`` interleaved runs of ``calls``."""
    per = max(_cpu(f, raw, 1) for f in fns.values())
    calls = max(1, min(100_000, int(target / max(per, 1e-7))))
    names = list(fns)
    best = dict.fromkeys(names, math.inf)
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            best[name] = min(best[name], _cpu(fns[name], raw, calls))
    return {k: v / calls * 1e6 for k, v in best.items()}, calls


def _cpu(f: Callable[[bytes], Any], raw: bytes, calls: int) -> float:
    t0 = time.process_time()
    for _ in range(calls):
        f(raw)
    return time.process_time() - t0


# ------------------------------------------------------- compile time and memory
PROBE = """
import json, resource, sys, time
def now():  # (ru_maxrss outlives exec: a child starts at its parent's peak; VmHWM does not)
    r = resource.getrusage(resource.RUSAGE_SELF)
    hwm = next(s for s in open("/proc/self/status") if s.startswith("VmHWM")).split()[1]
    return [time.perf_counter(), r.ru_utime + r.ru_stime, int(hwm) / 1024]
t = [now()]
import numpy, numba
t.append(now())
exec(sys.argv[1])
t.append(now())
exec(sys.argv[2])
t.append(now())
print(json.dumps(t))
"""
_MAPS = (b'{"model": "m", "examples": [{"x": {"a": 1.5, "b": "c"}, "y": "a"}, '
         b'{"y": 3, "weight": 0.5, "x": {"d": -2}}]}')  # fmt: skip
_SPARSE = b'{"model": "m", "examples": [{"x": {"1": 2}, "y": 1}]}'
_MSGSPEC = (
    "E = msgspec.defstruct('E', [('x', dict[int, float]), ('y', str | int)]); "
    "B = msgspec.defstruct('B', [('model', str), ('examples', list[E])]); "
    f"msgspec.json.Decoder(B).decode({_SPARSE!r})"
)
_M = "from service.models."
MODULES = {  # module -> (import, first call); json = the first two, json-maps the next two
    "fast_json": (_M + "fast_json import warmup", "warmup()"),
    "fast_json_dense_instances": (_M + "fast_json_dense_instances import warmup", "warmup()"),
    "fast_json_maps": (
        _M + "fast_json_maps import scan_map_examples as s, scan_hashed_examples as h",
        f"s({_MAPS!r}, 'hashed', 16, 10, 10); h({_MAPS!r}, 16, 10, 10); "
        f"s({_SPARSE!r}, 'sparse', 4, 10, 10)",
    ),
    "fast_json_instances": (_M + "fast_json_instances import warmup", "warmup()"),
    "fast_json_records": (_M + "fast_json_records import warmup_scanner", "warmup_scanner()"),
    "msgspec": ("import msgspec", _MSGSPEC),
}


def probe(name: str, cache_dir: str | None) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(_HERE.parent)}
    if cache_dir is not None:
        env["NUMBA_CACHE_DIR"] = cache_dir
    args = [sys.executable, "-c", PROBE, *MODULES[name]]
    run = subprocess.run(args, env=env, capture_output=True, text=True, check=True)
    t = json.loads(run.stdout.splitlines()[-1])
    return {"import_cpu_s": t[2][1] - t[1][1], "first_call_cpu_s": t[3][1] - t[2][1],
            "first_call_wall_s": t[3][0] - t[2][0], "rss_numba_mb": t[1][2],
            "rss_after_import_mb": t[2][2], "peak_rss_mb": t[3][2]}  # fmt: skip


def compile_costs(mode: str) -> dict[str, Any]:
    out: dict[str, Any] = {"mode": mode}
    for name in MODULES:
        if mode == "cold" and name != "msgspec":
            with tempfile.TemporaryDirectory(prefix="numba-cold-") as d:
                out[name] = {"cold": probe(name, d), "cached": probe(name, d)}
        else:
            out[name] = {"cached": probe(name, None)}
        print(f"{name}: {json.dumps(out[name])}", file=sys.stderr, flush=True)
    return out


# ------------------------------------------------------------------------- main
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smoke run: short timings")
    ap.add_argument("--rows", default="1,10,100,1000")
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--target", type=float, default=0.04, help="CPU seconds a timed run")
    ap.add_argument("--compile", choices=("cold", "cache", "none"), default="cold")
    ap.add_argument("--out-dir", type=Path, default=None)
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.target = 2, 0.002
    cases = []
    for shape in args.shapes.split(","):
        for endpoint in ("update", "predict"):
            fns = readers(shape, endpoint)
            for n in map(int, args.rows.split(",")):
                raw = make_body(shape, endpoint, n)
                got = {k: _plain(f(raw)) for k, f in fns.items()}
                ref = got.get("scan", got["orjson"])
                for k, v in got.items():
                    assert v == ref and v[1], f"{shape} {endpoint} {n}: {k} reads another thing"
                listed = DECODERS[shape][endpoint == "predict"].decode(raw)
                xs = [i.x for i in getattr(listed, "examples", None) or listed.instances]
                where = "examples" if endpoint == "update" else "instances"
                build = {"build": lambda _, s=shape, xs=xs, w=where: ms_features(s, xs, w)}
                us, calls = time_readers(fns | build, raw, args.target, args.rounds)
                c = {"shape": shape, "endpoint": endpoint, "rows": n, "bytes": len(raw),
                     "calls": calls, "us_per_body": us}  # fmt: skip
                if "scan" in us:
                    c["msgspec/scan"] = us["msgspec"] / us["scan"]
                    c["orjson/scan"] = us["orjson"] / us["scan"]
                c["msgspec/orjson"] = us["msgspec"] / us["orjson"]
                cases.append(c)
                ratios = {k: round(v, 2) for k, v in c.items() if "/" in k}
                print(f"{shape:7} {endpoint:7} {n:5} {len(raw):8,} B  "
                      + "  ".join(f"{k} {v:9.1f} us" for k, v in us.items())
                      + f"  {ratios}", file=sys.stderr, flush=True)  # fmt: skip
    doc: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()}, "cases": cases}
    if args.compile != "none":
        doc["compile"] = compile_costs(args.compile)
    path = write_results("json_decoders", doc, extra_packages=("orjson", "msgspec"),
                         results_dir=args.out_dir)  # fmt: skip
    print(json.dumps({**doc, "written": str(path)}, indent=1))


if __name__ == "__main__":
    main()
