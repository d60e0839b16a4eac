"""``Store.create_model_from_checkpoint`` (imports) on the three stores: the model and
its checkpoint at position 0 appear together; an equal config leaves the stored
state alone; a different one is a conflict and stores nothing."""

from __future__ import annotations

import numpy as np
import pytest

from service.store import ConfigConflict, Store
from tests.service.test_store_contract import CFG, Backend, backend  # noqa: F401

IMPORTED = {**CFG, "imported": "ab" * 32}


def test_create_with_checkpoint(backend: Backend) -> None:  # noqa: F811
    state = np.random.default_rng(0).integers(0, 256, 2_600_003, dtype=np.uint8)  # 3 chunks

    async def t(s: Store) -> None:
        epoch = await s.catalog_epoch()
        assert await s.create_model_from_checkpoint("m", IMPORTED, memoryview(state)) is True
        assert await s.catalog_epoch() > epoch
        assert (await s.list_models())["m"] == IMPORTED
        c = await s.get_checkpoint("m")
        assert c is not None and c.position == 0 and c.blob == state.tobytes()
        # the same import again: nothing changes
        assert await s.create_model_from_checkpoint("m", IMPORTED, b"other") is False
        c = await s.get_checkpoint("m")
        assert c is not None and c.blob == state.tobytes()
        # another config: a conflict, nothing written
        with pytest.raises(ConfigConflict):
            await s.create_model_from_checkpoint("m", {**IMPORTED, "imported": "cd"}, b"x")
        assert await s.create_model_from_checkpoint("plain", CFG, b"x") is True
        with pytest.raises(ConfigConflict):
            await s.create_model_from_checkpoint("plain", IMPORTED, b"y")
        c = await s.get_checkpoint("plain")
        assert c is not None and c.blob == b"x"
        # the log starts at 1 after an imported checkpoint; later checkpoints replace it
        assert await s.append("m", b"e1") == 1
        await s.put_checkpoint("m", 1, b"after one")
        c = await s.get_checkpoint("m")
        assert c is not None and (c.position, c.blob) == (1, b"after one")
        # deleted and imported again: the new state, not the old one
        assert await s.delete_model("m")
        assert await s.create_model_from_checkpoint("m", IMPORTED, b"again") is True
        c = await s.get_checkpoint("m")
        assert c is not None and (c.position, c.blob) == (0, b"again")
        assert await s.last_position("m") == 0

    backend.run(t)


def test_empty_state_and_plain_create_interplay(backend: Backend) -> None:  # noqa: F811
    async def t(s: Store) -> None:
        assert await s.create_model("p", CFG) is True
        # an import onto an existing model of an equal config is "exists", state untouched
        assert await s.create_model_from_checkpoint("p", CFG, b"ignored") is False
        assert await s.get_checkpoint("p") is None
        assert await s.create_model_from_checkpoint("z", IMPORTED, b"") is True
        c = await s.get_checkpoint("z")
        assert c is not None and (c.position, c.blob) == (0, b"")

    backend.run(t)
