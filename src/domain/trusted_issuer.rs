//! Trusted publishing: the OIDC issuers an operator trusts (`KIND=ISSUER_URL`), and which
//! namespaces a verified ID token's claims grant.
//!
//! A namespace is a package-name prefix: package `P` is in namespace `N` when `P == N` or `P`
//! starts with `N.`, compared in lowercase. Each kind of issuer names one namespace per token:
//!
//! - `github` (GitHub Actions): `repository_owner` → `io.github.<owner>`.
//! - `gitlab` (GitLab CI): `namespace_path` → `com.gitlab.<path, each / a .>`.
//! - `generic`: the `registry_namespace` claim, when it is a valid package name.

use serde_json::{Map, Value, json};
use url::Url;

use super::PackageName;

/// The kinds of issuer, each with its own rule from claims to a namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IssuerKind {
    /// GitHub Actions (`https://token.actions.githubusercontent.com`).
    Github,
    /// GitLab CI (`https://gitlab.com`, or a self-managed instance).
    Gitlab,
    /// Any OIDC issuer whose tokens carry a `registry_namespace` claim.
    Generic,
}

impl IssuerKind {
    pub const ALL: [Self; 3] = [Self::Github, Self::Gitlab, Self::Generic];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Github => "github",
            Self::Gitlab => "gitlab",
            Self::Generic => "generic",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == text)
    }
}

/// One issuer the operator trusts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustedIssuer {
    pub kind: IssuerKind,
    /// The issuer as configured: an ID token's `iss` must equal it exactly.
    pub issuer: String,
}

impl TrustedIssuer {
    /// Read `KIND=ISSUER_URL`: an http or https URL with a host and no query, fragment or
    /// credentials, kept exactly as written (a token's `iss` is compared with it as text).
    pub fn parse(text: &str) -> Result<Self, String> {
        let (kind, issuer) = text
            .trim()
            .split_once('=')
            .ok_or_else(|| format!("'{text}': expected KIND=ISSUER_URL"))?;
        let kind = IssuerKind::parse(kind.trim()).ok_or_else(|| {
            format!(
                "'{kind}': the kind is one of {}",
                IssuerKind::ALL.map(IssuerKind::as_str).join(", ")
            )
        })?;
        let issuer = issuer.trim();
        let url = Url::parse(issuer).map_err(|err| format!("'{issuer}': {err}"))?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err(format!("'{issuer}': an http or https URL is needed"));
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err(format!("'{issuer}': no query or fragment"));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(format!("'{issuer}': no credentials"));
        }
        Ok(Self {
            kind,
            issuer: issuer.to_owned(),
        })
    }

    /// Where the issuer describes itself (OpenID Connect Discovery): its `jwks_uri` is there.
    pub fn discovery_url(&self) -> String {
        format!(
            "{}/.well-known/openid-configuration",
            self.issuer.trim_end_matches('/')
        )
    }
}

/// What a verified ID token grants: the namespaces its tokens may write, and the identity it
/// came from as the minted token records it (`issuer` in `GET /api/me`).
#[derive(Debug, Clone, PartialEq)]
pub struct Grant {
    pub namespaces: Vec<String>,
    pub identity: Value,
}

/// The namespace and identity `claims` grant under an issuer of `kind`. `Err` says why none.
pub fn grant(kind: IssuerKind, claims: &Map<String, Value>) -> Result<Grant, String> {
    let text = |name: &str| -> Result<&str, String> {
        match claims.get(name) {
            Some(Value::String(value)) if !value.trim().is_empty() => Ok(value.trim()),
            Some(_) => Err(format!("the '{name}' claim is not a non-empty string")),
            None => Err(format!("the token has no '{name}' claim")),
        }
    };
    // Claims kept beside the namespace, when the token has them (ids as strings, as GitHub
    // and GitLab send them).
    let keep = |identity: &mut Map<String, Value>, names: &[&str]| {
        for name in names {
            match claims.get(*name) {
                Some(Value::String(value)) => {
                    identity.insert((*name).to_owned(), json!(value));
                }
                Some(Value::Number(value)) => {
                    identity.insert((*name).to_owned(), json!(value.to_string()));
                }
                _ => {}
            }
        }
    };
    let mut identity = Map::new();
    identity.insert("kind".to_owned(), json!(kind.as_str()));
    let namespace = match kind {
        IssuerKind::Github => {
            let owner = text("repository_owner")?;
            let label = namespace_label(owner, "repository_owner")?;
            keep(
                &mut identity,
                &[
                    "repository",
                    "repository_owner",
                    "repository_owner_id",
                    "repository_id",
                    "workflow_ref",
                    "job_workflow_ref",
                    "ref",
                ],
            );
            format!("io.github.{label}")
        }
        IssuerKind::Gitlab => {
            let path = text("namespace_path")?;
            let labels = path
                .split('/')
                .map(|segment| namespace_label(segment, "namespace_path"))
                .collect::<Result<Vec<_>, _>>()?;
            keep(
                &mut identity,
                &[
                    "namespace_path",
                    "namespace_id",
                    "project_path",
                    "project_id",
                    "ref",
                ],
            );
            format!("com.gitlab.{}", labels.join("."))
        }
        IssuerKind::Generic => {
            let namespace = text("registry_namespace")?;
            keep(&mut identity, &["registry_namespace", "sub"]);
            namespace.to_owned()
        }
    };
    let namespace = PackageName::parse(&namespace).map_err(|message| {
        format!("the namespace '{namespace}' the token grants is not a package name: {message}")
    })?;
    Ok(Grant {
        namespaces: vec![namespace.as_str().to_owned()],
        identity: Value::Object(identity),
    })
}

/// One label of a namespace, lowercased: a-z, 0-9, '-' and '_' only (a '.' would add labels).
fn namespace_label(text: &str, claim: &str) -> Result<String, String> {
    let label = text.to_ascii_lowercase();
    let valid = !label.is_empty()
        && label
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if valid {
        Ok(label)
    } else {
        Err(format!(
            "the '{claim}' claim has '{text}', which is not a namespace label (a-z, 0-9, '-', '_')"
        ))
    }
}

/// Whether package `package` is in one of `namespaces`: equal to one, or beneath one (`N.`),
/// ignoring ASCII case.
pub fn in_namespaces(package: &str, namespaces: &[String]) -> bool {
    namespaces
        .iter()
        .any(|namespace| super::namespace::covers(namespace, package))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn issuers_are_kind_and_url() {
        let github = TrustedIssuer::parse("github=https://token.actions.githubusercontent.com")
            .expect("valid");
        assert_eq!(github.kind, IssuerKind::Github);
        assert_eq!(github.issuer, "https://token.actions.githubusercontent.com");
        assert_eq!(
            github.discovery_url(),
            "https://token.actions.githubusercontent.com/.well-known/openid-configuration"
        );
        let slash = TrustedIssuer::parse(" gitlab = https://gitlab.example/ ").expect("valid");
        assert_eq!(slash.issuer, "https://gitlab.example/");
        assert_eq!(
            slash.discovery_url(),
            "https://gitlab.example/.well-known/openid-configuration"
        );
        for bad in [
            "https://token.actions.githubusercontent.com",
            "azure=https://x.example",
            "github=ftp://x.example",
            "github=https://x.example/?a=b",
            "github=https://user:pw@x.example",
            "github=not a url",
        ] {
            assert!(TrustedIssuer::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn github_grants_the_owner_namespace_lowercased() {
        let grant = grant(
            IssuerKind::Github,
            &claims(
                json!({"repository": "Acme/weather", "repository_owner": "Acme",
                "repository_owner_id": 123, "sub": "repo:Acme/weather:ref:refs/heads/main"}),
            ),
        )
        .expect("valid");
        assert_eq!(grant.namespaces, ["io.github.acme"]);
        assert_eq!(
            grant.identity,
            json!({"kind": "github", "repository": "Acme/weather", "repository_owner": "Acme",
                "repository_owner_id": "123"})
        );
        for bad in [
            json!({}),
            json!({"repository_owner": ""}),
            json!({"repository_owner": 7}),
            json!({"repository_owner": "a.b"}),
            json!({"repository_owner": "-acme"}),
            json!({"repository_owner": "ac me"}),
        ] {
            assert!(grant_is_err(IssuerKind::Github, bad.clone()), "{bad}");
        }
    }

    fn grant_is_err(kind: IssuerKind, value: Value) -> bool {
        grant(kind, &claims(value)).is_err()
    }

    #[test]
    fn gitlab_grants_the_namespace_path_with_dots() {
        let grant = grant(
            IssuerKind::Gitlab,
            &claims(
                json!({"namespace_path": "Acme/Sub-Group", "project_path": "Acme/Sub-Group/x"}),
            ),
        )
        .expect("valid");
        assert_eq!(grant.namespaces, ["com.gitlab.acme.sub-group"]);
        assert_eq!(grant.identity["kind"], "gitlab");
        for bad in ["acme/my.group", "acme//x", "acme/x!", "acme/-x"] {
            assert!(
                grant_is_err(IssuerKind::Gitlab, json!({"namespace_path": bad})),
                "{bad}"
            );
        }
    }

    #[test]
    fn generic_grants_a_valid_registry_namespace_claim() {
        let grant = grant(
            IssuerKind::Generic,
            &claims(json!({"registry_namespace": "Com.Example", "sub": "ci"})),
        )
        .expect("valid");
        assert_eq!(grant.namespaces, ["com.example"]);
        for bad in [
            json!({}),
            json!({"registry_namespace": "com..x"}),
            json!({"registry_namespace": "x"}),
        ] {
            assert!(grant_is_err(IssuerKind::Generic, bad.clone()), "{bad}");
        }
    }

    #[test]
    fn a_package_is_in_a_namespace_when_equal_or_beneath_it() {
        let granted = vec!["io.github.acme".to_owned()];
        assert!(in_namespaces("io.github.acme", &granted));
        assert!(in_namespaces("io.github.acme.weather", &granted));
        assert!(in_namespaces("IO.GitHub.Acme.Weather", &granted));
        assert!(!in_namespaces("io.github.acmecorp", &granted));
        assert!(!in_namespaces("io.github.other.x", &granted));
        assert!(!in_namespaces("io.github", &granted));
        assert!(!in_namespaces("io.github.acme.x", &[]));
    }
}
