"""What recording feature names costs on the ``/update`` fast path of a hashed model.

    flock /tmp/bench.lock .venv/bin/python bench/feature_names.py

Body: the first 1000 rows of a9a as named features (``{"f39": 1.0, ...}``, ~14 per
row, ~120 distinct names). Per body, median of ``--repeats`` timed calls, in
microseconds:

- ``scan_sparse`` / ``scan_hashed``: ``scan_map_examples`` (no names wanted);
- ``parse_names_off``: ``LinearAdapter.parse_update_raw`` with ``max_feature_names=0``
  (the scan alone, then the log entry);
- ``parse_names_known``: the same with names recorded (default limit) and every name
  of the body already known: the scan also returns the full hashes and one compiled
  pass finds none unknown;
- ``parse_names_all_new``: the first body of a fresh model (every name new: the body
  is parsed again with orjson to read them), one call.

Results: ``bench/results/feature_names.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

from bench._common import write_results  # noqa: E402
from learners.io.svmlight import read_svmlight  # noqa: E402
from service.models.fast_json_maps import scan_map_examples  # noqa: E402
from service.models.linear import LinearAdapter  # noqa: E402
from service.settings import Settings  # noqa: E402


def a9a_body(path: Path, kind: str) -> bytes:
    d = read_svmlight(path, n_features=124, zero_based=True)
    X, ex = d.X, []
    for i in range(1000):
        idx = X.indices[X.indptr[i] : X.indptr[i + 1]].tolist()
        ex.append({"x": {(f"f{j}" if kind == "hashed" else str(j)): 1.0 for j in idx},
                   "y": int(d.y[i])})  # fmt: skip
    return json.dumps({"model": "m", "examples": ex}).encode()


def median_us(fn: Callable[[], object], repeats: int) -> float:
    fn()
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts)) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=_HERE.parent.parent / "shared/data/a9a/a9a")
    ap.add_argument("--repeats", type=int, default=500)
    args = ap.parse_args()
    sparse, hashed = a9a_body(args.data, "sparse"), a9a_body(args.data, "hashed")
    out = {
        "scan_sparse": median_us(lambda: scan_map_examples(sparse, "sparse", 124, 10**4, 10**3),
                                 args.repeats),
        "scan_hashed": median_us(lambda: scan_map_examples(hashed, "hashed", 1 << 18, 10**4, 10**3),
                                 args.repeats),
    }  # fmt: skip
    cfg = {"kind": "linear", "algorithm": "arow", "params": {},
           "features": {"kind": "hashed", "bits": 18}}  # fmt: skip
    off, on = Settings(max_feature_names=0), Settings()
    a = LinearAdapter.create(cfg)
    out["parse_names_off"] = median_us(lambda: a.parse_update_raw(hashed, off), args.repeats)
    b = LinearAdapter.create(cfg)
    t = time.perf_counter()
    first = b.parse_update_raw(hashed, on)
    out["parse_names_all_new"] = (time.perf_counter() - t) * 1e6
    assert first is not None
    b.apply(first.payload)
    out["parse_names_known"] = median_us(lambda: b.parse_update_raw(hashed, on), args.repeats)
    out = {k: round(v, 1) for k, v in out.items()}
    print(json.dumps(out, indent=1))
    write_results("feature_names", {"microseconds_per_1000_example_body": out})


if __name__ == "__main__":
    main()
