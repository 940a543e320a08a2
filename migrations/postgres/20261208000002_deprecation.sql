-- A publisher's deprecation of an agent or of one of its versions: JSON `{message, successor,
-- deprecated_at}`, NULL when not deprecated.
ALTER TABLE agents ADD COLUMN deprecation TEXT;
ALTER TABLE agent_versions ADD COLUMN deprecation TEXT;
