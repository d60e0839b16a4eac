"""The SQLite store's tables, and the upgrade of files written by older learnserves.

``migrate`` runs in the write transaction of every ``SQLiteStore.open``: it creates
the tables that are missing and adds the columns later versions introduced, then
records ``SCHEMA_VERSION`` in the file (a newer file is refused before this runs).
"""

from __future__ import annotations

import sqlite3

# 2: checkpoints in chunks (an older learnserve would read a chunked one as empty)
SCHEMA_VERSION = 2

# Blob columns come last: SQLite then reads the other columns without walking the
# blob's overflow pages (list_artifacts, last_position stay cheap with big blobs).
_SCHEMA = """
CREATE TABLE IF NOT EXISTS models (
    name TEXT PRIMARY KEY,
    config TEXT NOT NULL,
    last_pos INTEGER NOT NULL DEFAULT 0,   -- survives trim_log
    art_last INTEGER NOT NULL DEFAULT 0,
    active_version INTEGER,
    created_at REAL NOT NULL,
    generation TEXT NOT NULL DEFAULT '',   -- new random id at every create
    head TEXT NOT NULL DEFAULT ''          -- the log's chain head at last_pos
);
CREATE TABLE IF NOT EXISTS log (
    name TEXT NOT NULL,
    position INTEGER NOT NULL,
    head TEXT NOT NULL DEFAULT '',         -- chain head after this entry
    payload BLOB NOT NULL,
    PRIMARY KEY (name, position)
);
-- token: the checkpoint's chunks in checkpoint_chunks (NULL: written whole in blob,
-- by schema 1), switched to in one transaction once all of them are written.
CREATE TABLE IF NOT EXISTS checkpoints (
    name TEXT PRIMARY KEY,
    position INTEGER NOT NULL,
    created_at REAL NOT NULL,
    token TEXT,
    chunks INTEGER,
    blob BLOB NOT NULL
);
-- position: that of the write the chunk belongs to (chunks of abandoned writes of an
-- older position are swept by the next switch).
CREATE TABLE IF NOT EXISTS checkpoint_chunks (
    name TEXT NOT NULL,
    token TEXT NOT NULL,
    idx INTEGER NOT NULL,
    position INTEGER NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (name, token, idx)
);
CREATE TABLE IF NOT EXISTS artifacts (
    name TEXT NOT NULL,
    version INTEGER NOT NULL,
    kind TEXT NOT NULL,
    checksum TEXT NOT NULL,
    size INTEGER NOT NULL,
    created_at REAL NOT NULL,
    blob BLOB NOT NULL,
    PRIMARY KEY (name, version)
);
-- Idempotency keys (append_once): the position an (model, key) was appended at.
-- generation: a row of a model deleted by a learnserve that did not know this table
-- never answers for the model created again under the same name.
CREATE TABLE IF NOT EXISTS idempotency (
    name TEXT NOT NULL,
    key TEXT NOT NULL,
    position INTEGER NOT NULL,
    n INTEGER NOT NULL,
    payload_hash TEXT NOT NULL,
    generation TEXT NOT NULL,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    outcome TEXT,                          -- record_outcome: the entry could not be applied
    PRIMARY KEY (name, key)
);
CREATE INDEX IF NOT EXISTS idempotency_expiry ON idempotency (expires_at);
-- Leases (try_lease): who may do a model's ``purpose`` (e.g. write its checkpoints).
CREATE TABLE IF NOT EXISTS leases (
    name TEXT NOT NULL,
    purpose TEXT NOT NULL,
    holder TEXT NOT NULL,
    expires_at REAL NOT NULL,
    PRIMARY KEY (name, purpose)
);
CREATE INDEX IF NOT EXISTS idempotency_position ON idempotency (name, position);
-- Delayed labels (service.store.sqlite_feedback): the record of a prediction served with
-- an id until the id is labelled, then the label's mark and the position that learned it.
CREATE TABLE IF NOT EXISTS feedback (
    name TEXT NOT NULL,
    id TEXT NOT NULL,
    generation TEXT NOT NULL,
    expires_at REAL NOT NULL,
    position INTEGER NOT NULL DEFAULT 0,
    mark TEXT,
    record BLOB,
    PRIMARY KEY (name, id)
);
CREATE INDEX IF NOT EXISTS feedback_expiry ON feedback (expires_at);
-- A leader's followers (service.store.sqlite_followers), found without reading every config.
CREATE INDEX IF NOT EXISTS models_leader ON models (json_extract(config, '$.follows.model'));
-- Promotions (append_serving): the follower a leader's last promotion made answer for it.
CREATE TABLE IF NOT EXISTS serving (name TEXT PRIMARY KEY, follower TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT OR IGNORE INTO meta (key, value) VALUES ('epoch', 0);
"""


def migrate(db: sqlite3.Connection) -> None:
    """Inside a write transaction: the tables, columns and indexes of this schema."""
    for stmt in _SCHEMA.split(";"):
        if stmt.strip():
            db.execute(stmt)
    cols = {row[1] for row in db.execute("PRAGMA table_info(models)")}
    if "generation" not in cols:  # a file written before generations existed
        db.execute("ALTER TABLE models ADD COLUMN generation TEXT NOT NULL DEFAULT ''")
    if "head" not in cols:  # ... or before log chains existed
        db.execute("ALTER TABLE models ADD COLUMN head TEXT NOT NULL DEFAULT ''")
    if "head" not in {row[1] for row in db.execute("PRAGMA table_info(log)")}:
        db.execute("ALTER TABLE log ADD COLUMN head TEXT NOT NULL DEFAULT ''")
    ccols = {row[1] for row in db.execute("PRAGMA table_info(checkpoints)")}
    if "token" not in ccols:  # schema 1: every checkpoint one blob
        db.execute("ALTER TABLE checkpoints ADD COLUMN token TEXT")
        db.execute("ALTER TABLE checkpoints ADD COLUMN chunks INTEGER")
    icols = {row[1] for row in db.execute("PRAGMA table_info(idempotency)")}
    if "outcome" not in icols:  # a file written before outcomes were recorded
        db.execute("ALTER TABLE idempotency ADD COLUMN outcome TEXT")
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
