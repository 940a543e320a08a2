-- Requests a user might make that the agent serves (JSON array of strings; NULL: none),
-- kept per version like the other writable fields.
ALTER TABLE agents ADD COLUMN representative_queries TEXT;
ALTER TABLE agent_versions ADD COLUMN representative_queries TEXT;

-- The agent's discovery identifier (`urn:air:…`), fixed when it is published and unique
-- ignoring case. Rows written before the column existed are given theirs by the registry at
-- start-up.
ALTER TABLE agents ADD COLUMN urn TEXT;
CREATE UNIQUE INDEX agents_urn ON agents (lower(urn));
