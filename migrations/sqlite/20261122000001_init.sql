-- Agents: one row per registry entry; list-valued fields are JSON text.
CREATE TABLE agents (
    id                 TEXT PRIMARY KEY NOT NULL,
    package_name       TEXT NOT NULL UNIQUE,
    owner              TEXT NOT NULL,
    state              TEXT NOT NULL CHECK (state IN ('STAGE', 'ACTIVE')),
    verification_level TEXT NOT NULL,
    verification_token TEXT NOT NULL,
    revision           INTEGER NOT NULL,
    name               TEXT NOT NULL,
    description        TEXT NOT NULL,
    version            TEXT,
    manifest_url       TEXT,
    url                TEXT,
    target             TEXT,
    category           TEXT,
    tags               TEXT NOT NULL,
    capabilities       TEXT NOT NULL,
    payment            TEXT,
    card               TEXT,
    created_at         INTEGER NOT NULL,
    updated_at         INTEGER NOT NULL,
    published_at       INTEGER
);
CREATE INDEX agents_owner_id ON agents (owner, id);
CREATE INDEX agents_state ON agents (state);

-- The change log: a monotonic sequence of agent writes (search index sync, public change feed).
CREATE TABLE agent_changes (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    agent_id     TEXT NOT NULL,
    package_name TEXT NOT NULL,
    kind         TEXT NOT NULL,
    at           INTEGER NOT NULL
);

-- API tokens: the secret is never stored, only its SHA-256.
CREATE TABLE tokens (
    id          TEXT PRIMARY KEY NOT NULL,
    owner       TEXT NOT NULL,
    scopes      TEXT NOT NULL,
    secret_hash TEXT NOT NULL UNIQUE,
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER,
    revoked_at  INTEGER
);
CREATE INDEX tokens_owner ON tokens (owner);
