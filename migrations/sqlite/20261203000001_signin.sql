-- Sign-in for people (the web console's OpenID Connect and GitHub sign-in, the CLI's device
-- flow).
--
-- `signin_states`: a sign-in under way, between the redirect to the provider and its callback.
-- Keyed by the SHA-256 of the random value in the browser's sign-in cookie; `data` is a JSON
-- object (provider, state, nonce, PKCE verifier, where to return). Taken once, then gone.
CREATE TABLE signin_states (
    key_hash TEXT PRIMARY KEY,
    data TEXT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX signin_states_expiry ON signin_states (expires_at);

-- `web_sessions`: a signed-in browser. Found by the SHA-256 of its cookie's secret; `data` is a
-- JSON object (the person's owner name, identity, granted namespaces, CSRF token, expiry).
CREATE TABLE web_sessions (
    id TEXT PRIMARY KEY,
    secret_hash TEXT NOT NULL UNIQUE,
    owner TEXT NOT NULL,
    data TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX web_sessions_owner ON web_sessions (owner);
CREATE INDEX web_sessions_expiry ON web_sessions (expires_at);

-- `people`: who a signed-in person is (the provider's issuer and subject, or GitHub and the
-- account's numeric id) and the owner name they act as, fixed at their first sign-in: a later
-- account with a reused login never inherits it.
CREATE TABLE people (
    issuer TEXT NOT NULL,
    subject TEXT NOT NULL,
    owner TEXT NOT NULL UNIQUE,
    created_at BIGINT NOT NULL,
    last_seen_at BIGINT NOT NULL,
    PRIMARY KEY (issuer, subject)
);

-- A token a signed-in person mints carries the namespaces their identity grants without being
-- restricted to them (FALSE); a token minted by trusted publishing writes only there (TRUE).
ALTER TABLE tokens ADD COLUMN restricted BOOLEAN NOT NULL DEFAULT TRUE;
