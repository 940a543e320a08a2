-- Who reads a change that is not public: the owner whose private agent it concerns (its
-- viewers: the owner, the namespace's people, the organisation's members, the master key).
-- NULL for public changes and for those nobody reads in the feed.
ALTER TABLE agent_changes ADD COLUMN audience TEXT;
