//! Sign-in for people: the operator's OpenID Connect providers and GitHub.
//!
//! The web console signs in with the authorization-code flow: `/auth/login?provider=NAME`
//! stores a sign-in under way (state, nonce, PKCE verifier, where to return) keyed by a random
//! value it sets in an HttpOnly cookie, and redirects to the provider; `/auth/callback` takes
//! that sign-in back (once), checks `state` against it, exchanges the code with the PKCE
//! verifier, and, for an OpenID provider, verifies the ID token (signature against the
//! provider's keys, `iss`, `aud` = the client id, expiry, and the `nonce`). GitHub is OAuth, not
//! OpenID: its access token reads the account (`/user`) and its organisation memberships. The
//! result is a session: a random secret in an HttpOnly, SameSite=Lax cookie (Secure when the
//! public URL is https), stored only as a hash, with a CSRF token that every write from the
//! browser must echo.
//!
//! A person is identified by the provider's issuer and subject (GitHub: the account's numeric
//! id). Their owner name is fixed at the first sign-in (`people`): `io.github.<login>` on
//! GitHub, `<username>@<provider>` otherwise, so a later account with a reused login never
//! inherits it. A GitHub sign-in grants the namespaces `io.github.<login>` and
//! `io.github.<org>` for each organisation the person is an active member of.
//!
//! The OAuth pieces (PKCE, the authorization URL, the code exchange and its response) come
//! from the `oauth2` crate, sent through the guarded outbound client; ID tokens are verified by
//! the same `jsonwebtoken` code as trusted publishing. No code, token or secret is logged.

use std::sync::Arc;
use std::time::Duration;

use oauth2::basic::BasicErrorResponse;
use oauth2::{
    AuthType, AuthUrl, AuthorizationCode, ClientId, ClientSecret, CsrfToken, ExtraTokenFields,
    PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, StandardTokenResponse, TokenResponse,
    TokenUrl,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use subtle::ConstantTimeEq;
use url::Url;

use crate::config::SigninConfig;
use crate::domain::access::{hash_secret, parse_owner, random_secret};
use crate::domain::trusted_issuer::{IssuerKind, TrustedIssuer};
use crate::error::{ApiError, ErrorCode};
use crate::oidc::TrustedPublishing;
use crate::outbound::{Fetch, JSON, Outbound};
use crate::store::{Store, WebSessionRecord};
use crate::timestamp::Timestamp;

pub mod http;

/// The cookie that ties a sign-in under way to the browser that started it.
pub const SIGNIN_COOKIE: &str = "ar_signin";
/// How long a sign-in may take between the redirect and the callback.
pub const SIGNIN_SECS: u64 = 10 * 60;
/// The provider name of GitHub.
pub const GITHUB: &str = "github";
/// How a GitHub account is named in `people` (its numeric id is the subject).
const GITHUB_ISSUER: &str = "https://github.com";
/// Largest response read from a provider or GitHub.
const MAX_RESPONSE_BYTES: usize = 256 * 1024;
/// Longest `return_to` kept.
const MAX_RETURN_TO: usize = 512;

/// What a session holds beside its owner (stored as JSON with the session).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionData {
    /// Who signed in (`kind` `oidc` or `github`, the provider and the subject).
    pub identity: Value,
    /// The namespaces the identity grants.
    #[serde(default)]
    pub namespaces: Vec<String>,
    pub csrf_token: String,
}

/// A sign-in under way (stored as JSON until the callback takes it).
#[derive(Debug, Serialize, Deserialize)]
struct Pending {
    provider: String,
    state: String,
    nonce: String,
    pkce_verifier: String,
    return_to: String,
}

/// Who a provider says signed in.
#[derive(Debug, Clone)]
pub struct Person {
    /// The owner name they act as.
    pub owner: String,
    pub identity: Value,
    pub namespaces: Vec<String>,
}

/// A session just made: the cookie's secret and when it ends.
pub struct NewSession {
    pub secret: String,
    pub expires_at: Timestamp,
    pub return_to: String,
}

/// A provider as the console and the CLI see it (`GET /api/auth/providers`).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ProviderView {
    /// What `/auth/login?provider=` takes.
    pub name: String,
    /// `oidc` or `github`.
    pub kind: String,
    /// Where a browser starts signing in.
    pub login_url: String,
    /// GitHub's: the OAuth app's client id and web root, for the CLI's device flow.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_authorization_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_url: Option<String>,
}

/// The ID token an OpenID provider sends beside the access token.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct IdTokenField {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    id_token: Option<String>,
}

impl ExtraTokenFields for IdTokenField {}

type CodeResponse = StandardTokenResponse<IdTokenField, oauth2::basic::BasicTokenType>;

/// An OpenID Connect provider.
struct OidcProvider {
    name: String,
    issuer: String,
    client_id: String,
    client_secret: Option<String>,
    /// Verifies its ID tokens: its keys, `iss`, and `aud` = the client id.
    verifier: TrustedPublishing,
    /// Its authorization and token endpoints, from its discovery document.
    endpoints: tokio::sync::Mutex<Option<Endpoints>>,
}

#[derive(Clone)]
struct Endpoints {
    authorization: Url,
    token: Url,
}

/// The GitHub OAuth app.
struct Github {
    client_id: String,
    client_secret: Option<String>,
    web: Url,
    api: Url,
}

/// The configured providers and where sessions live.
pub struct SignIn {
    providers: Vec<OidcProvider>,
    github: Option<Github>,
    outbound: Arc<Outbound>,
    store: Arc<dyn Store>,
    /// `{public URL}/auth/callback`.
    redirect_uri: String,
    secure_cookies: bool,
    session_secs: u64,
}

impl SignIn {
    /// `outbound` reaches the operator's providers (any address, like its other APIs).
    /// Client ids and secrets come from the environment (`REGISTRY_OIDC_<NAME>_CLIENT_ID`,
    /// `…_CLIENT_SECRET`, `REGISTRY_GITHUB_CLIENT_SECRET`).
    pub fn new(
        config: &SigninConfig,
        base_url: &str,
        store: Arc<dyn Store>,
        outbound: Arc<Outbound>,
    ) -> anyhow::Result<Self> {
        let env = |name: &str| std::env::var(name).ok().filter(|value| !value.is_empty());
        let mut providers = Vec::new();
        for spec in &config.oidc_providers {
            if providers
                .iter()
                .any(|other: &OidcProvider| other.name == spec.name)
            {
                anyhow::bail!("--oidc-provider: '{}' is listed twice", spec.name);
            }
            let prefix = spec.env_prefix();
            let client_id = spec
                .client_id
                .clone()
                .or_else(|| env(&format!("{prefix}_CLIENT_ID")))
                .ok_or_else(|| {
                anyhow::anyhow!(
                    "--oidc-provider {}: set {prefix}_CLIENT_ID (and {prefix}_CLIENT_SECRET for a confidential client)",
                    spec.name
                )
            })?;
            let verifier = TrustedPublishing::new(
                &[TrustedIssuer {
                    kind: IssuerKind::Generic,
                    issuer: spec.issuer.clone(),
                }],
                &client_id,
                Arc::clone(&outbound),
            )?;
            providers.push(OidcProvider {
                name: spec.name.clone(),
                issuer: spec.issuer.clone(),
                client_id,
                client_secret: spec
                    .client_secret
                    .clone()
                    .or_else(|| env(&format!("{prefix}_CLIENT_SECRET"))),
                verifier,
                endpoints: tokio::sync::Mutex::new(None),
            });
        }
        let github = config.github_client_id.as_ref().map(|client_id| Github {
            client_id: client_id.clone(),
            client_secret: config
                .github_client_secret
                .clone()
                .or_else(|| env("REGISTRY_GITHUB_CLIENT_SECRET")),
            web: config.github_url.clone(),
            api: config.github_api_url.clone(),
        });
        Ok(Self {
            providers,
            github,
            outbound,
            store,
            redirect_uri: format!("{base_url}/auth/callback"),
            secure_cookies: base_url.starts_with("https:"),
            session_secs: u64::from(config.session_hours) * 3600,
        })
    }

    /// Whether cookies are marked Secure (the public URL is https).
    pub fn secure_cookies(&self) -> bool {
        self.secure_cookies
    }

    /// The providers, for the console's buttons and the CLI.
    pub fn providers(&self) -> Vec<ProviderView> {
        let login = |name: &str| format!("/auth/login?provider={name}");
        let mut views: Vec<ProviderView> = self
            .providers
            .iter()
            .map(|provider| ProviderView {
                name: provider.name.clone(),
                kind: "oidc".to_owned(),
                login_url: login(&provider.name),
                client_id: None,
                device_authorization_url: None,
                token_url: None,
            })
            .collect();
        if let Some(github) = &self.github {
            views.push(ProviderView {
                name: GITHUB.to_owned(),
                kind: GITHUB.to_owned(),
                login_url: login(GITHUB),
                client_id: Some(github.client_id.clone()),
                device_authorization_url: github
                    .web
                    .join("login/device/code")
                    .ok()
                    .map(String::from),
                token_url: github
                    .web
                    .join("login/oauth/access_token")
                    .ok()
                    .map(String::from),
            });
        }
        views
    }

    /// Start signing in with `provider`: the cookie value that ties the sign-in to this browser,
    /// and the provider's URL to send it to.
    pub async fn start(
        &self,
        provider: &str,
        return_to: Option<&str>,
    ) -> Result<(String, Url), ApiError> {
        let key = random_secret("");
        let state = random_secret("");
        let nonce = random_secret("");
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let (client_id, authorization, scopes): (&str, Url, &[&str]) = if provider == GITHUB {
            let github = self.github.as_ref().ok_or_else(|| unknown(provider))?;
            (
                &github.client_id,
                github
                    .web
                    .join("login/oauth/authorize")
                    .map_err(|err| internal(&err.to_string()))?,
                &["read:user", "read:org"],
            )
        } else {
            let oidc = self.oidc(provider)?;
            (
                &oidc.client_id,
                self.endpoints(oidc).await?.authorization,
                &["openid", "profile", "email"],
            )
        };
        let client = oauth2::basic::BasicClient::new(ClientId::new(client_id.to_owned()))
            .set_auth_uri(AuthUrl::from_url(authorization))
            .set_redirect_uri(self.redirect_url()?);
        let state_for_url = state.clone();
        let mut request = client
            .authorize_url(move || CsrfToken::new(state_for_url))
            .add_scopes(
                scopes
                    .iter()
                    .map(|scope| oauth2::Scope::new((*scope).to_owned())),
            )
            .set_pkce_challenge(challenge);
        if provider != GITHUB {
            request = request.add_extra_param("nonce", nonce.clone());
        }
        let (url, _) = request.url();
        let pending = Pending {
            provider: provider.to_owned(),
            state,
            nonce,
            pkce_verifier: verifier.secret().clone(),
            return_to: safe_return_to(return_to),
        };
        let now = Timestamp::now();
        let data = serde_json::to_string(&pending).map_err(|err| internal(&err.to_string()))?;
        self.store
            .insert_signin_state(&hash_secret(&key), &data, now.plus_secs(SIGNIN_SECS), now)
            .await?;
        Ok((key, url))
    }

    /// Finish a sign-in: take the one `cookie` started, check `state`, exchange `code`, and make
    /// a session for whoever signed in. Errors are for the person: they never hold a code or a
    /// token.
    pub async fn finish(
        &self,
        cookie: Option<&str>,
        state: &str,
        code: &str,
        iss: Option<&str>,
    ) -> Result<NewSession, ApiError> {
        let cookie = cookie.filter(|cookie| !cookie.is_empty()).ok_or_else(|| {
            refused("this browser has no sign-in under way (cookies blocked, or another browser started it)")
        })?;
        let (data, expires_at) = self
            .store
            .take_signin_state(&hash_secret(cookie))
            .await?
            .ok_or_else(|| refused("this sign-in is unknown or was already used; start again"))?;
        if expires_at < Timestamp::now() {
            return Err(refused("this sign-in took too long; start again"));
        }
        let pending: Pending =
            serde_json::from_str(&data).map_err(|_| refused("this sign-in cannot be read"))?;
        if !bool::from(state.as_bytes().ct_eq(pending.state.as_bytes())) {
            return Err(refused(
                "the provider's answer does not belong to this sign-in (state mismatch)",
            ));
        }
        if code.is_empty() || code.len() > 4096 {
            return Err(refused("the provider sent no usable authorization code"));
        }
        let person = if pending.provider == GITHUB {
            let github = self
                .github
                .as_ref()
                .ok_or_else(|| unknown(&pending.provider))?;
            let token = self
                .exchange(
                    github.client_id.clone(),
                    github.client_secret.clone(),
                    github
                        .web
                        .join("login/oauth/access_token")
                        .map_err(|err| internal(&err.to_string()))?,
                    AuthType::RequestBody,
                    code,
                    pending.pkce_verifier,
                    "GitHub",
                )
                .await?;
            self.github_person(token.access_token().secret()).await?
        } else {
            let oidc = self.oidc(&pending.provider)?;
            // An answer naming another issuer is a mix-up (RFC 9207): refuse before the code
            // goes anywhere.
            if iss.is_some_and(|iss| iss != oidc.issuer) {
                return Err(refused(
                    "the answer names another issuer than the provider this sign-in went to",
                ));
            }
            let endpoints = self.endpoints(oidc).await?;
            let token = self
                .exchange(
                    oidc.client_id.clone(),
                    oidc.client_secret.clone(),
                    endpoints.token,
                    AuthType::BasicAuth,
                    code,
                    pending.pkce_verifier,
                    &oidc.name,
                )
                .await?;
            let id_token = token.extra_fields().id_token.as_deref().ok_or_else(|| {
                refused("the provider sent no ID token (is 'openid' among the client's scopes?)")
            })?;
            self.oidc_person(oidc, id_token, &pending.nonce).await?
        };
        let session = self.open_session(&person).await?;
        Ok(NewSession {
            return_to: pending.return_to,
            ..session
        })
    }

    /// Store a session for `person`.
    pub async fn open_session(&self, person: &Person) -> Result<NewSession, ApiError> {
        let secret = random_secret("ars_");
        let now = Timestamp::now();
        let expires_at = now.plus_secs(self.session_secs);
        let data = SessionData {
            identity: person.identity.clone(),
            namespaces: person.namespaces.clone(),
            csrf_token: random_secret(""),
        };
        let record = WebSessionRecord {
            id: format!("ses_{}", ulid::Ulid::new()),
            secret_hash: hash_secret(&secret),
            owner: person.owner.clone(),
            data: serde_json::to_string(&data).map_err(|err| internal(&err.to_string()))?,
            created_at: now,
            expires_at,
        };
        // The sign-in is the person's own act in the audit log.
        crate::audit::set_actor(|| crate::audit::AuditActor {
            owner: person.owner.clone(),
            kind: "session",
            token_id: None,
            session_id: Some(record.id.clone()),
        });
        self.store.insert_web_session(&record).await?;
        tracing::info!(session.id = %record.id, owner = %person.owner,
            identity = %person.identity, "signed in");
        Ok(NewSession {
            secret,
            expires_at,
            return_to: "/console".to_owned(),
        })
    }

    /// End session `id`; whether there was one.
    pub async fn close_session(&self, id: &str) -> Result<bool, ApiError> {
        Ok(self.store.delete_web_session(id).await?)
    }

    /// The person a GitHub access token belongs to (the CLI's device flow ends here too).
    pub async fn github_person(&self, access_token: &str) -> Result<Person, ApiError> {
        let github = self.github.as_ref().ok_or_else(|| unknown(GITHUB))?;
        let user = self.github_get(github, "user", access_token).await?;
        let login = user
            .get("login")
            .and_then(Value::as_str)
            .filter(|login| is_github_name(login))
            .ok_or_else(|| refused("GitHub did not say who signed in"))?
            .to_ascii_lowercase();
        let id = user
            .get("id")
            .and_then(Value::as_u64)
            .ok_or_else(|| refused("GitHub did not give the account's id"))?;
        let memberships = self
            .github_get(
                github,
                "user/memberships/orgs?state=active&per_page=100",
                access_token,
            )
            .await?;
        let mut orgs = Vec::new();
        for membership in memberships.as_array().into_iter().flatten() {
            let org = membership.get("organization");
            let name = org
                .and_then(|org| org.get("login"))
                .and_then(Value::as_str)
                .filter(|name| is_github_name(name));
            let org_id = org.and_then(|org| org.get("id")).and_then(Value::as_u64);
            let active = membership.get("state").and_then(Value::as_str) == Some("active");
            if let (Some(name), Some(org_id), true) = (name, org_id, active) {
                orgs.push((name.to_ascii_lowercase(), org_id));
            }
        }
        let candidate = format!("io.github.{login}");
        let owner = self
            .store
            .person_owner(
                GITHUB_ISSUER,
                &id.to_string(),
                std::slice::from_ref(&candidate),
                Timestamp::now(),
            )
            .await?
            .ok_or_else(|| {
                refused(&format!(
                    "the owner name '{candidate}' belongs to another GitHub account that had this \
                     login before; ask the operator to release it"
                ))
            })?;
        let mut namespaces = vec![candidate];
        namespaces.extend(orgs.iter().map(|(name, _)| format!("io.github.{name}")));
        namespaces.sort();
        namespaces.dedup();
        let identity = json!({
            "kind": GITHUB,
            "login": login,
            "id": id.to_string(),
            "orgs": orgs.iter().map(|(name, id)| json!({"login": name, "id": id.to_string()})).collect::<Vec<_>>(),
        });
        Ok(Person {
            owner,
            identity,
            namespaces,
        })
    }

    /// The person an OpenID provider's ID token names, once it verifies and carries `nonce`.
    async fn oidc_person(
        &self,
        oidc: &OidcProvider,
        id_token: &str,
        nonce: &str,
    ) -> Result<Person, ApiError> {
        let verified = oidc.verifier.verify(id_token).await.map_err(|err| {
            refused(&format!(
                "the provider's ID token was refused: {}",
                err.detail
            ))
        })?;
        let claims = verified.claims;
        let sent_nonce = claims.get("nonce").and_then(Value::as_str).unwrap_or("");
        if !bool::from(sent_nonce.as_bytes().ct_eq(nonce.as_bytes())) {
            return Err(refused(
                "the ID token does not belong to this sign-in (nonce mismatch)",
            ));
        }
        let subject = claims
            .get("sub")
            .and_then(Value::as_str)
            .filter(|sub| !sub.is_empty() && sub.len() <= 255)
            .ok_or_else(|| refused("the ID token names no subject (sub)"))?;
        let text = |name: &str| claims.get(name).and_then(Value::as_str);
        let base = text("preferred_username")
            .or_else(|| text("email").and_then(|email| email.split('@').next()))
            .map(owner_base)
            .filter(|base| !base.is_empty())
            .unwrap_or_else(|| owner_base(subject));
        let candidates = owner_candidates(&base, &oidc.name);
        let owner = self
            .store
            .person_owner(&oidc.issuer, subject, &candidates, Timestamp::now())
            .await?
            .ok_or_else(|| {
                refused("every owner name for this person is taken; ask the operator")
            })?;
        let mut identity = json!({
            "kind": "oidc",
            "provider": oidc.name,
            "issuer": oidc.issuer,
            "sub": subject,
        });
        for claim in ["email", "name", "preferred_username"] {
            if let Some(value) = text(claim) {
                identity[claim] = Value::String(crate::domain::truncate(value, 200).to_owned());
            }
        }
        Ok(Person {
            owner,
            identity,
            namespaces: Vec::new(),
        })
    }

    /// Exchange an authorization code at `token_url` with the PKCE verifier.
    #[allow(clippy::too_many_arguments)]
    async fn exchange(
        &self,
        client_id: String,
        client_secret: Option<String>,
        token_url: Url,
        auth_type: AuthType,
        code: &str,
        verifier: String,
        provider: &str,
    ) -> Result<CodeResponse, ApiError> {
        let mut client = oauth2::Client::<
            BasicErrorResponse,
            CodeResponse,
            oauth2::basic::BasicTokenIntrospectionResponse,
            oauth2::StandardRevocableToken,
            oauth2::basic::BasicRevocationErrorResponse,
        >::new(ClientId::new(client_id))
        .set_token_uri(TokenUrl::from_url(token_url))
        .set_redirect_uri(self.redirect_url()?)
        .set_auth_type(auth_type);
        if let Some(secret) = client_secret {
            client = client.set_client_secret(ClientSecret::new(secret));
        }
        let http = http::Client::Guarded {
            outbound: Arc::clone(&self.outbound),
            max_bytes: MAX_RESPONSE_BYTES,
        };
        client
            .exchange_code(AuthorizationCode::new(code.to_owned()))
            .set_pkce_verifier(PkceCodeVerifier::new(verifier))
            .request_async(&http)
            .await
            .map_err(|err| {
                let why = match &err {
                    oauth2::RequestTokenError::ServerResponse(response) => {
                        format!("{} refused the code ({})", provider, response.error())
                    }
                    oauth2::RequestTokenError::Request(err) => {
                        format!("{provider} could not be reached: {err}")
                    }
                    oauth2::RequestTokenError::Parse(_, _) => {
                        format!("{provider} sent an unreadable token response")
                    }
                    oauth2::RequestTokenError::Other(why) => format!("{provider}: {why}"),
                };
                refused(&why)
            })
    }

    async fn github_get(
        &self,
        github: &Github,
        path: &str,
        token: &str,
    ) -> Result<Value, ApiError> {
        let url = github
            .api
            .join(path)
            .map_err(|err| internal(&err.to_string()))?;
        let fetched = self
            .outbound
            .get(
                &Fetch::get(url, JSON, MAX_RESPONSE_BYTES)
                    .header(axum::http::header::AUTHORIZATION, format!("Bearer {token}"))
                    .header(
                        axum::http::HeaderName::from_static("x-github-api-version"),
                        "2022-11-28",
                    ),
            )
            .await
            .map_err(|err| {
                ApiError::new(
                    ErrorCode::UpstreamError,
                    format!("GitHub could not be reached: {err}"),
                )
            })?;
        match fetched.status.as_u16() {
            200 => fetched.json::<Value>().map_err(|_| {
                ApiError::new(ErrorCode::UpstreamError, "GitHub sent unreadable JSON")
            }),
            401 => Err(ApiError::invalid_token(
                "GitHub does not accept this access token (expired or revoked)",
            )),
            403 if path.starts_with("user/memberships") => Err(refused(
                "GitHub refused to list the organisations: the token needs the read:org scope",
            )),
            status => Err(ApiError::new(
                ErrorCode::UpstreamError,
                format!("GitHub answered {status}"),
            )),
        }
    }

    fn oidc(&self, name: &str) -> Result<&OidcProvider, ApiError> {
        self.providers
            .iter()
            .find(|provider| provider.name == name)
            .ok_or_else(|| unknown(name))
    }

    fn redirect_url(&self) -> Result<RedirectUrl, ApiError> {
        RedirectUrl::new(self.redirect_uri.clone()).map_err(|err| internal(&err.to_string()))
    }

    /// The provider's endpoints, from its discovery document (read once, read again after a
    /// failure).
    async fn endpoints(&self, oidc: &OidcProvider) -> Result<Endpoints, ApiError> {
        let mut cached = oidc.endpoints.lock().await;
        if let Some(endpoints) = cached.as_ref() {
            return Ok(endpoints.clone());
        }
        let unavailable = |why: &str| {
            ApiError::new(
                ErrorCode::UpstreamError,
                format!("the sign-in provider '{}' is unavailable: {why}", oidc.name),
            )
        };
        let url = Url::parse(&format!(
            "{}/.well-known/openid-configuration",
            oidc.issuer.trim_end_matches('/')
        ))
        .map_err(|err| unavailable(&err.to_string()))?;
        let fetched = self
            .outbound
            .get(&Fetch::get(url, JSON, MAX_RESPONSE_BYTES).timeout(Duration::from_secs(10)))
            .await
            .map_err(|err| unavailable(&err.to_string()))?;
        if !fetched.status.is_success() {
            return Err(unavailable(&format!(
                "its discovery document answered {}",
                fetched.status.as_u16()
            )));
        }
        let discovery: Value = fetched
            .json()
            .map_err(|_| unavailable("its discovery document is not JSON"))?;
        if discovery.get("issuer").and_then(Value::as_str) != Some(oidc.issuer.as_str()) {
            return Err(unavailable("its discovery document names another issuer"));
        }
        let endpoint = |name: &str| {
            discovery
                .get(name)
                .and_then(Value::as_str)
                .and_then(|url| Url::parse(url).ok())
                .filter(|url| matches!(url.scheme(), "https" | "http"))
                .ok_or_else(|| unavailable(&format!("its discovery document has no {name}")))
        };
        let endpoints = Endpoints {
            authorization: endpoint("authorization_endpoint")?,
            token: endpoint("token_endpoint")?,
        };
        *cached = Some(endpoints.clone());
        Ok(endpoints)
    }
}

/// Where to go after signing in: a path on this site, never another site (`//host`, `/\host`,
/// a scheme) and never something a browser would read as one; `/console` otherwise.
pub fn safe_return_to(return_to: Option<&str>) -> String {
    match return_to {
        Some(path)
            if path.starts_with('/')
                && !path.starts_with("//")
                && !path.starts_with("/\\")
                && path.len() <= MAX_RETURN_TO
                && path.chars().all(|c| c.is_ascii_graphic() && c != '\\') =>
        {
            path.to_owned()
        }
        _ => "/console".to_owned(),
    }
}

/// A GitHub login or organisation name: letters, digits and single hyphens, at most 39.
fn is_github_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 39
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        && !name.starts_with('-')
}

/// A username as the start of an owner name: lowercase, only what owner names allow.
fn owner_base(name: &str) -> String {
    let base: String = name
        .to_ascii_lowercase()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        .take(40)
        .collect();
    base.trim_matches(|c| c == '.' || c == '-').to_owned()
}

/// `base@provider`, then `base-2@provider` … `base-9@provider`.
fn owner_candidates(base: &str, provider: &str) -> Vec<String> {
    std::iter::once(format!("{base}@{provider}"))
        .chain((2..=9).map(|n| format!("{base}-{n}@{provider}")))
        .filter(|owner| parse_owner(owner).is_ok())
        .collect()
}

/// 401 with the reason: the sign-in was refused.
fn refused(why: &str) -> ApiError {
    ApiError::unauthorized(format!("sign-in refused: {why}"))
}

fn unknown(provider: &str) -> ApiError {
    ApiError::new(
        ErrorCode::NotFound,
        format!(
            "no sign-in provider '{}' is configured",
            crate::domain::truncate(provider, 40)
        ),
    )
}

fn internal(why: &str) -> ApiError {
    ApiError::internal(why)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn return_to_stays_on_this_site() {
        assert_eq!(safe_return_to(Some("/console?x=1")), "/console?x=1");
        assert_eq!(
            safe_return_to(Some("/agents/com.example.a")),
            "/agents/com.example.a"
        );
        for hostile in [
            "//evil.example",
            "/\\evil.example",
            "https://evil.example/",
            "javascript:alert(1)",
            "console",
            "/a b",
            "/\u{0}x",
            "/\tevil",
            "",
        ] {
            assert_eq!(safe_return_to(Some(hostile)), "/console", "{hostile:?}");
        }
        assert_eq!(safe_return_to(None), "/console");
        assert_eq!(
            safe_return_to(Some(&format!("/{}", "a".repeat(600)))),
            "/console"
        );
    }

    #[test]
    fn owner_names_come_from_the_username() {
        assert_eq!(owner_base("Alice.Smith"), "alice.smith");
        assert_eq!(owner_base("ålice+tag"), "licetag");
        assert_eq!(owner_base("-.x.-"), "x");
        let candidates = owner_candidates("alice", "corp");
        assert_eq!(candidates[0], "alice@corp");
        assert_eq!(candidates[1], "alice-2@corp");
        assert_eq!(candidates.len(), 9);
        assert!(is_github_name("acme-corp"));
        assert!(!is_github_name("-acme"));
        assert!(!is_github_name("a.b"));
        assert!(!is_github_name(&"a".repeat(40)));
    }
}
