-- The scanner's verdict on each agent's current texts, written in the transaction that writes
-- them: the worst severity it found and the scanner (name and version) that found it. The
-- search index reads it at start-up instead of scanning every agent again; a row of another
-- scanner version is scanned again and replaced.
CREATE TABLE agent_scans (
    agent_id TEXT PRIMARY KEY,
    max_severity TEXT NOT NULL,
    scanner TEXT NOT NULL
);
