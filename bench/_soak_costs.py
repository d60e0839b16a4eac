"""``bench/soak.py --costs``: what one key costs the store, for the capacity model.

One in-process service (``tests.service.serving.ServerThread``) per store: a private
redis-server (AOF on), then SQLite in a temporary data_dir. On each:

- **idempotency records**: ``n`` ``/update`` requests of one example, each with its
  own ``Idempotency-Key`` (a UUID, 36 characters);
- **pending delayed labels**: ``n`` ids (UUIDs) predicted, 100 instances a request, on
  a dense model of 28 features and on a hashed model with ~14 named features per
  instance (what the record holds: the features as the model learns them);
- **labelled marks**: those ids labelled (the mark kept after the record is dropped:
  since defect 9, for max(feedback_ttl_seconds, idempotency_ttl_seconds)).

Redis: ``MEMORY USAGE <key> SAMPLES 0`` of the model's keys that hold them (the sum
over the keys, divided by ``n``), next to ``used_memory``'s growth over the same
requests (which also holds the log entries the requests appended). SQLite: the bytes
of the table's and its indexes' pages (``dbstat``) per row; for marks also the bytes
of their live cells (the pages a labelled row no longer fills stay with the file, for
later rows).
"""

from __future__ import annotations

import random
import sqlite3
import tempfile
import uuid
from pathlib import Path
from typing import Any

import httpx

from service.settings import Settings
from service.store import SQLITE_FILENAME
from tests.service.procs import RedisServer, find_redis_server
from tests.service.serving import ServerThread

DIM = 28
DENSE = {"algorithm": "arow", "features": {"kind": "dense", "dim": DIM}}
HASHED = {"algorithm": "arow", "features": {"kind": "hashed", "bits": 18}}
IDEM_KEYS = ("idem", "idemexp", "idempos", "idemout")
FB_KEYS = ("fb", "fbexp", "fblab")


def _x(rng: random.Random, model: str) -> Any:
    if model == "dense":
        return [round(rng.gauss(0, 1), 4) for _ in range(DIM)]
    x: dict[str, Any] = {"age": rng.randint(18, 89), "job": rng.choice(["a", "b", "c"])}
    x["town"] = f"town{rng.randint(0, 49)}"
    for k in rng.sample(range(1000), 11):
        x[f"w{k}"] = round(rng.random(), 4)
    return x


def _ok(r: httpx.Response) -> dict[str, Any]:
    assert r.status_code in (200, 201), r.text
    out: dict[str, Any] = r.json()
    return out


def _setup(c: httpx.Client, rng: random.Random) -> None:
    for name, config in (("dense", DENSE), ("hashed", HASHED)):
        _ok(c.put(f"/models/{name}", json=config))
        ex = [{"x": _x(rng, name), "y": y} for y in ("s", "b")]
        _ok(c.post("/update", json={"model": name, "examples": ex}))


def _keyed_updates(c: httpx.Client, rng: random.Random, n: int) -> None:
    for _ in range(n):
        body = {"model": "dense", "examples": [{"x": _x(rng, "dense"), "y": "s"}]}
        _ok(c.post("/update", json=body, headers={"Idempotency-Key": str(uuid.uuid4())}))


def _predict_ids(c: httpx.Client, rng: random.Random, model: str, n: int) -> list[str]:
    ids = [str(uuid.uuid4()) for _ in range(n)]
    for i in range(0, n, 100):
        inst = [{"x": _x(rng, model), "id": fid} for fid in ids[i : i + 100]]
        _ok(c.post("/predict", json={"model": model, "instances": inst}))
    return ids


def _label(c: httpx.Client, model: str, ids: list[str]) -> None:
    for i in range(0, len(ids), 100):
        ex = [{"id": fid, "y": "s"} for fid in ids[i : i + 100]]
        _ok(c.post("/update", json={"model": model, "examples": ex}))


# ---------------------------------------------------------------------- Redis
def _usage(rc: Any, model: str, parts: tuple[str, ...]) -> int:
    total = 0
    for p in parts:
        total += int(rc.memory_usage(f"ls:{{{model}}}:{p}", samples=0) or 0)
    return total


def redis_costs(n: int, rng: random.Random) -> dict[str, Any]:
    binary = find_redis_server()
    assert binary is not None, "redis-server not found"
    redis = RedisServer(binary, Path(tempfile.mkdtemp(prefix="soak-costs-redis-")))
    redis.start()
    out: dict[str, Any] = {}
    try:
        settings = Settings(data_dir=tempfile.mkdtemp(), redis_url=redis.url)
        with ServerThread(settings) as srv, srv.client(timeout=120) as c, redis.client() as rc:
            _setup(c, rng)
            used0 = rc.info("memory")["used_memory"]
            _keyed_updates(c, rng, n)
            used1 = rc.info("memory")["used_memory"]
            idem = _usage(rc, "dense", IDEM_KEYS)
            out["idempotency_bytes_per_key"] = round(idem / n, 1)
            out["idempotency_used_memory_growth_per_key"] = round((used1 - used0) / n, 1)
            for model in ("dense", "hashed"):
                before = _usage(rc, model, FB_KEYS)
                used0 = rc.info("memory")["used_memory"]
                ids = _predict_ids(c, rng, model, n)
                used1 = rc.info("memory")["used_memory"]
                pending = _usage(rc, model, FB_KEYS) - before
                _label(c, model, ids)
                marks = _usage(rc, model, FB_KEYS) - before
                out[f"pending_label_bytes_per_id_{model}"] = round(pending / n, 1)
                out[f"pending_label_used_memory_growth_per_id_{model}"] = round(
                    (used1 - used0) / n, 1
                )
                out[f"labelled_mark_bytes_per_id_{model}"] = round(marks / n, 1)
    finally:
        redis.stop()
    return out


# ---------------------------------------------------------------------- SQLite
def _pages(db: Path, tables: tuple[str, ...], column: str = "pgsize") -> int:
    """Bytes of the pages (``pgsize``) or of the live cells (``payload``) of ``tables``."""
    with sqlite3.connect(db) as con:
        marks = ",".join("?" * len(tables))
        q = f"SELECT sum({column}) FROM dbstat WHERE name IN ({marks})"
        return int(con.execute(q, tables).fetchone()[0] or 0)


def _indexes(db: Path, table: str) -> tuple[str, ...]:
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT name FROM sqlite_master WHERE tbl_name = ?", (table,))
        return tuple(r[0] for r in rows)


def sqlite_costs(n: int, rng: random.Random) -> dict[str, Any]:
    data = Path(tempfile.mkdtemp(prefix="soak-costs-sqlite-"))
    db = data / SQLITE_FILENAME
    out: dict[str, Any] = {}
    with ServerThread(Settings(data_dir=str(data))) as srv, srv.client(timeout=120) as c:
        _setup(c, rng)
        idem = _indexes(db, "idempotency")
        before = _pages(db, idem)
        _keyed_updates(c, rng, n)
        out["idempotency_bytes_per_key"] = round((_pages(db, idem) - before) / n, 1)
        fb = _indexes(db, "feedback")
        for model in ("dense", "hashed"):
            before = _pages(db, fb)
            cells = _pages(db, fb, "payload")
            ids = _predict_ids(c, rng, model, n)
            out[f"pending_label_bytes_per_id_{model}"] = round((_pages(db, fb) - before) / n, 1)
            _label(c, model, ids)
            # the pages stay with the file (reused by later rows); the live cells shrink
            out[f"labelled_mark_page_bytes_per_id_{model}"] = round(
                (_pages(db, fb) - before) / n, 1
            )
            out[f"labelled_mark_cell_bytes_per_id_{model}"] = round(
                (_pages(db, fb, "payload") - cells) / n, 1
            )
    return out


def measure_costs(n: int) -> dict[str, Any]:
    rng = random.Random(0)
    return {
        "n": n,
        "key_and_id": "uuid4, 36 characters",
        "redis": redis_costs(n, rng),
        "sqlite": sqlite_costs(n, rng),
    }
