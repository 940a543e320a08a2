-- Embedding vectors of agents, keyed by embedder so a model change never serves stale vectors;
-- content_hash tells whether the agent's text changed since the vector was made.
CREATE TABLE agent_embeddings (
    agent_id     TEXT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    embedder_id  TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    vector       BLOB NOT NULL,
    PRIMARY KEY (agent_id, embedder_id)
);
