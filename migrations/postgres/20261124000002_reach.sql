-- How to reach an agent (JSON: A2A interfaces, MCP remotes and packages, repository).
ALTER TABLE agents ADD COLUMN reach TEXT;
