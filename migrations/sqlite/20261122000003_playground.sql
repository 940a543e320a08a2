-- Playground sessions (CONTRACT §6): owned by a token owner, expiring when idle. `expires_at` is
-- pushed forward on every use; expired sessions are treated as gone and purged.
CREATE TABLE playground_sessions (
    id             TEXT PRIMARY KEY NOT NULL,
    owner          TEXT NOT NULL,
    name           TEXT,
    created_at     INTEGER NOT NULL,
    last_active_at INTEGER NOT NULL,
    expires_at     INTEGER NOT NULL
);
CREATE INDEX playground_sessions_expires_at ON playground_sessions (expires_at);

-- The ordered history of a session: discover and execute steps, their details as JSON text.
CREATE TABLE playground_steps (
    session_id  TEXT NOT NULL REFERENCES playground_sessions (id) ON DELETE CASCADE,
    seq         INTEGER NOT NULL,
    kind        TEXT NOT NULL CHECK (kind IN ('discover', 'execute')),
    at          INTEGER NOT NULL,
    duration_ms INTEGER NOT NULL,
    data        TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
);
