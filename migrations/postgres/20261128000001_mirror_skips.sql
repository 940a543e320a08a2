-- As in migrations/sqlite/20261128000001_mirror_skips.sql: the latest entries each mirror source
-- left out, and why.
ALTER TABLE mirror_sources ADD COLUMN recent_skips TEXT;
