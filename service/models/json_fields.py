"""Strict JSON parsing of request bodies and the checks of their fields, naming the
field at fault (``examples[3].x``) in the :class:`~service.errors.ServiceError`.

Bodies are parsed with orjson, which refuses ``NaN`` and ``Infinity`` tokens (not
JSON): those become 422 "body is not valid JSON". A number that overflows a double
(``1e400``) parses to ``inf`` and is refused later by the feature encoder with the
example and field named. Bodies are UTF-8 only: no byte-order mark and no
UTF-16/32 detection (naming ``body``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import orjson

from service.errors import invalid, too_large

_BOM = b"\xef\xbb\xbf"


def check_utf8_start(body: bytes) -> None:
    """Refuse a byte-order mark or a UTF-16/32 body up front (a NUL among the first
    bytes: JSON text starts with ASCII), before any parser guesses an encoding."""
    if body.startswith(_BOM):
        raise invalid("body: must be UTF-8 JSON without a byte-order mark (BOM)", "body")
    if b"\x00" in body[:4]:
        raise invalid("body: must be UTF-8 JSON (it looks like UTF-16 or UTF-32)", "body")


def parse_json_object(body: bytes) -> dict[str, Any]:
    if not body:
        raise invalid("body is empty; expected a JSON object")
    check_utf8_start(body)
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError as e:
        obj = _lenient_loads(body)
        if obj is None:
            raise invalid(f"body is not valid JSON ({e.msg} at position {e.pos})") from None
    if not isinstance(obj, dict):
        raise invalid(f"body must be a JSON object, got {_type_name(obj)}")
    return obj


def _lenient_loads(body: bytes) -> Any:
    """Python's parser, which reads the NaN/Infinity tokens that ``json.dumps``
    writes and turns 1e400 into inf. Used only after orjson refused the body, so
    the validation that follows can name the example and field holding the
    non-finite value (``examples[3].x["17"]: value is NaN``) instead of a bare
    parse error. Every value still goes through the finiteness checks."""
    try:
        # Decoded here as strict UTF-8: json.loads(bytes) would guess UTF-16/32.
        obj = json.loads(body.decode("utf-8"))
        # Python's parser also takes what orjson refuses for good reasons (lone
        # surrogates, integers beyond 64 bits); those must stay a parse error.
        orjson.dumps(obj)
    except (ValueError, TypeError, UnicodeDecodeError, RecursionError, orjson.JSONEncodeError):
        return None
    return obj


def _type_name(v: Any) -> str:
    return {
        dict: "object",
        list: "array",
        str: "string",
        int: "integer",
        float: "number",
        bool: "boolean",
        type(None): "null",
    }.get(type(v), type(v).__name__)


def require_str(body: Mapping[str, Any], key: str) -> str:
    v = body.get(key)
    if v is None:
        raise invalid(f"{key}: field required", key)
    if not isinstance(v, str):
        raise invalid(f"{key}: must be a string, got {_type_name(v)}", key)
    return v


def require_list(body: Mapping[str, Any], key: str, max_items: int) -> list[Any]:
    v = body.get(key)
    if v is None:
        raise invalid(f"{key}: field required", key)
    if not isinstance(v, list):
        raise invalid(f"{key}: must be an array, got {_type_name(v)}", key)
    if not v:
        raise invalid(f"{key}: must not be empty", key)
    if len(v) > max_items:
        raise too_large(f"{key}: {len(v)} items exceed the limit of {max_items} per request", key)
    return v


def json_int(v: Any) -> Any:
    """``v`` as an int when it is a JSON number with an integer value (``3.0``: JSON
    and JSON Schema do not tell 3.0 from 3), else ``v`` unchanged."""
    if isinstance(v, float) and v.is_integer() and abs(v) < 2**63:
        return int(v)
    return v


def optional_int(body: Mapping[str, Any], key: str, minimum: int = 0) -> int | None:
    v = json_int(body.get(key))
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise invalid(f"{key}: must be an integer >= {minimum}, got {v!r}", key)
    return v


def items_field(items: list[Any], where: str, key: str) -> list[Any]:
    """``[item[key] for item in items]``, each item an object having ``key`` and no other
    field (a field the service would silently ignore is a client's mistake)."""
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise invalid(
                f"{where}[{i}]: must be an object, got {_type_name(item)}", f"{where}[{i}]"
            )
        try:
            out.append(item[key])
        except KeyError:
            raise invalid(f"{where}[{i}].{key}: field required", f"{where}[{i}].{key}") from None
        if len(item) != 1:
            extra = next(k for k in item if k != key)
            loc = f"{where}[{i}].{extra}"
            raise invalid(f"{loc}: unknown field (an item has only {key!r})", loc)
    return out


type_name = _type_name


# An event's or a prediction's id (delayed labels, decisions): 1 to 200 characters.
MAX_ID_CHARS = 200


def check_id(value: Any, loc: str) -> str:
    """``value`` if it is a string of 1 to ``MAX_ID_CHARS`` characters, else a 422 naming
    ``loc``."""
    if type(value) is not str:
        raise invalid(f"{loc}: must be a string, got {type_name(value)}", loc)
    if not 1 <= len(value) <= MAX_ID_CHARS:
        raise invalid(f"{loc}: must be 1 to {MAX_ID_CHARS} characters, got {len(value)}", loc)
    return value
