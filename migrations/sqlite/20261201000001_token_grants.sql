-- Tokens minted by trusted publishing (POST /api/auth/oidc) write only in the namespaces their
-- CI identity grants: `namespaces` is a JSON array of them, `issuer` a JSON object naming the
-- identity (kind, repository, owner and its id). NULL in both: a token made by the master key
-- or the CLI, not restricted.
ALTER TABLE tokens ADD COLUMN namespaces TEXT;
ALTER TABLE tokens ADD COLUMN issuer TEXT;
