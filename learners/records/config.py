"""The configuration of a ``"records"`` feature kind, read from its JSON form and checked
field by field: :func:`parse_config` gives a :class:`RecordsConfig` or raises
:class:`ConfigError` naming the path of the bad value (``features.fields.age.transform``).

>>> cfg = parse_config({"kind": "records", "bits": 18, "fields": {
...     "age": {"type": "numeric", "transform": {"bins": [25, 40, 60]}},
...     "job": {"type": "categorical", "namespace": "c"}}})
>>> cfg.dim, [f.name for f in cfg.fields], cfg.fields[0].edges
(262144, ['age', 'job'], (25.0, 40.0, 60.0))
>>> parse_config({"kind": "records", "fields": {"age": {"type": "numeric", "transform": "log"}}})
Traceback (most recent call last):
...
learners.records.config.ConfigError: features.fields.age.transform: must be 'none', \
'log1p', 'standardize' or {"bins": [edges...]}, got 'log'
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

__all__ = [
    "CategoricalField",
    "ConfigError",
    "NumericField",
    "RecordsConfig",
    "TextField",
    "parse_config",
]

# A feature name is "<field><separator><rest>": a field name holding a separator could
# spell another field's feature name, so these are refused in field names.
NAME_SEPARATORS = "=^~#*"
MAX_BITS = 31
MAX_IDF_BITS = 24  # idf keeps a dense document-frequency count per column (4 B each)
TRANSFORMS = ("none", "log1p", "standardize")
WEIGHTINGS = ("binary", "tf", "log_tf")


class ConfigError(ValueError):
    """A bad value in a records config; ``path`` names it (``features.fields.x.type``)."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


@dataclass(frozen=True)
class NumericField:
    name: str
    namespace: str
    transform: str  # "none", "log1p", "standardize" or "bins"
    edges: tuple[float, ...] = ()


@dataclass(frozen=True)
class CategoricalField:
    name: str
    namespace: str


@dataclass(frozen=True)
class TextField:
    name: str
    namespace: str
    lowercase: bool = True
    word_ngrams: int = 1  # 0: no word features
    skips: int = 0
    char_min: int = 0  # 0: no character n-grams
    char_max: int = 0
    across_words: bool = False
    weighting: str = "log_tf"
    idf: bool = False
    normalize: bool = True


Field = NumericField | CategoricalField | TextField


@dataclass(frozen=True)
class RecordsConfig:
    bits: int
    intercept: bool
    unknown_fields: str  # "ignore" or "refuse"
    max_features_per_record: int
    max_text_bytes: int
    fields: tuple[Field, ...]
    interactions: tuple[tuple[str, ...], ...]

    @property
    def dim(self) -> int:
        return 1 << self.bits

    def namespaces(self) -> list[str]:
        """The namespaces of the fields, each once, in field order (ids used by kernels)."""
        return list(dict.fromkeys(f.namespace for f in self.fields))

    def to_config(self) -> dict[str, Any]:
        """The canonical JSON form (every default written out)."""
        fields: dict[str, Any] = {}
        for f in self.fields:
            if isinstance(f, NumericField):
                tr: Any = {"bins": list(f.edges)} if f.transform == "bins" else f.transform
                fields[f.name] = {"type": "numeric", "transform": tr, "namespace": f.namespace}
            elif isinstance(f, CategoricalField):
                fields[f.name] = {"type": "categorical", "namespace": f.namespace}
            else:
                chars = (
                    None
                    if f.char_min == 0
                    else {"ngrams": [f.char_min, f.char_max], "across_words": f.across_words}
                )
                words = None if f.word_ngrams == 0 else {"ngrams": f.word_ngrams, "skips": f.skips}
                fields[f.name] = {
                    "type": "text",
                    "lowercase": f.lowercase,
                    "words": words,
                    "chars": chars,
                    "weighting": f.weighting,
                    "idf": f.idf,
                    "normalize": f.normalize,
                    "namespace": f.namespace,
                }
        return {
            "kind": "records",
            "bits": self.bits,
            "intercept": self.intercept,
            "unknown_fields": self.unknown_fields,
            "max_features_per_record": self.max_features_per_record,
            "max_text_bytes": self.max_text_bytes,
            "fields": fields,
            "interactions": [list(t) for t in self.interactions],
        }


# ---------------------------------------------------------------------- readers


def _obj(v: Any, path: str, keys: tuple[str, ...]) -> Mapping[str, Any]:
    if not isinstance(v, Mapping):
        raise ConfigError(path, f"must be an object, got {_tname(v)}")
    for k in v:
        if k not in keys:
            raise ConfigError(f"{path}.{k}", f"unknown key (expected one of: {', '.join(keys)})")
    return v


def _tname(v: Any) -> str:
    return "null" if v is None else type(v).__name__


def _int(v: Any, path: str, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise ConfigError(path, f"must be an integer in [{lo}, {hi}], got {v!r}")
    return v


def _bool(v: Any, path: str) -> bool:
    if not isinstance(v, bool):
        raise ConfigError(path, f"must be true or false, got {v!r}")
    return v


def _choice(v: Any, path: str, options: tuple[str, ...]) -> str:
    if v not in options or not isinstance(v, str):
        raise ConfigError(path, f"must be one of {', '.join(map(repr, options))}, got {v!r}")
    return v


def _namespace(v: Any, path: str) -> str:
    if not isinstance(v, str) or not v or any(c in NAME_SEPARATORS for c in v):
        raise ConfigError(path, f"must be a non-empty string without {NAME_SEPARATORS}, got {v!r}")
    return v


def _numeric(name: str, spec: Mapping[str, Any], path: str) -> NumericField:
    _obj(spec, path, ("type", "transform", "namespace"))
    ns = _namespace(spec.get("namespace", name), f"{path}.namespace")
    tr = spec.get("transform", "none")
    if isinstance(tr, Mapping):
        _obj(tr, f"{path}.transform", ("bins",))
        edges = tr.get("bins")
        epath = f"{path}.transform.bins"
        if not isinstance(edges, list) or not 1 <= len(edges) <= 1000:
            raise ConfigError(epath, "must be a list of 1 to 1000 numbers (the bin edges)")
        out = []
        for j, e in enumerate(edges):
            if isinstance(e, bool) or not isinstance(e, int | float) or not math.isfinite(e):
                raise ConfigError(f"{epath}[{j}]", f"must be a finite number, got {e!r}")
            out.append(float(e))
        if any(b <= a for a, b in pairwise(out)):
            raise ConfigError(epath, "edges must be strictly increasing")
        return NumericField(name, ns, "bins", tuple(out))
    if tr not in TRANSFORMS or not isinstance(tr, str):
        raise ConfigError(
            f"{path}.transform",
            f"must be 'none', 'log1p', 'standardize' or {{\"bins\": [edges...]}}, got {tr!r}",
        )
    return NumericField(name, ns, tr)


def _ngram_range(v: Any, path: str) -> tuple[int, int]:
    if isinstance(v, list) and len(v) == 2:
        lo, hi = _int(v[0], f"{path}[0]", 1, 10), _int(v[1], f"{path}[1]", 1, 10)
        if hi < lo:
            raise ConfigError(path, f"must be [min, max] with min <= max, got {v!r}")
        return lo, hi
    if isinstance(v, list):
        raise ConfigError(path, f"must be n or [min, max], got {v!r}")
    n = _int(v, path, 1, 10)
    return n, n


def _text(name: str, spec: Mapping[str, Any], path: str) -> TextField:
    keys = ("type", "lowercase", "words", "chars", "weighting", "idf", "normalize", "namespace")
    _obj(spec, path, keys)
    words = spec.get("words", {"ngrams": 1})
    wn, skips = 0, 0
    if words is not None:
        _obj(words, f"{path}.words", ("ngrams", "skips"))
        wn = _int(words.get("ngrams", 1), f"{path}.words.ngrams", 1, 5)
        skips = _int(words.get("skips", 0), f"{path}.words.skips", 0, 4)
    chars = spec.get("chars")
    lo = hi = 0
    across = False
    if chars is not None:
        _obj(chars, f"{path}.chars", ("ngrams", "across_words"))
        if "ngrams" not in chars:
            raise ConfigError(f"{path}.chars.ngrams", "is required (n or [min, max])")
        lo, hi = _ngram_range(chars["ngrams"], f"{path}.chars.ngrams")
        across = _bool(chars.get("across_words", False), f"{path}.chars.across_words")
    if wn == 0 and lo == 0:
        raise ConfigError(path, "words and chars are both null: the field would give nothing")
    return TextField(
        name,
        _namespace(spec.get("namespace", name), f"{path}.namespace"),
        lowercase=_bool(spec.get("lowercase", True), f"{path}.lowercase"),
        word_ngrams=wn,
        skips=skips,
        char_min=lo,
        char_max=hi,
        across_words=across,
        weighting=_choice(spec.get("weighting", "log_tf"), f"{path}.weighting", WEIGHTINGS),
        idf=_bool(spec.get("idf", False), f"{path}.idf"),
        normalize=_bool(spec.get("normalize", True), f"{path}.normalize"),
    )


def _field(name: Any, spec: Any, path: str) -> Field:
    if not isinstance(name, str) or not name or any(c in NAME_SEPARATORS for c in name):
        raise ConfigError(
            path, f"a field name must be a non-empty string without {NAME_SEPARATORS}"
        )
    if not name.isprintable():  # no control characters, no lone surrogates
        raise ConfigError(path, "a field name must be printable text")
    if not isinstance(spec, Mapping):
        raise ConfigError(path, f"must be an object, got {_tname(spec)}")
    kind = spec.get("type")
    if kind == "numeric":
        return _numeric(name, spec, path)
    if kind == "categorical":
        _obj(spec, path, ("type", "namespace"))
        return CategoricalField(name, _namespace(spec.get("namespace", name), f"{path}.namespace"))
    if kind == "text":
        return _text(name, spec, path)
    raise ConfigError(f"{path}.type", f"must be 'numeric', 'categorical' or 'text', got {kind!r}")


def parse_config(config: Any, path: str = "features") -> RecordsConfig:
    """Read and check a records config; :class:`ConfigError` names the bad value's path."""
    keys = (
        "kind",
        "bits",
        "intercept",
        "unknown_fields",
        "max_features_per_record",
        "max_text_bytes",
        "fields",
        "interactions",
    )
    _obj(config, path, keys)
    if config.get("kind") != "records":
        raise ConfigError(f"{path}.kind", f"must be 'records', got {config.get('kind')!r}")
    bits = _int(config.get("bits", 20), f"{path}.bits", 1, MAX_BITS)
    raw_fields = config.get("fields")
    if not isinstance(raw_fields, Mapping) or not raw_fields:
        raise ConfigError(f"{path}.fields", "must be a non-empty object of field: spec")
    fields = tuple(_field(k, v, f"{path}.fields.{k}") for k, v in raw_fields.items())
    for f in fields:
        if isinstance(f, TextField) and f.idf and bits > MAX_IDF_BITS:
            raise ConfigError(
                f"{path}.fields.{f.name}.idf",
                f"idf needs bits <= {MAX_IDF_BITS} (a document count per column), bits is {bits}",
            )
    known = {f.namespace for f in fields}
    inter = config.get("interactions", [])
    ipath = f"{path}.interactions"
    if not isinstance(inter, list):
        raise ConfigError(
            ipath, f"must be a list of [namespace, namespace(, namespace)], got {_tname(inter)}"
        )
    seen: set[tuple[str, ...]] = set()
    for j, t in enumerate(inter):
        if not isinstance(t, list) or len(t) not in (2, 3):
            raise ConfigError(f"{ipath}[{j}]", "must be a list of 2 or 3 namespaces")
        for q, ns in enumerate(t):
            if not isinstance(ns, str) or ns not in known:  # (a list is not hashable)
                raise ConfigError(f"{ipath}[{j}][{q}]", f"{ns!r} is not the namespace of a field")
        if tuple(t) in seen:
            raise ConfigError(f"{ipath}[{j}]", f"{t!r} is listed twice")
        seen.add(tuple(t))
    return RecordsConfig(
        bits=bits,
        intercept=_bool(config.get("intercept", True), f"{path}.intercept"),
        unknown_fields=_choice(
            config.get("unknown_fields", "ignore"), f"{path}.unknown_fields", ("ignore", "refuse")
        ),
        max_features_per_record=_int(
            config.get("max_features_per_record", 10_000),
            f"{path}.max_features_per_record",
            1,
            1_000_000,
        ),
        max_text_bytes=_int(
            config.get("max_text_bytes", 100_000), f"{path}.max_text_bytes", 1, 10_000_000
        ),
        fields=fields,
        interactions=tuple(tuple(t) for t in inter),
    )
