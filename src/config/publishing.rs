//! Trusted publishing: the CI identity providers whose ID tokens may be exchanged for
//! short-lived registry tokens (`POST /api/auth/oidc`, docs/publishing.md).

use clap::Args;

use crate::domain::trusted_issuer::TrustedIssuer;

/// Which OIDC issuers are trusted, and whether publishing needs an owned namespace.
#[derive(Args, Clone, Debug, Default)]
pub struct PublishingConfig {
    /// An OIDC issuer whose ID tokens are exchanged for registry tokens, as `KIND=ISSUER_URL`:
    /// `github=https://token.actions.githubusercontent.com` (GitHub Actions), `gitlab=https://gitlab.com`
    /// (GitLab CI), or `generic=URL` (its tokens' `registry_namespace` claim). Repeatable, or
    /// comma-separated in the environment variable.
    #[arg(long = "trusted-issuer", env = "REGISTRY_TRUSTED_ISSUERS", value_delimiter = ',',
          value_parser = TrustedIssuer::parse)]
    pub trusted_issuers: Vec<TrustedIssuer>,

    /// `open`: any owner publishes any package name not taken. `owned`: publishing, importing
    /// or updating a package needs a namespace its owner holds (proven by DNS or a well-known
    /// file through `POST /api/namespaces`, granted by a CI identity, or assigned by the
    /// master key).
    #[arg(long, env = "REGISTRY_NAMESPACE_POLICY", value_enum, default_value_t = NamespacePolicy::Open)]
    pub namespace_policy: NamespacePolicy,

    /// `flag`: the scanner's findings are shown on the record. `block`: a publish, update or
    /// import whose findings reach `high` is refused (422 `security_finding`).
    #[arg(long, env = "REGISTRY_SCAN_POLICY", value_enum, default_value_t = ScanPolicy::Flag)]
    pub scan_policy: ScanPolicy,
}

/// What the scanner's findings do to a write.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ScanPolicy {
    /// Show them on the record.
    #[default]
    Flag,
    /// Refuse writes whose findings reach `high`.
    Block,
}

/// Whether publishing needs an owned namespace.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum NamespacePolicy {
    /// Any owner publishes any package name not taken (a single-user or trusted registry).
    #[default]
    Open,
    /// Publishing needs a namespace the owner holds.
    Owned,
}

impl NamespacePolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::Owned => "owned",
        }
    }
}
