//! Sign-in for people: the OpenID Connect providers and the GitHub OAuth app the web console
//! and the CLI sign in with (docs/publishing.md).

use clap::Args;
use url::Url;

/// An OpenID Connect provider as configured: `NAME=ISSUER_URL`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OidcProviderSpec {
    /// Lowercase letters, digits and `-`: the `provider` of `/auth/login` and the middle of
    /// `REGISTRY_OIDC_<NAME>_CLIENT_ID`.
    pub name: String,
    /// The issuer exactly as written (ID tokens' `iss` must equal it).
    pub issuer: String,
    /// The client's credentials; unset, they are read from `REGISTRY_OIDC_<NAME>_CLIENT_ID`
    /// and `…_CLIENT_SECRET` at start-up (never flags: a flag shows in the process list).
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
}

impl OidcProviderSpec {
    pub fn parse(text: &str) -> Result<Self, String> {
        let (name, issuer) = text
            .trim()
            .split_once('=')
            .ok_or_else(|| format!("'{text}': expected NAME=ISSUER_URL"))?;
        let name = name.trim().to_ascii_lowercase();
        let valid = !name.is_empty()
            && name.len() <= 32
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && name != "github";
        if !valid {
            return Err(format!(
                "'{name}': a provider name is 1-32 lowercase letters, digits or '-', and not 'github' \
                 (GitHub has its own flags)"
            ));
        }
        let issuer = issuer.trim();
        let url = Url::parse(issuer).map_err(|err| format!("'{issuer}': {err}"))?;
        if !matches!(url.scheme(), "http" | "https")
            || url.host_str().is_none()
            || url.query().is_some()
            || url.fragment().is_some()
            || !url.username().is_empty()
        {
            return Err(format!(
                "'{issuer}': an issuer is an http or https URL with a host and no query, fragment or credentials"
            ));
        }
        Ok(Self {
            name,
            issuer: issuer.to_owned(),
            client_id: None,
            client_secret: None,
        })
    }

    /// The environment variable holding this provider's client id (`_CLIENT_SECRET` likewise).
    pub fn env_prefix(&self) -> String {
        format!(
            "REGISTRY_OIDC_{}",
            self.name.to_ascii_uppercase().replace('-', "_")
        )
    }
}

/// Who may sign in, and for how long a browser stays signed in.
#[derive(Args, Clone, Debug)]
pub struct SigninConfig {
    /// An OpenID Connect provider people sign in with, as `NAME=ISSUER_URL` (repeatable, or
    /// comma-separated in the environment variable). Its client id and secret come from
    /// `REGISTRY_OIDC_<NAME>_CLIENT_ID` and `REGISTRY_OIDC_<NAME>_CLIENT_SECRET`; register
    /// `{public URL}/auth/callback` as its redirect URI.
    #[arg(long = "oidc-provider", env = "REGISTRY_OIDC_PROVIDERS", value_delimiter = ',',
          value_parser = OidcProviderSpec::parse)]
    pub oidc_providers: Vec<OidcProviderSpec>,

    /// The client id of a GitHub OAuth app: enables "Sign in with GitHub" (web) and
    /// `agent-registry login --github` (device flow). Its secret comes from
    /// `REGISTRY_GITHUB_CLIENT_SECRET`.
    #[arg(long, env = "REGISTRY_GITHUB_CLIENT_ID")]
    pub github_client_id: Option<String>,

    /// The GitHub app's secret; unset, read from `REGISTRY_GITHUB_CLIENT_SECRET` at start-up.
    #[arg(skip)]
    pub github_client_secret: Option<String>,

    /// GitHub's web root (sign-in and device pages), for GitHub Enterprise or a test double.
    #[arg(
        long,
        env = "REGISTRY_GITHUB_URL",
        default_value = "https://github.com"
    )]
    pub github_url: Url,

    /// GitHub's REST API root.
    #[arg(
        long,
        env = "REGISTRY_GITHUB_API_URL",
        default_value = "https://api.github.com"
    )]
    pub github_api_url: Url,

    /// How long a browser stays signed in, in hours.
    #[arg(long, env = "REGISTRY_SESSION_HOURS", default_value_t = 12,
          value_parser = clap::value_parser!(u32).range(1..=720))]
    pub session_hours: u32,
}

impl Default for SigninConfig {
    fn default() -> Self {
        Self {
            oidc_providers: Vec::new(),
            github_client_id: None,
            github_client_secret: None,
            github_url: Url::parse("https://github.com").expect("a valid URL"),
            github_api_url: Url::parse("https://api.github.com").expect("a valid URL"),
            session_hours: 12,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn providers_are_name_equals_issuer() {
        let spec =
            OidcProviderSpec::parse(" Corp-ID = https://id.example.com/realms/x ").expect("valid");
        assert_eq!(spec.name, "corp-id");
        assert_eq!(spec.issuer, "https://id.example.com/realms/x");
        assert_eq!(spec.env_prefix(), "REGISTRY_OIDC_CORP_ID");
        for bad in [
            "https://id.example.com",
            "=https://id.example.com",
            "github=https://github.com",
            "a b=https://id.example.com",
            "corp=ftp://id.example.com",
            "corp=https://id.example.com/?x=1",
            "corp=https://u:p@id.example.com",
            "corp=not a url",
        ] {
            assert!(OidcProviderSpec::parse(bad).is_err(), "{bad}");
        }
    }
}
