-- Every version of an agent's record, as in migrations/sqlite/20261124000004_versions.sql: its
-- writable fields as they were when that version was written (the same columns and JSON text as
-- `agents`). One row per version string; `revision` is the agent's revision when the row was
-- written and orders the history. Rows go with their agent when it is deleted.
CREATE TABLE agent_versions (
    agent_id       TEXT COLLATE "C" NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    version        TEXT COLLATE "C" NOT NULL,
    revision       BIGINT NOT NULL,
    published_at   BIGINT NOT NULL,
    name           TEXT NOT NULL,
    description    TEXT NOT NULL,
    manifest_url   TEXT,
    url            TEXT,
    target         TEXT,
    category       TEXT,
    tags           TEXT NOT NULL,
    capabilities   TEXT NOT NULL,
    payment        TEXT,
    card           TEXT,
    card_signature TEXT,
    reach          TEXT,
    PRIMARY KEY (agent_id, version)
);

-- Agents that exist already: their current record is their only version (1.0.0 when they
-- named none), written at their last write.
INSERT INTO agent_versions (agent_id, version, revision, published_at, name, description,
    manifest_url, url, target, category, tags, capabilities, payment, card, card_signature, reach)
SELECT id, COALESCE(version, '1.0.0'), revision, updated_at, name, description, manifest_url,
    url, target, category, tags, capabilities, payment, card, card_signature, reach
FROM agents;

-- The agent's version after each change (before it, for a delete). Changes logged before
-- this column existed have none.
ALTER TABLE agent_changes ADD COLUMN version TEXT;
