-- Whether a change concerns a publicly visible agent (ACTIVE before or after it): the public
-- change feed (`GET /public/changes`) serves only these. Older rows are backfilled from their
-- kind alone: publish and unpublish are public by definition; for the rest it is unknown, so
-- they stay private rather than risk announcing a staged agent.
ALTER TABLE agent_changes ADD COLUMN public INTEGER NOT NULL DEFAULT 0;
UPDATE agent_changes SET public = 1 WHERE kind IN ('published', 'unpublished');
CREATE INDEX agent_changes_public ON agent_changes (public, seq);
