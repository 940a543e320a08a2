-- The latest entries each mirror source left out, and why (JSON, newest first: upstream_id,
-- class, reason, at), written with the page that left them out; NULL until one is.
ALTER TABLE mirror_sources ADD COLUMN recent_skips TEXT;
