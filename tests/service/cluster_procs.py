"""A real Redis Cluster for tests: N ``redis-server --cluster-enabled yes`` masters
(AOF on, like ``RedisServer``) on free ports, joined by ``redis-cli --cluster create``.

::

    cluster = RedisClusterNodes(find_redis_server(), find_redis_cli(), tmp_dir, masters=3)
    cluster.start()          # creates the cluster the first time, waits for cluster_state:ok
    cluster.url              # redis://127.0.0.1:<port of the first master>
    cluster.stop(); cluster.start()   # SHUTDOWN (AOF fsynced) + restart: the data come back
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

from tests.service.procs import RedisServer, free_port


def find_redis_cli(redis_server: str | None) -> str | None:
    """``redis-cli`` on PATH, else beside the redis-server binary."""
    found = shutil.which("redis-cli")
    if found:
        return found
    if redis_server:
        beside = Path(redis_server).with_name("redis-cli")
        if os.access(beside, os.X_OK):
            return str(beside)
    return None


def cluster_args() -> list[str]:
    # nodes.conf keeps the node's identity and slots across restarts (in --dir). The
    # bus port is a free port of its own: the default (port + 10000) may be taken or,
    # for a port over 55535, impossible. As the README's "Durability on Redis" asks:
    # a failed master's slots do not stop the other masters (full coverage "no"), and a
    # replica's full resync after a failover starts at once (no 5 s diskless delay).
    return ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
            "--cluster-node-timeout", "2000", "--cluster-port", str(free_port()),
            "--repl-diskless-sync-delay", "0", "--cluster-require-full-coverage", "no"]  # fmt: skip


class RedisClusterNodes:
    def __init__(
        self, server: str, cli: str, directory: Path, masters: int = 3, replicas: int = 0
    ) -> None:
        self.cli = cli
        self.replicas = replicas  # per master
        self.nodes = [
            RedisServer(server, Path(directory) / f"node{i}", extra_args=cluster_args())
            for i in range(masters * (1 + replicas))
        ]
        self.created = False

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.nodes[0].port}"

    @property
    def running(self) -> bool:
        return all(n.running for n in self.nodes)

    def start(self, timeout: float = 60.0) -> None:
        for n in self.nodes:
            n.start()
        if not self.created:
            addrs = [f"127.0.0.1:{n.port}" for n in self.nodes]
            run = subprocess.run(
                [self.cli, "--cluster", "create", *addrs, "--cluster-replicas", str(self.replicas),
                 "--cluster-yes"],
                capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            if run.returncode != 0:
                raise RuntimeError(f"redis-cli --cluster create failed: {run.stdout}{run.stderr}")
            self.created = True
        self.wait_ok(timeout)

    def wait_ok(self, timeout: float = 60.0) -> None:
        """Until every node says cluster_state:ok and knows every master."""
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            try:
                states = []
                for n in self.nodes:
                    with n.client(1.0) as c:
                        info = c.execute_command("CLUSTER", "INFO")
                        text = info.decode() if isinstance(info, bytes) else str(info)
                        states.append(text)
                if all(
                    "cluster_state:ok" in t and f"cluster_known_nodes:{len(self.nodes)}" in t
                    for t in states
                ):
                    return
                last = states[0][:200]
            except Exception as e:  # not up yet
                last = repr(e)
            time.sleep(0.1)
        raise RuntimeError(f"cluster not ok within {timeout}s: {last}")

    def master_port(self, key: str) -> int:
        """The port of the master serving ``key``'s slot now (asked of a running node)."""
        for n in self.nodes:
            if not n.running:
                continue
            with n.client(1.0) as c:
                slot = c.execute_command("CLUSTER", "KEYSLOT", key)
                for start, end, master, *_ in c.execute_command("CLUSTER", "SLOTS"):
                    if start <= slot <= end:
                        return int(master[1])
        raise RuntimeError(f"no running node serves {key!r}")

    def stop(self) -> None:
        for n in self.nodes:
            n.stop()

    def kill(self) -> None:
        for n in self.nodes:
            n.kill()

    def flushall(self) -> None:
        for n in self.nodes:
            n.flushall()
