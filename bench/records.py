"""Records per second of the records encoder (``learners.records``), in-process.

    flock /tmp/bench.lock .venv/bin/python bench/records.py

Data: adult-raw (``adult.data``, 32,561 CSV records, 6 numeric + 8 categorical
fields) and sms-spam (5,574 messages, one text field), read into Python dicts before
timing (parsing the CSV/JSON is not encoding). Per config, best of ``--repeats`` runs:

- ``encode``: ``encoder.encode(records)``, the whole file in one call (``/predict``);
- ``learn``: ``encoder.learn(records)`` (encode with the statistics of the records
  before, then count them: ``/update``) of a fresh encoder, in one call, in calls of
  100 records, and in calls of 1 record (over the first ``--single`` records).

Columns are records/s on wall-clock and on this process's CPU time (the machine is
shared). Results: ``bench/results/records.json``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

from bench._common import (  # noqa: E402
    Timing,
    measure,
    print_table,
    shared_data_dir,
    write_results,
)
from learners.io.records import read_csv_records, read_labeled_text  # noqa: E402
from learners.records import RecordEncoder  # noqa: E402
from tests.learners.test_records_quality import NUMERIC, adult_config, sms_config  # noqa: E402

CONFIGS: dict[str, tuple[str, dict[str, Any]]] = {
    "adult bins": ("adult", adult_config("bins")),
    "adult standardize": ("adult", adult_config("standardize")),
    "adult bins, c*c": ("adult", adult_config("bins", (("c", "c"),))),
    "sms words": ("sms", sms_config()),
    "sms words + chars 3-5": ("sms", sms_config(chars={"ngrams": [3, 5]})),
    "sms words 1-2 + chars 3-5, idf": (
        "sms", sms_config(words={"ngrams": 2}, chars={"ngrams": [3, 5]}, idf=True)),
}  # fmt: skip


def load(data: Path) -> dict[str, list[dict[str, Any]]]:
    adult, _ = read_csv_records(
        data / "adult-raw" / "adult.data", label="class", numeric=NUMERIC, missing="?"
    )
    texts, _ = read_labeled_text(data / "sms-spam" / "SMSSpamCollection")
    return {"adult": adult, "sms": [{"text": t} for t in texts]}


def in_calls(enc: RecordEncoder, recs: list[dict[str, Any]], size: int) -> None:
    for i in range(0, len(recs), size):
        enc.learn(recs[i : i + size])


def time_config(
    config: dict[str, Any], recs: list[dict[str, Any]], repeats: int, single: int
) -> dict[str, Timing]:
    enc = RecordEncoder(config)
    enc.learn(recs)

    def fresh() -> RecordEncoder:
        return RecordEncoder(config)

    n, first = len(recs), recs[:single]
    return {
        "encode": measure(lambda _: enc.encode(recs), repeats=repeats, n_items=n),
        "learn": measure(lambda e: e.learn(recs), setup=fresh, repeats=repeats, n_items=n),
        "learn x100": measure(
            lambda e: in_calls(e, recs, 100), setup=fresh, repeats=repeats, n_items=n
        ),
        "learn x1": measure(
            lambda e: in_calls(e, first, 1), setup=fresh, repeats=repeats, n_items=len(first)
        ),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--single", type=int, default=2000)
    args = ap.parse_args()
    data = load(shared_data_dir())
    rows, results = [], {}
    for name, (which, config) in CONFIGS.items():
        recs = data[which]
        t0 = time.perf_counter()
        RecordEncoder(config).learn(recs[:10])  # numba kernels load (or compile)
        first = time.perf_counter() - t0
        timings = time_config(config, recs, args.repeats, args.single)
        nnz = RecordEncoder(config).learn(recs).nnz / len(recs)
        results[name] = {"first_call_s": first, "nnz_per_record": nnz,
                         **{k: t.to_json() for k, t in timings.items()}}  # fmt: skip
        rows.append(
            [name, f"{nnz:.0f}"]
            + [f"{t.rate:,.0f} / {t.cpu_rate or 0:,.0f}" for t in timings.values()]
        )
    print_table(
        "records/s (wall / CPU), best of runs",
        ["config", "nnz/rec", "encode", "learn", "learn x100", "learn x1"],
        rows,
    )
    write_results("records", {"configs": results})


if __name__ == "__main__":
    main()
