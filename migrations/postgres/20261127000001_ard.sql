-- As in migrations/sqlite/20261127000001_ard.sql: representative queries (JSON array of
-- strings) on the record and each version, and the discovery identifier (`urn:air:…`),
-- fixed at publish, unique ignoring case, given to older rows by the registry at start-up.
ALTER TABLE agents ADD COLUMN representative_queries TEXT;
ALTER TABLE agent_versions ADD COLUMN representative_queries TEXT;
ALTER TABLE agents ADD COLUMN urn TEXT COLLATE "C";
CREATE UNIQUE INDEX agents_urn ON agents (lower(urn));
