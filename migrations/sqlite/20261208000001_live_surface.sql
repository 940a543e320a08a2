-- What the prober last read from each agent's endpoint (an MCP server's tools, an A2A card's
-- skills): `agents.surface` holds the summary shown on the record (hash, count, findings, the
-- last change), written only by the prober like `health`; `agent_surfaces` keeps the last
-- snapshot itself, read only to tell what changed at the next probe.
ALTER TABLE agents ADD COLUMN surface TEXT;
CREATE TABLE agent_surfaces (
    agent_id TEXT PRIMARY KEY,
    hash TEXT NOT NULL,
    snapshot TEXT NOT NULL
);
