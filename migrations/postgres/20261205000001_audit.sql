-- The audit log: every write through the API (and every refused one), who made it (owner,
-- token or session, client address), what it did to which target, and its outcome. A write of
-- an agent records its row in the same transaction as the write itself.
CREATE TABLE audit_log (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at BIGINT NOT NULL,
    actor TEXT NOT NULL,
    actor_kind TEXT NOT NULL,
    token_id TEXT,
    session_id TEXT,
    client TEXT,
    action TEXT NOT NULL,
    target TEXT,
    agent_id TEXT,
    package_name TEXT,
    owner TEXT,
    version TEXT,
    outcome TEXT NOT NULL,
    reason TEXT
);
CREATE INDEX audit_log_at ON audit_log (at);
CREATE INDEX audit_log_agent ON audit_log (agent_id, seq);
CREATE INDEX audit_log_owner ON audit_log (owner, seq);
CREATE INDEX audit_log_actor ON audit_log (actor, seq);
