-- As in migrations/sqlite/20261127000002_mirrors.sql: a mirrored agent's provenance, and each
-- mirror source's position (written with the agents of each page), counters and lease.
ALTER TABLE agents ADD COLUMN provenance TEXT;

CREATE TABLE mirror_sources (
    id           TEXT COLLATE "C" PRIMARY KEY,
    kind         TEXT NOT NULL,
    url          TEXT NOT NULL,
    position     TEXT,
    walked       BOOLEAN NOT NULL DEFAULT FALSE,
    skipped      BIGINT NOT NULL DEFAULT 0,
    collisions   BIGINT NOT NULL DEFAULT 0,
    last_success BIGINT,
    last_attempt BIGINT,
    last_error   TEXT,
    failures     BIGINT NOT NULL DEFAULT 0,
    next_at      BIGINT NOT NULL DEFAULT 0,
    lease_owner  TEXT,
    lease_until  BIGINT
);
