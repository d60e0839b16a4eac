"""Reading the docs' Markdown: fenced code blocks (with their not-run markers), links,
headings and table rows. Plain stdlib, shared by the tests in tests/docs.

The snippet convention (README "Documentation"):

- A fenced block tagged ``bash`` or ``python`` is executed by the snippet test,
  verbatim, in order with the page's other blocks (every page with such a block is
  run); a python block's inputs are defined in it or by the page's blocks before it.
- A ``bash`` or ``python`` block that must not run (it starts the server, installs, needs Docker, a
  data set or a cluster) has ``<!-- not-run: why -->`` on the line right above its
  opening fence. The reason is required.
- Output is shown in ``text`` or ``json`` blocks, or as ``# ->`` comments inside a
  ``bash`` block; shell commands are never tagged ``sh``, ``shell`` or ``console``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"

_FENCE = re.compile(r"^(?P<indent>[ ]{0,4})(?P<fence>`{3,})(?P<lang>[\w+-]*)\s*$")
_NOT_RUN = re.compile(r"^\s*<!--\s*not-run:\s*(?P<reason>.*?)\s*-->\s*$")
_NOT_RUN_EMPTY = re.compile(r"^\s*<!--\s*not-run\s*:?\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    lang: str
    text: str
    not_run: str | None  # the reason, when marked <!-- not-run: reason -->
    marked_without_reason: bool = False

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def pages() -> list[Path]:
    """README.md and every Markdown page under docs/."""
    return [REPO / "README.md", *sorted(DOCS.rglob("*.md"))]


def code_blocks(page: Path) -> list[Block]:
    lines = page.read_text().splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang = len(m["indent"]), m["fence"], m["lang"]
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines) and lines[i].strip() != fence:
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
            i += 1
        i += 1  # the closing fence
        prev = start - 1
        while prev >= 0 and not lines[prev].strip():
            prev -= 1
        marker = _NOT_RUN.match(lines[prev]) if prev >= 0 else None
        empty = bool(prev >= 0 and _NOT_RUN_EMPTY.match(lines[prev]))
        reason = marker["reason"] if marker and marker["reason"] else None
        blocks.append(Block(page, start + 1, lang, "\n".join(body) + "\n", reason, empty))
    return blocks


def strip_code(text: str) -> str:
    """The page without its fenced blocks and inline code (for link and anchor checks)."""
    out: list[str] = []
    in_fence: str | None = None
    for line in text.splitlines():
        m = _FENCE.match(line)
        if in_fence is None and m:
            in_fence = m["fence"]
            continue
        if in_fence is not None:
            if line.strip() == in_fence:
                in_fence = None
            continue
        out.append(re.sub(r"`[^`]*`", "", line))
    return "\n".join(out)


_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def links(page: Path) -> list[str]:
    return _LINK.findall(strip_code(page.read_text()))


def anchors(page: Path) -> set[str]:
    """GitHub's anchors of the page's headings (lower case, punctuation dropped, spaces
    to hyphens, repeats numbered)."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    for line in strip_code(page.read_text().replace("`", "")).splitlines():
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", m[1].strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def section(text: str, heading: str) -> str:
    """The text under ``heading`` (a full heading line, e.g. '## Deploy') up to the next
    heading of the same or a higher level."""
    level = len(heading) - len(heading.lstrip("#"))
    after = text.split(heading + "\n", 1)[1]
    stop = re.search(rf"^#{{1,{level}}} ", after, flags=re.M)
    return after[: stop.start()] if stop else after
