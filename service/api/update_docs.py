"""The texts of the ``/update`` operation in the OpenAPI document: its description,
the ``Idempotency-Key`` parameter and the ``Idempotent-Replayed`` answer header."""

from __future__ import annotations

from typing import Any

UPDATE_DESCRIPTION = """\
Validates and encodes the batch, appends it to the model's log (durable in the
store), applies it on this worker and answers with the model's new version.

**Group commit**: plain batches (no `Idempotency-Key`, no delayed labels) that reach the
same model while its previous append is in flight are appended together as one log
entry, after it: one store round trip for all of them, each batch still validated and
refused on its own, learned once in arrival order, answered only once durable and
applied, with its own `applied` and `correct` and the version of the shared entry.

**Retries without double-learning**: send an `Idempotency-Key` header (1-200
printable ASCII characters, e.g. a UUID per batch). The first request with a key
appends as usual; a repeat with the same key for the same model within
`idempotency_ttl_seconds` (default 24 h) appends nothing and answers the first
request's `{"model", "applied", "version"}` (once this worker has applied that
version) with the header `Idempotent-Replayed: true`. The same key with a
different body is 409 `idempotency_key_reused`. Deleting a model forgets its keys.

**Delayed labels**: an example `{"id", "y"}` (no `x`) labels the prediction made
with that `id` on `/predict` (any worker): the features kept with it are learned
with `y`, and its progressive metrics score the prediction that was served. An id
is learned once: the same label again changes nothing and is answered as before,
another label is 409 `id_labelled`; an unknown id, or one older than
`feedback_ttl_seconds` (default 7 days), is 422; both name `examples[i].id`, and a
refused batch changes nothing. Examples with and without `x` mix in one batch; an
`Idempotency-Key` makes such a batch learned at most once as a whole (its `x`
examples too), as for any batch.

`applied` and `correct` in the answer count what the batch learned: examples
predicted right (progressive for `{x, y}`, the served prediction for `{id, y}`); an
id labelled before is not learned again and not counted (a batch of nothing but such
repeats is answered as the first time).
"""

IDEMPOTENCY_KEY_PARAM: dict[str, Any] = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "description": "Makes the update happen at most once per key and model (a retry "
    "answers the first result). 1-200 printable ASCII characters; else 422.",
    "schema": {"type": "string", "minLength": 1, "maxLength": 200, "pattern": "^[ -~]+$"},
    "example": "3f2b9c1e-7d4a-4f7e-9a51-0c2d8e6b1a77",
}

IDEMPOTENT_REPLAYED_HEADER: dict[str, Any] = {
    "Idempotent-Replayed": {
        "description": "`true` when the answer is that of an earlier request with the "
        "same Idempotency-Key (nothing was appended this time); absent otherwise.",
        "schema": {"type": "string", "enum": ["true"]},
    }
}
