"""The two per-code-point tables the text kernels read, built once per process from
Python's own Unicode database (``unicodedata.unidata_version``, recorded in the
encoder's state as ``unicode``):

- ``token_chars()[c]`` is 1 when code point ``c`` belongs to a token: ``chr(c).isalnum()``
  (letters, digits and other numerics) or a combining mark (general category ``M*``).
  Marks are included because ``isalnum()`` and ``re``'s ``\\w`` leave them out, which
  cuts Devanagari ``"हिन्दी"`` into ``ह न द`` and a decomposed ``"café"`` in two.
- ``lower_table()[c]`` is the code point ``c`` lower-cases to: ``chr(c).lower()`` where
  that is one code point; the single exception, U+0130 (``İ``, which ``lower()`` makes
  two code points, ``i`` + U+0307), maps to ``i``, its Unicode simple lowercase.

Building both takes ~0.3 s; they are cached for the process.

>>> bool(token_chars()[ord("é")]), bool(token_chars()[ord("-")]), chr(lower_table()[ord("Ä")])
(True, False, 'ä')
"""

from __future__ import annotations

import unicodedata
from functools import cache

import numpy as np

__all__ = ["UNICODE_VERSION", "lower_table", "token_chars"]

UNICODE_VERSION = unicodedata.unidata_version
N_CODE_POINTS = 0x110000


def _all_chars() -> np.ndarray:
    return np.arange(N_CODE_POINTS, dtype=np.uint32).view("<U1")


@cache
def token_chars() -> np.ndarray:
    """uint8 per code point: 1 for a token character (alphanumeric or a mark)."""
    out = np.strings.isalnum(_all_chars()).astype(np.uint8)
    category = unicodedata.category
    for c in range(N_CODE_POINTS):
        if not out[c] and category(chr(c))[0] == "M":
            out[c] = 1
    out.setflags(write=False)
    return out


@cache
def lower_table() -> np.ndarray:
    """uint32 per code point: its lower-case code point (one-to-one)."""
    # numpy keeps the first code point of a longer lower-case form: U+0130 -> "i"
    out = np.strings.lower(_all_chars()).view(np.uint32).copy()
    out.setflags(write=False)
    return out
