-- Where a mirrored agent came from (JSON: source, source_url, upstream_id, fetched_at, status);
-- NULL for agents published here.
ALTER TABLE agents ADD COLUMN provenance TEXT;

-- One row per mirror source: how far it has read its upstream (`position`, the source's own
-- JSON: a cursor, an `updated_since`, ETags), written in the transaction that writes the page's
-- agents, and who syncs it now (a lease, so one process of several syncs a source at a time).
CREATE TABLE mirror_sources (
    id           TEXT PRIMARY KEY NOT NULL,
    kind         TEXT NOT NULL,
    url          TEXT NOT NULL,
    position     TEXT,
    -- The first full walk has ended: later passes are incremental.
    walked       INTEGER NOT NULL DEFAULT 0,
    skipped      INTEGER NOT NULL DEFAULT 0,
    collisions   INTEGER NOT NULL DEFAULT 0,
    last_success INTEGER,
    last_attempt INTEGER,
    last_error   TEXT,
    failures     INTEGER NOT NULL DEFAULT 0,
    next_at      INTEGER NOT NULL DEFAULT 0,
    lease_owner  TEXT,
    lease_until  INTEGER
);
