"""Where a replica's apply of one ``/update`` entry goes, in process (issue 21).

A worker applying another worker's entry runs ``ModelHandle.apply_entry`` on the entry
as the store gives it (no dry run kept its decode). This times runs of 16 such entries
(dense, 100 examples each, as ``bench/update_workers.py``) on one handle, whole and
with one part left out at a time, so the parts' shares can be read off without a
profiler's distortions and with far less noise from other load than a served figure:

- ``whole``: ``apply_entry`` (chain head, learner, bookkeeping), one ``publish`` per run;
- ``no probability refit``: ``ProbabilityMap._fit`` skipped (the Platt map's Newton fit
  over its last 1,000 scores, run after every entry of 10 examples or more);
- ``no bookkeeping``: ``ModelHandle._learned`` skipped (progressive window, drift
  detector, label counts);
- ``decode + checks``: ``decode_payload`` and the learner's ``check`` alone.

Parts left out change the state that follows, so the figures are shares, not a model.

    .venv/bin/python bench/apply_split.py --repeats 5
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, bench/ comes first on sys.path and bench/http.py would shadow the
# standard library's ``http``: put the repository root there instead.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import argparse  # noqa: E402
import timeit  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

RUN = 16  # entries per run (a catch-up applies what came since its last wake)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5, help="rounds; the best of each is kept")
    ap.add_argument("--runs", type=int, default=10, help="runs of 16 entries per timing")
    args = ap.parse_args()

    import learners.linear.probability_map as pmap
    from bench.update_path import DENSE, _parsed, bodies
    from service.engine.model_handle import ModelHandle
    from service.models.linear import LinearAdapter
    from service.models.payload import decode_payload
    from service.settings import Settings
    from service.store.base import chain_head, payload_digest

    settings = Settings()
    config = LinearAdapter.normalize_config(DENSE, settings)
    parser = LinearAdapter.create(config)
    payloads = [_parsed(parser, b, settings) for b in bodies("dense", 100, 64)]
    digests = [payload_digest(p) for p in payloads]
    h = ModelHandle("split", LinearAdapter.create(config), settings)

    def run() -> None:
        for _ in range(RUN):
            i = h.version % len(payloads)
            head = chain_head(h.head or "", payloads[i], digests[i])
            h.apply_entry(h.version + 1, payloads[i], head, digests[i], publish=False)
        h.publish()

    def decode_check() -> None:
        for i in range(RUN):
            batch, meta = decode_payload(payloads[i], h.adapter.spec.dim)
            h.adapter.model.check(batch, meta["y"])

    fit, learned = pmap.ProbabilityMap._fit, ModelHandle._learned

    def no_fit(self: Any) -> None:
        self.pending = 0

    def no_learned(self: Any, position: int, r: Any) -> None:
        pass

    variants: list[tuple[str, Callable[[], None], Any, Any]] = [
        ("whole", run, fit, learned),
        ("no probability refit", run, no_fit, learned),
        ("no bookkeeping", run, fit, no_learned),
        ("decode + checks", decode_check, fit, learned),
    ]
    for _ in range(20):  # compiled, labels known, windows full
        run()
    best: dict[str, float] = {}
    for _ in range(args.repeats):  # interleaved: load from elsewhere hits every variant
        for name, fn, f, lrn in variants:
            pmap.ProbabilityMap._fit, ModelHandle._learned = f, lrn  # type: ignore[method-assign]
            t = min(timeit.repeat(fn, number=args.runs, repeat=3)) / (args.runs * RUN) * 1e6
            best[name] = min(best.get(name, t), t)
    pmap.ProbabilityMap._fit, ModelHandle._learned = fit, learned  # type: ignore[method-assign]
    whole = best["whole"]
    print(f"apply_entry of a dense x100 entry, in process, runs of {RUN} (best of {args.repeats}):")
    for name, t in best.items():
        share = (whole - t) if name.startswith("no") else t  # what the part costs
        part = "" if name == "whole" else f"  (the part: {share:.0f} us, {share / whole:.0%})"
        print(f"  {name:<22} {t:7.1f} us/entry{part}")


if __name__ == "__main__":
    main()
