"""Issue 31 item 11: a guide's shell snippet must not leave files in the checkout. Every
file a ``bash`` block of the docs (README included) writes (``> FILE``, ``-o FILE``,
``--output FILE``) is either in a temporary directory (a path from a variable such as
``"$dir/..."`` set by ``mktemp -d``, or under ``$TMPDIR``/``/tmp``) or, when a guide
writes it where the reader runs it, covered by ``.gitignore``."""

from __future__ import annotations

import re
import subprocess

from tests.docs.markdown import REPO, code_blocks, pages

WRITES = re.compile(r"(?<![<&\d])(?:>>?|\s-o|\s--output)\s*(\"[^\"]+\"|'[^']+'|[^\s|;&)<>]+)")


HEREDOC = re.compile(r"<<-?\s*'?(\w+)'?[^\n]*\n.*?^\s*\1$", re.S | re.M)


def written(text: str) -> list[str]:
    """The paths a shell text writes to, as written (quotes removed): outside heredoc
    bodies, single-quoted strings (JSON bodies) and comments."""
    text = HEREDOC.sub(lambda m: m.group(0).split("\n", 1)[0], text)
    text = re.sub(r"'[^']*'", "''", text)
    text = re.sub(r"(^|\s)#.*", "", text)
    return [m.group(1).strip("\"'") for m in WRITES.finditer(text)]


def in_temp(path: str) -> bool:
    return path.startswith(("$", "${", "/tmp/", "/dev/"))


def test_written_files_parse() -> None:
    text = (
        'cat > adult-10.json <<\'EOF\'\n{"y": ">50K"}\nEOF\ncurl -o a.lsrn x 2>&1 >/dev/null\n'
        'curl -d \'{"y": ">50K"}\' x  # -> {"y": ">50K"}\n-o "$dir/p.jsonl"'
    )
    assert written(text) == ["adult-10.json", "a.lsrn", "/dev/null", "$dir/p.jsonl"]


def test_snippets_write_into_a_temporary_directory_or_an_ignored_file() -> None:
    left = []
    for page in pages():
        for b in code_blocks(page):
            if b.lang != "bash":
                continue
            for path in written(b.text):
                if in_temp(path):
                    continue
                ignored = subprocess.run(["git", "check-ignore", "-q", "--no-index", path],
                                         cwd=REPO, check=False).returncode == 0  # fmt: skip
                if not ignored:
                    left.append(f"{b.where}: {path}")
    assert not left, "files a snippet leaves in the checkout (not in .gitignore):\n" + "\n".join(
        left
    )
