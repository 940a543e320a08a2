-- A registry organisation linked to the GitHub organisation of the same people: whoever signs in
-- with GitHub as a member of `github_org` is a member of `org` with `role`, for as long as their
-- sign-in says so. At most one registry organisation per GitHub organisation.
CREATE TABLE org_github (
    org TEXT PRIMARY KEY,
    github_org TEXT NOT NULL UNIQUE,
    role TEXT NOT NULL,
    linked_at BIGINT NOT NULL
);
