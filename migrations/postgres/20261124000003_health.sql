-- What the prober last found about an agent's endpoint (JSON: status, times, latency, uptime).
-- Derived by the registry, never written by the owner; writing it does not change `revision`.
ALTER TABLE agents ADD COLUMN health TEXT;
-- The owner's opt-in message for a real `SendMessage` probe.
ALTER TABLE agents ADD COLUMN probe_message TEXT;

-- The probe schedule: one row per agent the prober checks. A process claims a due row by
-- setting its lease, so processes sharing one database probe each agent once per round.
CREATE TABLE agent_probes (
    agent_id    TEXT COLLATE "C" PRIMARY KEY,
    next_at     BIGINT NOT NULL,
    lease_owner TEXT,
    lease_until BIGINT
);
CREATE INDEX agent_probes_due ON agent_probes (next_at);

-- Probe outcomes per agent and UTC day, for uptime over 7 and 30 days; older days are pruned.
CREATE TABLE agent_probe_days (
    agent_id TEXT COLLATE "C" NOT NULL,
    day      BIGINT NOT NULL,
    probes   BIGINT NOT NULL,
    ok       BIGINT NOT NULL,
    PRIMARY KEY (agent_id, day)
);
