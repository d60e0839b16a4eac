"""``Client.deploy`` / ``AsyncClient.deploy`` take the artifact as a path (``str`` or
``pathlib.Path``: the file is read) or as bytes (``bytes``, ``bytearray``,
``memoryview``); anything else is a ``TypeError`` naming the argument, before any
request. Before, ``deploy(name, "model.lsart")`` uploaded the 10 characters of the
name and the service answered "artifact is truncated"."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from service.client import AsyncClient, Client
from tests.client.test_cli_batch_predict import letor_lines, run, write_letor


@pytest.fixture(scope="module")
def artifact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("deploy-paths")
    write_letor(d / "t.letor", letor_lines(6, 0), qid=True)
    run("train", "lambdamart", "--train", d / "t.letor", "--trees", 2,
        "--min-data-in-leaf", 5, "--min-sum-hessian-in-leaf", 0, "-o", d / "m.lsart")  # fmt: skip
    return d / "m.lsart"


def forms(path: Path) -> dict[str, Any]:
    blob = path.read_bytes()
    return {
        "str": str(path),
        "path": path,
        "bytes": blob,
        "bytearray": bytearray(blob),
        "memoryview": memoryview(blob),
    }


def test_sync_deploy_takes_paths_and_bytes(server: Any, artifact: Path) -> None:
    size = artifact.stat().st_size
    checksums = set()
    with Client(server.url) as c:
        for form, value in forms(artifact).items():
            r = c.deploy(f"paths-{form}", value)
            assert (r.size, r.kind, r.created, r.version) == (size, "lambdamart", True, 1), form
            checksums.add(r.checksum)
    assert len(checksums) == 1  # the file's bytes, whatever the form


def test_async_deploy_takes_paths_and_bytes(server: Any, artifact: Path) -> None:
    size = artifact.stat().st_size

    async def main() -> list[int]:
        async with AsyncClient(server.url) as c:
            return [(await c.deploy(f"apaths-{f}", v)).size for f, v in forms(artifact).items()]

    assert asyncio.run(main()) == [size] * 5


@pytest.mark.parametrize("bad", [42, None, ["m.lsart"], b"m.lsart".decode, 3.5])
def test_anything_else_is_a_type_error_before_any_request(bad: Any) -> None:
    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(500)

    with (
        Client(transport=httpx.MockTransport(handler)) as c,
        pytest.raises(TypeError, match=r"^artifact: expected a path \(str or pathlib.Path\)"),
    ):
        c.deploy("m", bad)

    async def main() -> None:
        async with AsyncClient(transport=httpx.MockTransport(handler)) as a:
            await a.deploy("m", bad)

    with pytest.raises(TypeError, match="artifact: expected a path"):
        asyncio.run(main())
    assert sent == []


def test_a_missing_file_is_an_os_error(tmp_path: Path) -> None:
    with Client(transport=httpx.MockTransport(lambda r: httpx.Response(500))) as c:
        with pytest.raises(FileNotFoundError):
            c.deploy("m", str(tmp_path / "absent.lsart"))
