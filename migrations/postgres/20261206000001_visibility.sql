-- Who finds an agent in lists: `public` (every list, search, feed and catalogue) or `unlisted`
-- (resolvable by id, package name or identifier, listed nowhere).
ALTER TABLE agents ADD COLUMN visibility TEXT NOT NULL DEFAULT 'public';
