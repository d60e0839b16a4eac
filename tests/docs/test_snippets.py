"""The docs' shell and Python snippets, run verbatim against a live service.

One real ``learnserve serve`` is started on a free port with the embedded SQLite store
in a temp data directory, and for every page in ``RUN_PAGES``, in that order, every
fenced ``bash`` or ``python`` block that is not marked ``<!-- not-run: why -->`` runs
(python ones as scripts of ``.venv/bin/python``; every page with such a block must be
listed), in page order, in one temp working directory (what a reader would type in a
terminal at the top of the checkout: ``.venv`` there is a symlink to the virtualenv
running the tests, and its ``bin`` is taken off ``PATH``, so a snippet that calls bare
``learnserve`` without activating the venv fails here as it would for the reader).
Each bash block runs under ``bash -euo pipefail``; every block must exit 0; snippets
call ``curl -fsS``, so any non-2xx answer fails the block
(``test_curl_calls_fail_on_http_errors`` checks every run curl has ``-f``).

The port: snippets say ``localhost:8000`` (the default of ``make serve``) and the CLI
defaults to ``http://127.0.0.1:8000``. Here ``localhost:8000`` and ``127.0.0.1:8000``
are rewritten to the test server's address before running, and ``LEARNSERVE_URL``
(read by the CLI) is set to it. Nothing else is changed.

The markdown convention is described in tests/docs/markdown.py and in README
"Documentation".
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import shared_data_dir
from tests.docs.figures import model_names, stale_figures
from tests.docs.markdown import DOCS, REPO, Block, code_blocks, pages
from tests.service.procs import free_port, start_service, stop_process, wait_http_ok

# Pages whose bash blocks are run, each against a fresh service, in this order.
RUN_PAGES = [
    REPO / "README.md",
    DOCS / "getting-started.md",
    DOCS / "guides" / "online-models.md",
    DOCS / "guides" / "importance-weights.md",
    DOCS / "guides" / "delayed-labels.md",
    DOCS / "guides" / "idempotency.md",
    DOCS / "guides" / "export-import-inspect.md",
    DOCS / "guides" / "kserve-v2.md",
    DOCS / "guides" / "client-and-cli.md",
    DOCS / "guides" / "challengers.md",
    DOCS / "guides" / "regression.md",
    DOCS / "guides" / "decisions.md",
    DOCS / "guides" / "library.md",
]
# The languages of blocks that run: bash under `bash -euo pipefail`, python as a script
# run by the checkout's `.venv/bin/python` (the reader's interpreter).
RUN_LANGS = ("bash", "python")
# A block that would start, install or deploy something must be marked not-run.
MUST_NOT_RUN = re.compile(
    r"\bmake\s+(serve|test|lint|bench|format|warmup)\b|\blearnserve\s+serve\b"
    r"|\bdocker\b|\bkubectl\b|\bhelm\b|\bpip\s+install\b|\blocust\b"
)
SHELL_TAGS = {"sh", "shell", "console", "zsh"}
BLOCK_TIMEOUT = 60.0


def run_blocks(page: Path) -> list[Block]:
    return [b for b in code_blocks(page) if b.lang in RUN_LANGS and b.not_run is None]


def _ids(paths: list[Path]) -> list[str]:
    return [str(p.relative_to(REPO)) for p in paths]


# ------------------------------------------------------------------ static rules


def test_run_pages_exist_and_run_something() -> None:
    for page in RUN_PAGES:
        assert page.exists(), f"{page} is listed in RUN_PAGES but does not exist"
        assert run_blocks(page), f"{page.relative_to(REPO)}: no bash block to run"


def test_every_page_with_a_snippet_to_run_is_run() -> None:
    """A bash or python block on any page runs as printed, or is marked not-run with
    the reason (issue 31 item 7: a python snippet that was never run failed as printed)."""
    missing = [str(p.relative_to(REPO)) for p in pages() if run_blocks(p) and p not in RUN_PAGES]
    assert not missing, f"add to RUN_PAGES, or mark their blocks not-run: {missing}"


def test_markers_have_reasons_and_shell_is_tagged_bash() -> None:
    problems: list[str] = []
    for page in pages():
        for b in code_blocks(page):
            if b.marked_without_reason:
                problems.append(f"{b.where}: <!-- not-run --> needs a reason")
            if b.lang in SHELL_TAGS:
                problems.append(f"{b.where}: tag shell commands `bash` (not `{b.lang}`)")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("page", RUN_PAGES, ids=_ids(RUN_PAGES))
def test_blocks_that_must_not_run_are_marked(page: Path) -> None:
    bad = [b.where for b in run_blocks(page) if MUST_NOT_RUN.search(b.text)]
    assert not bad, f"mark these <!-- not-run: why --> (they start or deploy something): {bad}"


@pytest.mark.parametrize("page", RUN_PAGES, ids=_ids(RUN_PAGES))
def test_curl_calls_fail_on_http_errors(page: Path) -> None:
    bad: list[str] = []
    for b in run_blocks(page):
        if b.lang != "bash":
            continue
        # one logical command per entry: join backslash continuations, drop comments
        joined = re.sub(r"\\\n", " ", b.text)
        for line in joined.splitlines():
            line = line.split(" #", 1)[0]
            for call in re.split(r"[|;&]", line):
                if re.search(r"\bcurl\b", call) and not re.search(
                    r"(^|\s)(-[a-zA-Z]*f[a-zA-Z]*|--fail(-with-body)?)(\s|$)", call
                ):
                    bad.append(f"{b.where}: {call.strip()[:80]}")
    assert not bad, "curl without -f (a 4xx/5xx would pass unnoticed):\n" + "\n".join(bad)


# ------------------------------------------------------------------ the live run


def _server_cmd() -> list[str]:
    exe = Path(sys.executable).with_name("learnserve")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "service.cli"]


def _snippet_env(url: str) -> dict[str, str]:
    venv_bins = {str(Path(sys.prefix) / "bin"), str(Path(sys.executable).parent)}
    if os.environ.get("VIRTUAL_ENV"):
        venv_bins.add(str(Path(os.environ["VIRTUAL_ENV"]) / "bin"))
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("LEARNSERVE_") and k not in ("VIRTUAL_ENV", "PYTHONHOME")
    }
    path = [p for p in env.get("PATH", "").split(os.pathsep) if p and p not in venv_bins]
    env["PATH"] = os.pathsep.join(path)
    env["LEARNSERVE_URL"] = url
    # where the reader keeps the real data sets (pages that use one say
    # ${LEARNSERVE_SHARED_DATA:-../shared/data}); this temp directory has no ../shared
    env["LEARNSERVE_SHARED_DATA"] = str(shared_data_dir())
    return env


def _with_port(text: str, port: int) -> str:
    return re.sub(r"\b(localhost|127\.0\.0\.1):8000\b", f"127.0.0.1:{port}", text)


@dataclass
class LiveService:
    url: str
    port: int
    proc: subprocess.Popen[bytes]
    work: Path  # the reader's terminal: the top of a checkout, with .venv
    # model name -> the page that first used it (tests.docs.figures)
    first_used: dict[str, Path] = field(default_factory=dict)


@pytest.fixture(scope="module")
def live_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveService]:
    """One service for every page, as a reader who goes through the docs in order on one
    machine: a model one page creates with another body than an earlier page is a 409
    here too."""
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed (the snippets use it)")
    root = tmp_path_factory.mktemp("docs-snippets")
    work = root / "work"
    work.mkdir()
    (work / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server_env = {k: v for k, v in os.environ.items() if not k.startswith("LEARNSERVE_")}
    server_env |= {"LEARNSERVE_LOG_LEVEL": "warning", "LEARNSERVE_DATA_DIR": str(root / "data")}
    args = [*_server_cmd(), "serve", "--host", "127.0.0.1", "--port", str(port)]
    # A cold numba compile takes minutes; `make test` runs `learnserve warmup` first.
    proc = start_service(args, server_env, port, timeout=300)
    try:
        wait_http_ok(f"{url}/readyz", timeout=300, proc=proc)
        yield LiveService(url, port, proc, work)
    finally:
        stop_process(proc)


@pytest.mark.parametrize("page", RUN_PAGES, ids=_ids(RUN_PAGES))
def test_snippets_run(page: Path, live_service: LiveService) -> None:
    if "LEARNSERVE_SHARED_DATA" in page.read_text() and not shared_data_dir().exists():
        pytest.skip(f"{page.name} reads a real data set; {shared_data_dir()} is absent")
    env = _snippet_env(live_service.url)
    work = live_service.work
    for b in run_blocks(page):
        if b.lang == "python":
            script = work / f"{page.stem}-{b.line}.py"
            script.write_text(_with_port(b.text, live_service.port))
            cmd = [str(Path(".venv") / "bin" / "python"), script.name]
        else:
            script = work / f"{page.stem}-{b.line}.sh"
            script.write_text("set -euo pipefail\n" + _with_port(b.text, live_service.port))
            cmd = ["bash", script.name]
        try:
            r = subprocess.run(
                cmd,
                cwd=work,
                env=env,
                capture_output=True,
                text=True,
                timeout=BLOCK_TIMEOUT,
            )
        except subprocess.TimeoutExpired:
            pytest.fail(f"{b.where}: still running after {BLOCK_TIMEOUT:.0f} s\n{b.text}")
        assert r.returncode == 0, (
            f"{b.where}: exit {r.returncode}\n--- block ---\n{b.text}"
            f"--- stdout ---\n{r.stdout[-3000:]}\n--- stderr ---\n{r.stderr[-3000:]}\n"
            f"--- server log: {getattr(live_service.proc, 'log_path', '?')}"
        )
        # the figures its comments quote are what it printed (issue 31 item 9), on the
        # page that first uses its models (a later page's model was taught before)
        first = [live_service.first_used.setdefault(n, page) for n in model_names(b.text)]
        if all(p == page for p in first):
            stale = stale_figures(b.text, r.stdout)
            assert not stale, f"{b.where}: figures out of date:\n" + "\n".join(stale)
