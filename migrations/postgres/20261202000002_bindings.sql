-- Publishing bindings: a package name or namespace (`scope`) bound to the CI identity allowed to
-- publish it by trusted publishing: the issuer kind, the repository, and on GitHub optionally
-- the workflow file ('' for any). Made by `owner`; once one covers a package, tokens minted
-- from other identities may not write it.
CREATE TABLE bindings (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    scope TEXT NOT NULL,
    kind TEXT NOT NULL,
    repository TEXT NOT NULL,
    workflow TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE UNIQUE INDEX bindings_rule ON bindings (scope, kind, repository, workflow);
CREATE INDEX bindings_owner ON bindings (owner);
