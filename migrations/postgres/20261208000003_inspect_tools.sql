-- Whether the prober may list an agent's tools (an MCP server's tools/list, an A2A card's
-- skills) to scan them and notice changes: the publisher can opt out.
ALTER TABLE agents ADD COLUMN inspect_tools BOOLEAN NOT NULL DEFAULT TRUE;
