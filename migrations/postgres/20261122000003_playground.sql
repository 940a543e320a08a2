-- Playground sessions (CONTRACT §6), as in migrations/sqlite/20261122000003_playground.sql:
-- owned by a token owner, expiring when idle; `expires_at` is pushed forward on every use.
CREATE TABLE playground_sessions (
    id             TEXT COLLATE "C" PRIMARY KEY,
    owner          TEXT COLLATE "C" NOT NULL,
    name           TEXT,
    created_at     BIGINT NOT NULL,
    last_active_at BIGINT NOT NULL,
    expires_at     BIGINT NOT NULL
);
CREATE INDEX playground_sessions_expires_at ON playground_sessions (expires_at);

-- The ordered history of a session: discover and execute steps, their details as JSON text.
CREATE TABLE playground_steps (
    session_id  TEXT COLLATE "C" NOT NULL REFERENCES playground_sessions (id) ON DELETE CASCADE,
    seq         BIGINT NOT NULL,
    kind        TEXT NOT NULL CHECK (kind IN ('discover', 'execute')),
    at          BIGINT NOT NULL,
    duration_ms BIGINT NOT NULL,
    data        TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
);
