//! Trusted publishing: the CI identity providers whose ID tokens may be exchanged for
//! short-lived registry tokens (`POST /api/auth/oidc`, docs/publishing.md).

use clap::Args;

use crate::domain::trusted_issuer::TrustedIssuer;

/// Which OIDC issuers are trusted.
#[derive(Args, Clone, Debug, Default)]
pub struct PublishingConfig {
    /// An OIDC issuer whose ID tokens are exchanged for registry tokens, as `KIND=ISSUER_URL`:
    /// `github=https://token.actions.githubusercontent.com` (GitHub Actions), `gitlab=https://gitlab.com`
    /// (GitLab CI), or `generic=URL` (its tokens' `registry_namespace` claim). Repeatable, or
    /// comma-separated in the environment variable.
    #[arg(long = "trusted-issuer", env = "REGISTRY_TRUSTED_ISSUERS", value_delimiter = ',',
          value_parser = TrustedIssuer::parse)]
    pub trusted_issuers: Vec<TrustedIssuer>,
}
