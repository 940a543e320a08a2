-- Namespaces owners claim before publishing in them (`--namespace-policy owned`). A claim holds
-- the token its owner puts in a DNS TXT record or a well-known file of the namespace's domain;
-- `verified_at` and `proof` are set once that proof was found (or the master key assigned it).
-- At most one owner holds a namespace verified.
CREATE TABLE namespaces (
    namespace TEXT NOT NULL,
    owner TEXT NOT NULL,
    token TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    verified_at BIGINT,
    proof TEXT,
    PRIMARY KEY (namespace, owner)
);
CREATE UNIQUE INDEX namespaces_verified ON namespaces (namespace) WHERE verified_at IS NOT NULL;
CREATE INDEX namespaces_owner ON namespaces (owner);
