-- Organisations: a team that owns agents together (as the owner `org:<name>`), with a role
-- per member (admin, publisher, viewer). An organisation always keeps at least one admin.
CREATE TABLE orgs (
    name TEXT PRIMARY KEY,
    display_name TEXT,
    created_by TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE TABLE org_members (
    org TEXT NOT NULL,
    owner TEXT NOT NULL,
    role TEXT NOT NULL,
    added_at BIGINT NOT NULL,
    PRIMARY KEY (org, owner)
);
CREATE INDEX org_members_owner ON org_members (owner);

-- Transfers of an agent to another owner (a person's owner name, or `org:<name>`): pending
-- until the receiver accepts or either side declines; `forced` when the master key moved it
-- at once. At most one is pending per agent.
CREATE TABLE transfers (
    id TEXT PRIMARY KEY,
    agent_id TEXT NOT NULL,
    package_name TEXT NOT NULL,
    from_owner TEXT NOT NULL,
    to_owner TEXT NOT NULL,
    requested_by TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    resolved_at BIGINT
);
CREATE UNIQUE INDEX transfers_pending ON transfers (agent_id) WHERE status = 'pending';
CREATE INDEX transfers_to ON transfers (to_owner, status);
CREATE INDEX transfers_from ON transfers (from_owner, status);
