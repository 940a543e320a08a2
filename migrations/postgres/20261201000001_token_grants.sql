-- As in migrations/sqlite/20261201000001_token_grants.sql: the namespaces a token minted by
-- trusted publishing may write (JSON array) and the CI identity it came from (JSON object);
-- NULL for unrestricted tokens.
ALTER TABLE tokens ADD COLUMN namespaces TEXT;
ALTER TABLE tokens ADD COLUMN issuer TEXT;
