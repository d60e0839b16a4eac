"""Store contract, all three stores (SQLite, a real redis-server, a real 3-master Redis
Cluster): the records of predictions served with an id (delayed labels) and the append
that labels them, atomically, at most once per id."""

from __future__ import annotations

import asyncio

import pytest

from service.store import Feedback, FeedbackConflict, ModelNotFound, Store
from service.store.base import IdempotencyKeyReused, KeyGuard, KeyReplayed, record_digest
from tests.service import test_store_contract as contract
from tests.service.test_store_contract import CFG, Backend

backend = contract.backend  # the contract suite's fixture: SQLite, Redis, Redis Cluster

DAY = 86400.0


def label(fid: str, rec: bytes, mark: str) -> tuple[str, str, str]:
    return (fid, record_digest(rec), mark)


def test_put_get_append_labelled(backend: Backend) -> None:
    async def t(s: Store) -> None:
        await s.create_model("m", CFG)
        assert (
            await s.put_feedback("m", [("a", b"rec-a"), ("b\n \u2603", b"\x00rec b")], DAY) is None
        )
        got = await s.get_feedback("m", ["a", "b\n \u2603", "nope"])
        assert got == [Feedback(b"rec-a"), Feedback(b"\x00rec b"), None]
        # Labelling appends and marks in one step; the record goes, the mark stays.
        pos, head = await s.append_labelled("m", b"entry", [label("a", b"rec-a", '{"y": 1}')])
        assert pos == 1 and head
        assert [e.payload for e in await s.read_log("m", 0)] == [b"entry"]
        got = await s.get_feedback("m", ["a", "b\n \u2603"])
        assert got == [Feedback(None, '{"y": 1}', 1), Feedback(b"\x00rec b")]
        # Plain appends in between: positions stay one sequence.
        assert await s.append("m", b"plain") == 2
        pos2, _ = await s.append_labelled("m", b"entry2", [label("b\n \u2603", b"\x00rec b", "z")])
        assert pos2 == 3
        assert (await s.get_feedback("m", ["b\n \u2603"]))[0] == Feedback(None, "z", 3)

    backend.run(t)


def test_a_key_guards_a_labelled_append_as_append_once(backend: Backend) -> None:
    """With a KeyGuard the key is looked up before the ids (they are labelled by the
    first append) and recorded with the append: position, n and outcome as
    append_once records them; another payload hash under the key is refused."""

    async def t(s: Store) -> None:
        await s.create_model("m", CFG)
        await s.put_feedback("m", [("a", b"A"), ("b", b"B")], DAY)
        once = KeyGuard("k-1", "hash-1", 2, DAY)
        pos, head = await s.append_labelled("m", b"e1", [label("a", b"A", "ya")], once)
        assert pos == 1 and head
        assert await s.key_entry("m", "k-1") == (1, 2, "hash-1")
        assert await s.key_recorded("m", "k-1")
        for _ in range(2):  # the retry: nothing appended, nothing marked again
            with pytest.raises(KeyReplayed) as r:
                await s.append_labelled("m", b"e1", [label("a", b"A", "ya")], once)
            assert (r.value.position, r.value.n) == (1, 2)
        with pytest.raises(IdempotencyKeyReused):
            await s.append_labelled(
                "m", b"e2", [label("b", b"B", "yb")], KeyGuard("k-1", "h2", 1, DAY)
            )
        # the key is one namespace with append_once's keys
        with pytest.raises(IdempotencyKeyReused):
            await s.append_once("m", b"e3", "k-1", "h3", 1, DAY)
        assert await s.append_once("m", b"e3", "k-1", "hash-1", 9, DAY) == (1, 2, True)
        assert [e.payload for e in await s.read_log("m", 0)] == [b"e1"]
        assert (await s.get_feedback("m", ["b"]))[0] == Feedback(b"B")  # b not marked
        assert await s.record_outcome("m", 1, "failed: x")  # the key's entry, by position
        assert await s.get_outcome("m", "k-1") == "failed: x"
        # Without a key nothing changes; a fresh key labels b.
        pos, _ = await s.append_labelled(
            "m", b"e4", [label("b", b"B", "yb")], KeyGuard("k-2", "h", 1, DAY)
        )
        assert pos == 2 and await s.key_entry("m", "k-2") == (2, 1, "h")
        assert await s.key_entry("m", "nope") is None

    backend.run(t)


def test_conflicts_append_nothing_and_mark_nothing(backend: Backend) -> None:
    async def t(s: Store) -> None:
        await s.create_model("m", CFG)
        await s.put_feedback("m", [("a", b"A"), ("b", b"B"), ("c", b"C")], DAY)
        await s.append_labelled("m", b"e1", [label("a", b"A", "ya")])
        cases = [
            ([label("b", b"B", "yb"), label("a", b"A", "ya2")], 1, "labelled"),
            ([label("b", b"B", "yb"), label("zz", b"Z", "y")], 1, "missing"),
            ([label("c", b"C", "yc"), label("b", b"not B", "yb")], 1, "changed"),
        ]
        for labels, index, reason in cases:
            with pytest.raises(FeedbackConflict) as e:
                await s.append_labelled("m", b"refused", labels)
            assert (e.value.index, e.value.reason) == (index, reason)
        assert await s.last_position("m") == 1
        assert [e.payload for e in await s.read_log("m", 0)] == [b"e1"]
        # b and c were not marked by the refused appends.
        assert await s.get_feedback("m", ["b", "c"]) == [Feedback(b"B"), Feedback(b"C")]
        # A labelled id cannot be predicted again (nothing of the batch is stored).
        assert await s.put_feedback("m", [("new", b"N"), ("a", b"A2")], DAY) == 1
        assert await s.get_feedback("m", ["new", "a"]) == [None, Feedback(None, "ya", 1)]
        # An unlabelled one can: its record is replaced (a record read before is stale).
        assert await s.put_feedback("m", [("b", b"B2")], DAY) is None
        with pytest.raises(FeedbackConflict, match="changed"):
            await s.append_labelled("m", b"stale", [label("b", b"B", "yb")])
        assert (await s.append_labelled("m", b"e2", [label("b", b"B2", "yb")]))[0] == 2

    backend.run(t)


def test_concurrent_labels_of_one_id_one_wins(backend: Backend) -> None:
    """Two stores (two workers) label the same id at once: exactly one append lands."""

    async def t(s: Store) -> None:
        await s.create_model("m", CFG)
        await s.put_feedback("m", [(f"id{i}", b"R%d" % i) for i in range(20)], DAY)
        other = backend.new()
        await other.open()
        try:
            for i in range(20):
                rec = b"R%d" % i
                res = await asyncio.gather(
                    s.append_labelled("m", b"from s", [label(f"id{i}", rec, "s")]),
                    other.append_labelled("m", b"from other", [label(f"id{i}", rec, "o")]),
                    return_exceptions=True,
                )
                won = [r for r in res if isinstance(r, tuple)]
                lost = [r for r in res if isinstance(r, FeedbackConflict)]
                assert len(won) == 1 and len(lost) == 1, res
                assert lost[0].reason == "labelled"
        finally:
            await other.close()
        assert await s.last_position("m") == 20

    backend.run(t)


def test_expiry(backend: Backend) -> None:
    async def t(s: Store) -> None:
        await s.create_model("m", CFG)
        await s.put_feedback("m", [("short", b"S"), ("gone", b"G")], 0.3)
        await s.put_feedback("m", [("long", b"L")], DAY)
        await s.append_labelled("m", b"e", [label("gone", b"G", "y")])
        await asyncio.sleep(0.5)
        assert await s.get_feedback("m", ["short", "gone", "long"]) == [None, None, Feedback(b"L")]
        with pytest.raises(FeedbackConflict, match="missing"):
            await s.append_labelled("m", b"late", [label("short", b"S", "y")])
        # An expired labelled id is a new id again.
        assert await s.put_feedback("m", [("gone", b"G2")], DAY) is None
        assert await s.get_feedback("m", ["gone"]) == [Feedback(b"G2")]
        await s.sweep_feedback()
        assert await s.get_feedback("m", ["long"]) == [Feedback(b"L")]

    backend.run(t)


def test_survives_restart(backend: Backend) -> None:
    async def write(s: Store) -> None:
        await s.create_model("m", CFG)
        await s.put_feedback("m", [("a", b"A"), ("b", b"B")], DAY)
        await s.append_labelled("m", b"e", [label("a", b"A", "ya")])

    async def read(s: Store) -> None:
        assert await s.get_feedback("m", ["a", "b"]) == [Feedback(None, "ya", 1), Feedback(b"B")]
        assert (await s.append_labelled("m", b"e2", [label("b", b"B", "yb")]))[0] == 2

    backend.run(write)
    backend.restart()
    backend.run(read)


def test_delete_forgets_and_missing_model(backend: Backend) -> None:
    async def t(s: Store) -> None:
        with pytest.raises(ModelNotFound):
            await s.put_feedback("ghost", [("a", b"A")], DAY)
        with pytest.raises(ModelNotFound):
            await s.append_labelled("ghost", b"e", [label("a", b"A", "y")])
        assert await s.get_feedback("ghost", ["a"]) == [None]
        await s.create_model("m", CFG)
        await s.put_feedback("m", [("a", b"A"), ("b", b"B")], DAY)
        await s.append_labelled("m", b"e", [label("a", b"A", "y")])
        assert await s.delete_model("m")
        await s.create_model("m", CFG)
        assert await s.get_feedback("m", ["a", "b"]) == [None, None]
        with pytest.raises(FeedbackConflict, match="missing"):
            await s.append_labelled("m", b"e", [label("b", b"B", "y")])
        assert await s.last_position("m") == 0

    backend.run(t)


def test_bad_arguments(backend: Backend) -> None:
    async def t(s: Store) -> None:
        await s.create_model("m", CFG)
        for records in ([("a", b"A"), ("a", b"B")], [("", b"A")], [("a", b"")]):
            with pytest.raises(ValueError):
                await s.put_feedback("m", records, DAY)
        with pytest.raises(ValueError):
            await s.put_feedback("m", [("a", b"A")], 0)
        with pytest.raises(ValueError):
            await s.append_labelled("m", b"e", [label("a", b"A", "")])
        assert await s.put_feedback("m", [], DAY) is None
        assert await s.get_feedback("m", []) == []

    backend.run(t)


def test_due_feedback_lists_unlabelled_ids_expiring_soon(backend: Backend) -> None:
    """A decision model's default reward (service.engine.decision_defaults): the ids
    stored and unlabelled whose expiry is within the window, soonest first."""

    async def t(s: Store) -> None:
        await s.create_model("m", CFG)
        await s.put_feedback("m", [("late", b"L")], 50.0)
        await s.put_feedback("m", [("soon", b"S"), ("labelled", b"X")], 20.0)
        await s.put_feedback("m", [("far", b"F")], DAY)
        await s.append_labelled("m", b"e", [label("labelled", b"X", "m")], keep_seconds=10.0)
        assert await s.due_feedback("m", 100.0, 10) == ["soon", "late"]
        assert await s.due_feedback("m", 100.0, 1) == ["soon"]
        assert await s.due_feedback("m", 1.0, 10) == []
        assert await s.due_feedback("nope", 100.0, 10) == []

    backend.run(t)


def test_put_feedback_without_replacing(backend: Backend) -> None:
    """replace=False (a decision's record, service.engine.decisions): an id holding a
    record is taken as a labelled one is; nothing of the call is stored."""

    async def t(s: Store) -> None:
        await s.create_model("m", CFG)
        assert await s.put_feedback("m", [("a", b"first")], DAY, replace=False) is None
        assert await s.put_feedback("m", [("b", b"B"), ("a", b"again")], DAY, replace=False) == 1
        assert await s.get_feedback("m", ["a", "b"]) == [Feedback(b"first"), None]
        assert await s.put_feedback("m", [("a", b"replaced")], DAY) is None  # the default
        assert (await s.get_feedback("m", ["a"]))[0] == Feedback(b"replaced")

    backend.run(t)
