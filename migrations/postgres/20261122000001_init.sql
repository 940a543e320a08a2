-- The PostgreSQL schema mirrors migrations/sqlite: the same columns and meanings, so both
-- backends share one row mapping (src/store/row.rs). Times are microseconds since the epoch;
-- list-valued fields are JSON text. Keys compare bytewise (COLLATE "C") so ids page in the same
-- order as on SQLite whatever the database's locale.

CREATE TABLE agents (
    id                 TEXT COLLATE "C" PRIMARY KEY,
    package_name       TEXT COLLATE "C" NOT NULL UNIQUE,
    owner              TEXT COLLATE "C" NOT NULL,
    state              TEXT NOT NULL CHECK (state IN ('STAGE', 'ACTIVE')),
    verification_level TEXT NOT NULL,
    verification_token TEXT NOT NULL,
    revision           BIGINT NOT NULL,
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
    created_at         BIGINT NOT NULL,
    updated_at         BIGINT NOT NULL,
    published_at       BIGINT
);
CREATE INDEX agents_owner_id ON agents (owner, id);
CREATE INDEX agents_state ON agents (state);

-- The change log: a monotonic sequence of agent writes (search index sync across processes, the
-- public change feed). Writers take an advisory lock before inserting here, so sequence numbers
-- become visible in order: a follower that has read seq N never later finds a new change < N.
CREATE TABLE agent_changes (
    seq          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    agent_id     TEXT NOT NULL,
    package_name TEXT NOT NULL,
    kind         TEXT NOT NULL,
    at           BIGINT NOT NULL,
    -- The agent was ACTIVE before or after this change: the public feed serves only these.
    public       BOOLEAN NOT NULL
);
CREATE INDEX agent_changes_public ON agent_changes (seq) WHERE public;

-- API tokens: the secret is never stored, only its SHA-256.
CREATE TABLE tokens (
    id          TEXT COLLATE "C" PRIMARY KEY,
    owner       TEXT COLLATE "C" NOT NULL,
    scopes      TEXT NOT NULL,
    secret_hash TEXT NOT NULL UNIQUE,
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT,
    revoked_at  BIGINT
);
CREATE INDEX tokens_owner ON tokens (owner);

-- Embedding vectors by embedder (little-endian f32s); content_hash tells whether the agent's
-- text changed since the vector was made.
CREATE TABLE agent_embeddings (
    agent_id     TEXT COLLATE "C" NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    embedder_id  TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    vector       BYTEA NOT NULL,
    PRIMARY KEY (agent_id, embedder_id)
);
