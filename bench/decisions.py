"""Decision models through HTTP (issue 34): the bake-off, and what a decision costs.

**Bake-off** (Bietti, Agarwal & Langford 2021's protocol): multiclass data as a bandit, an
action per class (ids ``"0"``..``"K-1"``, no action features: the model crosses the
context with the action id), reward 1 for the true class and 0 otherwise, one pass in
file order, progressive: each row is ``POST /models/{name}/rank`` (event id = the row
number) then ``POST /models/{name}/reward`` of the chosen action's reward, before the
next row is ranked; the figure is the mean reward. A ``learnserve serve`` of this tree
(SQLite under a temporary directory) holds one decision model per policy (the default,
SquareCB γ = 10·√(K·t), unless ``--policies all``) and reward model (``--reward-models``:
AROW, the default, and SGD; Thompson and UCB with AROW only), each learning its
rewards unweighted (the default ``weighting``). The data sets (``bench/_decision_sets.py``):
a9a and MNIST (the issue's), SMS spam and raw Adult records (two more); the context is
the example's non-zero features as hashed named features. ``adult-records``: the raw
Adult rows with a raw-record context (``"kind": "records"``; ``bench/_decision_records.py``),
each run's figure and state checked equal to its in-process twin's, VW on the ``adult``
set's features of the same rows.
Vowpal Wabbit on the same rows in the same order: ``--cbify K --cb_explore_adf`` with
``--epsilon 0.05``, ``--squarecb``, ``--cover 4 --psi 0.1 --nounif``, and the supervised
``--oaa K`` as the ceiling (VW's figure: 1 − its progressive average loss).

**Cost**: ``rank`` + ``reward`` pairs against ``/predict`` + ``/update`` of a hashed AROW
classifier over the same context, with 10 and with 50 actions (each with 3 features;
the context 20 features): ``--count`` requests of each kind on ``--connections``
keep-alive connections (every rank a new event, every reward a different ranked event),
pairs per second, and the server's CPU per pair (per core).

    PYTHONPATH=. .venv/bin/python bench/decisions.py                 # a9a 10,000, MNIST 5,000, ...
    PYTHONPATH=. .venv/bin/python bench/decisions.py --a9a-rows 0 --mnist-rows 0 --adult-rows 0
    PYTHONPATH=. .venv/bin/python bench/decisions.py --no-bakeoff    # the cost only
    PYTHONPATH=. .venv/bin/python bench/decisions.py --sets adult-records --adult-records-rows 0
    PYTHONPATH=. .venv/bin/python bench/decisions.py --sets a9a --a9a-rows 0 --seeds 5 --no-cost

With ``--seeds N`` every policy runs with seeds 0..N-1 (``bench/_decisions_seeds.py``; VW's
explorers re-seeded through ``bench/_vw_cbify.py``, since cbify ignores ``--random_seed``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent  # (bench/http.py would shadow the stdlib's http)
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import httpx  # noqa: E402
import numpy as np  # noqa: E402

from bench import _decisions_seeds as seeds  # noqa: E402
from bench._baseline import tree_cpu_seconds  # noqa: E402
from bench._common import print_table, write_results  # noqa: E402
from bench._decision_records import bakeoff as records_bakeoff  # noqa: E402
from bench._decision_sets import SETS, vw_lines  # noqa: E402
from bench._decisions_seeds import run_vw  # noqa: E402
from bench._loadgen import build_request  # noqa: E402
from bench._vw_cbify import cbify_reward  # noqa: E402
from tests.service.procs import free_port, start_service, stop_process  # noqa: E402

HOST = "127.0.0.1"
VARIANCE = ("thompson", "ucb")  # the policies that need AROW's variance
POLICIES: dict[str, dict[str, Any]] = {
    "squarecb (default)": {},
    "epsilon_greedy 0.05": {"policy": "epsilon_greedy", "params": {"epsilon": 0.05}},
    "softmax 0.05": {"policy": "softmax", "params": {"temperature": 0.05}},
    "thompson": {"policy": "thompson", "params": {"scale": 1.0, "epsilon": 0.01}},
    "ucb": {"policy": "ucb", "params": {"beta": 1.0, "epsilon": 0.01}},
}
VW = {
    "vw --epsilon 0.05": "--cbify {k} --cb_explore_adf --epsilon 0.05",
    "vw --squarecb": "--cbify {k} --cb_explore_adf --squarecb",
    "vw --cover 4 --psi 0.1 --nounif": "--cbify {k} --cb_explore_adf --cover 4 --psi 0.1 --nounif",
    "vw --oaa (supervised ceiling)": "--oaa {k}",
}


# ----------------------------------------------------------------------------- server


def serve(tmp: Path) -> tuple[Any, int]:
    port = free_port()
    env = {"LEARNSERVE_DATA_DIR": str(tmp / "data"), "LEARNSERVE_LOG_LEVEL": "warning",
           "LEARNSERVE_CHECKPOINT_EVERY_UPDATES": "100000",
           "LEARNSERVE_CHECKPOINT_EVERY_SECONDS": "3600",
           "PYTHONPATH": str(_HERE.parent)}  # fmt: skip
    args = [sys.executable, "-P", "-m", "uvicorn", "service.app:factory", "--factory",
            "--app-dir", str(_HERE.parent), "--host", HOST, "--port", str(port),
            "--log-level", "warning", "--no-access-log"]  # fmt: skip
    return start_service(args, env, port, timeout=900, health_path="/readyz"), port


def put(c: httpx.Client, name: str, body: dict[str, Any]) -> None:
    for _ in range(900):  # the kind's kernels compile on first use: 503 + Retry-After
        r = c.put(f"/models/{name}", json=body)
        if r.status_code != 503:
            assert r.status_code in (200, 201), r.text
            return
        time.sleep(float(r.headers.get("retry-after", 1)))
    raise RuntimeError(f"PUT /models/{name} kept answering 503")


def decision_model(
    exploration: dict[str, Any], bits: int, reward_model: str | None = None, seed: int = 0
) -> dict[str, Any]:
    body: dict[str, Any] = {"algorithm": "decision", "features": {"kind": "hashed", "bits": bits}}
    if seed:
        body["seed"] = seed
    if exploration:
        body["exploration"] = exploration
    if reward_model:
        body["reward_model"] = {"algorithm": reward_model}
    return body


def bakeoff_ours(c: httpx.Client, name: str, ctx: list[Any], y: np.ndarray, k: int) -> float:
    actions = [{"id": str(a), "features": {}} for a in range(k)]
    total = 0.0
    for i, (x, truth) in enumerate(zip(ctx, y.tolist(), strict=True)):
        r = c.post(f"/models/{name}/rank", json={"context": x, "actions": actions,
                                                  "event_id": str(i)})  # fmt: skip
        assert r.status_code == 200, r.text
        reward = 1.0 if r.json()["action"] == str(truth) else 0.0
        total += reward
        r = c.post(f"/models/{name}/reward", json={"event_id": str(i), "reward": reward})
        assert r.status_code == 200, r.text
    return total / len(ctx)


# ----------------------------------------------------------------------------- cost


async def _drain(port: int, requests: list[bytes], connections: int) -> tuple[float, int, bytes]:
    """Every request once, on ``connections`` keep-alive connections; (seconds, non-200s,
    the first non-200 answer)."""
    it = iter(requests)
    bad = 0
    first = b""

    async def worker() -> None:
        nonlocal bad, first
        reader, writer = await asyncio.open_connection(HOST, port)
        try:
            for req in it:
                writer.write(req)
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                body = await reader.readexactly(length)
                if not head.startswith(b"HTTP/1.1 200"):
                    bad += 1
                    first = first or head[:40] + body[:300]
        finally:
            writer.close()

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(connections)))
    return time.perf_counter() - t0, bad, first


def timed(pid: int, port: int, requests: list[bytes], connections: int) -> dict[str, float]:
    c0 = tree_cpu_seconds(pid)
    seconds, bad, first = asyncio.run(_drain(port, requests, connections))
    cpu = tree_cpu_seconds(pid) - c0
    assert bad == 0, f"{bad} answers were not 200, the first: {first!r}"
    return {"seconds": seconds, "cpu_seconds": cpu, "requests": len(requests)}


def cost(
    c: httpx.Client, pid: int, port: int, k: int, count: int, conns: int, reward_model: str
) -> dict[str, Any]:
    rng = np.random.default_rng(k)
    name, clf = f"cost{k}", f"clf{k}"
    put(c, name, decision_model({}, 20, reward_model))
    put(c, clf, {"algorithm": "arow", "features": {"kind": "hashed", "bits": 20}})
    actions = [{"id": f"a{a}", "features": {"topic": f"t{a % 7}", "len": round(float(v), 3),
                                            "fresh": 1}}
               for a, v in enumerate(rng.random(k))]  # fmt: skip

    def context() -> dict[str, Any]:
        return {f"c{j}": round(float(v), 3) for j, v in enumerate(rng.random(20))}

    contexts = [context() for _ in range(count)]
    # one of each first: the classifier knows its labels, every path has run once
    warm = {
        "model": clf,
        "examples": [{"x": contexts[0], "y": "+1"}, {"x": contexts[1], "y": "-1"}],
    }
    assert c.post("/update", json=warm).status_code == 200
    first = {"context": contexts[0], "actions": actions, "event_id": "warm"}
    assert c.post(f"/models/{name}/rank", json=first).status_code == 200
    assert c.post(f"/models/{name}/reward", json={"event_id": "warm", "reward": 1.0}).is_success
    run = f"r{time.monotonic_ns()}-"
    ranks = [build_request("POST", f"/models/{name}/rank", json.dumps(
        {"context": x, "actions": actions, "event_id": f"{run}{i}"}).encode())
        for i, x in enumerate(contexts)]  # fmt: skip
    rewards = [build_request("POST", f"/models/{name}/reward", json.dumps(
        {"event_id": f"{run}{i}", "reward": float(rng.random() < 0.3)}).encode())
        for i in range(count)]  # fmt: skip
    predicts = [build_request("POST", "/predict", json.dumps(
        {"model": clf, "instances": [{"x": x}]}).encode()) for x in contexts]  # fmt: skip
    updates = [build_request("POST", "/update", json.dumps(
        {"model": clf, "examples": [{"x": x, "y": "+1" if rng.random() < 0.3 else "-1"}]}
    ).encode()) for x in contexts]  # fmt: skip
    out = {
        k_: timed(pid, port, reqs, conns)
        for k_, reqs in (
            ("rank", ranks),
            ("reward", rewards),
            ("predict", predicts),
            ("update", updates),
        )
    }
    pair = {"rank + reward": ("rank", "reward"), "predict + update": ("predict", "update")}
    summary: dict[str, Any] = {"actions": k, "runs": out}
    for label, (a, b) in pair.items():
        secs = out[a]["seconds"] / count + out[b]["seconds"] / count
        cpu = out[a]["cpu_seconds"] / count + out[b]["cpu_seconds"] / count
        summary[label] = {"pairs_per_s": 1.0 / secs, "cpu_us_per_pair": cpu * 1e6,
                          "pairs_per_cpu_s": 1.0 / cpu}  # fmt: skip
    summary["ratio_per_core"] = (
        summary["rank + reward"]["pairs_per_cpu_s"] / summary["predict + update"]["pairs_per_cpu_s"]
    )
    return summary


# ----------------------------------------------------------------------------- bake-off


def bakeoff_set(
    c: httpx.Client | None, data_name: str, loaded: Any, policies: dict[str, Any],
    args: argparse.Namespace,
) -> dict[str, Any]:  # fmt: skip
    """Every run of ours (policies x reward models, then the variants) and of VW on one
    set, with seeds 0..N-1: per run the mean, std and each seed's figure."""
    ctx, y, k = loaded
    bits = 20 if k > 2 else 18
    runs = [
        (f"learnserve {label} + {rm}", decision_model(exploration, bits, rm))
        for label, exploration in policies.items()
        for rm in args.reward_models.split(",")
        if rm == "arow_regression" or exploration.get("policy") not in VARIANCE
    ]
    for label, extra in json.loads(args.variants).items():
        runs.append((f"variant {label}", {**decision_model({}, bits), **extra}))
    per_seed: dict[str, dict[str, Any]] = {}
    checks: dict[str, Any] = {}
    for label, body in runs:
        figures = []
        for seed in range(args.seeds):
            t0 = time.perf_counter()
            body_s = {**body, "seed": seed} if seed else body
            inproc = args.no_http or args.seeds > 1 or label.startswith("variant ")
            if (
                seed == 0
                and c is not None
                and not args.no_http
                and not label.startswith("variant ")
            ):
                name = f"{data_name}-{len(per_seed)}"
                put(c, name, body_s)
                http = bakeoff_ours(c, name, ctx, y, k)
                if inproc:
                    checks[label] = {
                        "http": http,
                        "inprocess": seeds.inprocess_reward(loaded, body_s),
                    }
                    assert checks[label]["http"] == checks[label]["inprocess"], checks[label]
                figures.append(http)
            else:
                figures.append(seeds.inprocess_reward(loaded, body_s))
            print(f"{data_name} {label} seed {seed}: {figures[-1]:.4f} "
                  f"({time.perf_counter() - t0:.0f} s)", file=sys.stderr)  # fmt: skip
        per_seed[label] = seeds.summary(figures)
    lines = vw_lines(ctx, y)
    for label, vw_args in {} if args.no_vw else VW.items():
        figures = [run_vw(vw_args.format(k=k), lines)]
        print(f"{data_name} {label} (--cbify): {figures[-1]:.4f}", file=sys.stderr)
        explore = vw_args.split("--cb_explore_adf")[-1].strip()
        if args.seeds > 1 and "oaa" not in label:  # cbify's own draw ignores --random_seed
            per_seed[f"{label} (cbify, seed-independent)"] = seeds.summary(figures)
            figures = []
            for seed in range(args.seeds):
                figures.append(cbify_reward(explore, ctx, y, k, seed))
                print(f"{data_name} {label} seed {seed}: {figures[-1]:.4f}", file=sys.stderr)
        per_seed[label] = seeds.summary(figures)
    default = runs[0][0]
    comparison = seeds.comparisons(per_seed, default)
    for label, _ in runs[1:]:
        comparison[f"{label} - {default}"] = seeds.difference(per_seed[label], per_seed[default])
    return {"rows": len(y), "actions": k, "seeds": args.seeds,
            "reward": {p: v["mean"] for p, v in per_seed.items()}, "per_seed": per_seed,
            "comparison": comparison, "http_check": checks}  # fmt: skip


# ----------------------------------------------------------------------------- main


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--a9a-rows", type=int, default=10_000, help="0: all 32,561")
    ap.add_argument("--mnist-rows", type=int, default=5_000, help="0: all 60,000")
    ap.add_argument("--sms-rows", type=int, default=0, help="0: all 5,574")
    ap.add_argument("--adult-rows", type=int, default=10_000, help="0: all 32,561")
    ap.add_argument("--adult-records-rows", type=int, default=5_000, help="0: all 32,561")
    ap.add_argument("--sets", default="a9a,mnist,sms,adult,adult-records",
                    help="which, comma-separated")  # fmt: skip
    ap.add_argument("--policies", choices=("default", "all"), default="all")
    ap.add_argument(
        "--reward-models",
        default="auto,arow_regression,sgd_regression",
        help="each policy with each of these reward models (the first: the default)",
    )
    ap.add_argument("--seeds", type=int, default=1,
                    help="each policy with seeds 0..N-1 (ours: the model's seed; VW: "
                         "--random_seed); with N > 1 ours run in process, seed 0 through "
                         "HTTP as well (checked equal)")  # fmt: skip
    ap.add_argument("--no-http", action="store_true", help="ours in process only")
    ap.add_argument("--variants", default="{}",
                    help='JSON {label: fields added to the default model\'s body}, in '
                         'process, with the seeds (candidate defaults)')  # fmt: skip
    ap.add_argument("--no-vw", action="store_true")
    ap.add_argument("--results", default="decisions", help="bench/results/<this>.json")
    ap.add_argument("--no-bakeoff", action="store_true")
    ap.add_argument("--no-cost", action="store_true")
    ap.add_argument("--count", type=int, default=2000, help="requests of each kind (cost)")
    ap.add_argument("--connections", type=int, default=16)
    args = ap.parse_args()
    policies = POLICIES if args.policies == "all" else dict(list(POLICIES.items())[:1])
    if args.no_http and args.no_cost:  # in process only: no server
        doc: dict[str, Any] = {"settings": vars(args), "bakeoff": {}, "cost": []}
        for data_name in [] if args.no_bakeoff else args.sets.split(","):
            loaded = SETS[data_name](getattr(args, f"{data_name}_rows"))
            if loaded is not None:
                doc["bakeoff"][data_name] = bakeoff_set(None, data_name, loaded, policies, args)
        report(doc, args)
        return
    tmp = Path(tempfile.mkdtemp(prefix="bench-decisions-"))
    proc, port = serve(tmp)
    doc = {"settings": vars(args), "bakeoff": {}, "cost": []}
    try:
        with httpx.Client(base_url=f"http://{HOST}:{port}", timeout=600) as c:
            names = [] if args.no_bakeoff else args.sets.split(",")
            runs = [
                (f"{label} + {rm}", exploration, rm)
                for label, exploration in policies.items()
                for rm in args.reward_models.split(",")
                if rm == "arow_regression" or exploration.get("policy") not in VARIANCE
            ]
            for data_name in names:
                if data_name == "adult-records":  # a records context, checked in process
                    got = records_bakeoff(c, put, args.adult_records_rows, runs)
                    loaded = None if got is None else SETS["adult"](got[0])
                    if got is None or loaded is None:
                        continue
                    figures, (ctx, y, k) = got[1], loaded
                    lines = vw_lines(ctx, y)
                    for label, vw_args in VW.items():
                        figures[label] = run_vw(vw_args.format(k=k), lines)
                        print(f"{data_name} {label}: {figures[label]:.4f}", file=sys.stderr)
                    doc["bakeoff"][data_name] = {
                        "rows": len(y), "actions": k, "seeds": 1, "comparison": {},
                        "per_seed": {p: {"mean": v, "std": 0.0, "runs": [v]}
                                     for p, v in figures.items()},
                    }  # fmt: skip
                    continue
                loaded = SETS[data_name](getattr(args, f"{data_name}_rows"))
                if loaded is not None:
                    doc["bakeoff"][data_name] = bakeoff_set(c, data_name, loaded, policies, args)
            if not args.no_cost:
                for k in (10, 50):
                    rm = args.reward_models.split(",")[0]  # the cost of the first's pairs
                    doc["cost"].append(cost(c, proc.pid, port, k, args.count, args.connections,
                                            rm))  # fmt: skip
    finally:
        stop_process(proc)
    report(doc, args)


def report(doc: dict[str, Any], args: argparse.Namespace) -> None:
    for data_name, b in doc["bakeoff"].items():
        print_table(
            f"{data_name}: progressive reward, {b['rows']} rows, {b['actions']} actions, one "
            f"pass, seeds {b['seeds']}",
            ["policy", "mean", "std", "each seed"],
            [[p, f"{v['mean']:.4f}", f"{v['std']:.4f}", " ".join(f"{r:.4f}" for r in v["runs"])]
             for p, v in b["per_seed"].items()],
        )  # fmt: skip
        for label, d in b["comparison"].items():
            if isinstance(d, dict):
                print(f"  {label}: {d['mean']:+.4f} ± {d['se']:.4f} (se)")
    if doc["cost"]:
        print_table(
            f"rank + reward against /predict + /update ({args.count} of each, "
            f"{args.connections} connections)",
            ["actions", "pairs/s", "CPU us/pair", "predict+update pairs/s", "CPU us/pair",
             "per core ratio"],
            [[str(s["actions"]), f"{s['rank + reward']['pairs_per_s']:.0f}",
              f"{s['rank + reward']['cpu_us_per_pair']:.0f}",
              f"{s['predict + update']['pairs_per_s']:.0f}",
              f"{s['predict + update']['cpu_us_per_pair']:.0f}",
              f"{s['ratio_per_core']:.2f}x"] for s in doc["cost"]],
        )  # fmt: skip
    path = write_results(args.results, doc, extra_packages=("vowpalwabbit",))
    print(f"written: {path}")
    os.environ.pop("UNUSED", None)


if __name__ == "__main__":
    main()
