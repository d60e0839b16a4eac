"""Figures a page quotes from what its commands print (issue 31 item 9).

A ``bash`` block shows a command's output as comments (``# -> {...}``, or ``#``-lines
after the command); where such a comment quotes a JSON member with a decimal figure
(``"log_loss": 0.6602``), the snippet test compares it with what the block printed when
it ran: some member of that name in the output must have the value the page quotes, to
within one unit of its last printed digit (``0.6602``: 0.0001). A figure a command no
longer prints, or prints otherwise, fails the page, naming both.

The snippet test runs every page against one service, in order, and several guides
teach a model of the same name (``adult``) as the README did: their figures are a fresh
reader's, so a block's figures are checked on the page that first names its models
(:func:`model_names`); the same figures on a later page are checked where they recur
first (the README's ``adult`` answer, quoted again by two guides, is checked there).
"""

from __future__ import annotations

import re

_PAIR = re.compile(r'"(?P<key>\w+)"\s*:\s*(?P<num>-?\d+\.\d+(?:[eE][-+]?\d+)?)')
# a comment: '#' at the start of a line or after a blank (not a URL's fragment)
_COMMENT = re.compile(r"(?:^|\s)#(?P<text>.*)$")


_MODEL = re.compile(
    r'models/(?P<path>[\w.-]+)|"model"\s*:\s*"(?P<body>[\w.-]+)"'
    r"|learnserve\s+(?:models\s+\w+|update|predict)\s+(?P<cli>[\w.-]+)"
)


def model_names(block: str) -> set[str]:
    """The model names a block's commands use (paths, bodies, the CLI)."""
    return {n for m in _MODEL.finditer(block) for n in m.groups() if n}


def quoted_figures(block: str) -> list[tuple[str, str]]:
    """(member, figure as written) for every decimal JSON member in the block's comments."""
    out: list[tuple[str, str]] = []
    for line in block.splitlines():
        m = _COMMENT.search(line)
        if m:
            out.extend((p["key"], p["num"]) for p in _PAIR.finditer(m["text"]))
    return out


def printed_figures(output: str) -> dict[str, list[float]]:
    """Member -> every number printed under that name (JSON, compact or indented)."""
    out: dict[str, list[float]] = {}
    for m in re.finditer(r'"(\w+)"\s*:\s*(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)', output):
        out.setdefault(m[1], []).append(float(m[2]))
    return out


def tolerance(figure: str) -> float:
    """One unit of the figure's last printed digit (``0.6602``: 1e-4)."""
    mantissa, _, exponent = figure.lower().partition("e")
    decimals = len(mantissa.partition(".")[2])
    return float(10.0 ** (-decimals + int(exponent or 0)))


def stale_figures(block: str, output: str) -> list[str]:
    """The block's quoted figures that its output does not bear out, described."""
    printed = printed_figures(output)
    stale = []
    for key, figure in quoted_figures(block):
        values = printed.get(key, [])
        if not any(abs(v - float(figure)) <= tolerance(figure) * (1 + 1e-9) for v in values):
            shown = ", ".join(f"{v:.6g}" for v in values[:5]) or "nothing"
            stale.append(f'"{key}": the page says {figure}, the command printed {shown}')
    return stale
