"""A rank's encoding, in process: a hashed decision model's rows crossed by names (every
cross's name built and hashed in Python, ``"crossing": "names"``) against crossed by
hash (each name hashed once, every action's row made at once, ``"hash"``,
:mod:`service.models.decision_crossing`), for the cost bench's shape of request
(``bench/decisions.py --no-bakeoff``: 20 numeric context features, each action with a
string and two numbers), with 10 and with 50 actions. CPU time per rank's rows, the
median of ``--rounds`` rounds of ``--count`` contexts; the ratio names / hash.

    PYTHONPATH=. .venv/bin/python bench/decision_crossing.py

Writes ``bench/results/decision_crossing.json``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np

from bench._common import print_table, write_results
from learners.features import FeatureSpec
from service.models.decision_records import rank_rows


def per_rank_us(spec: FeatureSpec, crossing: str, contexts: list[Any], actions: list[Any]) -> float:
    t = time.process_time()
    for c in contexts:
        rank_rows(spec, c, actions, 100_000, crossing)
    return (time.process_time() - t) / len(contexts) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--count", type=int, default=300, help="contexts per round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--bits", type=int, default=20)
    args = ap.parse_args()
    spec = FeatureSpec.hashed(args.bits, intercept=True)
    rng = np.random.default_rng(0)
    out: list[dict[str, Any]] = []
    for k in (10, 50):
        actions = [{"id": f"a{a}", "features": {"topic": f"t{a % 7}", "len": round(float(v), 3),
                                                "fresh": 1}}
                   for a, v in enumerate(rng.random(k))]  # fmt: skip
        contexts = [{f"c{j}": round(float(v), 3) for j, v in enumerate(rng.random(20))}
                    for _ in range(args.count)]  # fmt: skip
        rounds: dict[str, list[float]] = {"names": [], "hash": []}
        for crossing in rounds:
            per_rank_us(spec, crossing, contexts[:50], actions)  # warm: caches, imports
        for _ in range(args.rounds):  # alternated: the machine's drift hits both alike
            for crossing, got in rounds.items():
                got.append(per_rank_us(spec, crossing, contexts, actions))
        med = {c: statistics.median(v) for c, v in rounds.items()}
        out.append({"actions": k, "us_per_rank": med, "rounds": rounds,
                    "ratio_names_over_hash": med["names"] / med["hash"]})  # fmt: skip
    print_table(
        "a rank's rows, CPU us (median of rounds)",
        ["actions", "names", "hash", "names / hash"],
        [[str(r["actions"]), f"{r['us_per_rank']['names']:.0f}", f"{r['us_per_rank']['hash']:.0f}",
          f"{r['ratio_names_over_hash']:.2f}x"] for r in out],
    )  # fmt: skip
    write_results("decision_crossing", {"settings": vars(args), "results": out})


if __name__ == "__main__":
    main()
