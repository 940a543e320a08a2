//! Bearer authentication: tokens and the master key, scopes, and ownership checks.

use std::sync::Arc;

use axum::extract::{FromRef, FromRequestParts};
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use subtle::ConstantTimeEq;

pub use crate::domain::access::{
    Actor, MASTER_OWNER, SYSTEM_OWNER, Scope, Viewer, hash_secret, parse_owner, random_secret,
};
use crate::error::{ApiError, ApiResult};
use crate::store::{Store, StoreResult, TokenGrant, TokenRecord};
use crate::timestamp::Timestamp;

/// A freshly issued token: the secret (shown once) and its stored record.
pub struct IssuedToken {
    pub secret: String,
    pub record: TokenRecord,
}

/// Create and store a token. An empty scope list means every scope but the operators'
/// (`Scope::DEFAULT`).
pub async fn issue_token(
    store: &dyn Store,
    owner: &str,
    scopes: &[Scope],
    expires_in_days: Option<u32>,
) -> StoreResult<IssuedToken> {
    let issued = new_token(
        owner,
        scopes,
        expires_in_days.map(|days| days as u64 * 86_400),
    );
    store.insert_token(&issued.record).await?;
    Ok(issued)
}

/// A token not stored yet: a fresh secret, `owner`, `scopes` (every default one when empty),
/// expiring `expires_in_secs` from now.
fn new_token(owner: &str, scopes: &[Scope], expires_in_secs: Option<u64>) -> IssuedToken {
    let now = Timestamp::now();
    let mut scopes = if scopes.is_empty() {
        Scope::DEFAULT.to_vec()
    } else {
        scopes.to_vec()
    };
    scopes.sort_by_key(|scope| scope.as_str());
    scopes.dedup();
    let secret = random_secret("ar_");
    let record = TokenRecord {
        id: format!("tok_{}", ulid::Ulid::new()),
        owner: owner.to_owned(),
        scopes,
        secret_hash: hash_secret(&secret),
        created_at: now,
        expires_at: expires_in_secs.map(|secs| now.plus_secs(secs)),
        revoked_at: None,
    };
    IssuedToken { secret, record }
}

/// Create and store a token a signed-in person mints for themselves: their owner, the scopes
/// asked for, and the namespaces their sign-in grants (held, not a restriction).
pub async fn issue_person_token(
    store: &dyn Store,
    caller: &Caller,
    scopes: &[Scope],
    expires_in_days: Option<u32>,
) -> StoreResult<IssuedToken> {
    if caller.granted.is_empty() {
        return issue_token(store, &caller.owner, scopes, expires_in_days).await;
    }
    let issued = new_token(
        &caller.owner,
        scopes,
        expires_in_days.map(|days| days as u64 * 86_400),
    );
    let grant = TokenGrant {
        namespaces: caller.granted.clone(),
        issuer: caller.issuer.clone().unwrap_or(serde_json::Value::Null),
        restricted: false,
    };
    store.insert_granted_token(&issued.record, &grant).await?;
    Ok(issued)
}

/// Longest life of a token minted by trusted publishing.
pub const MINTED_TOKEN_SECS: u64 = 15 * 60;

/// Create and store a token restricted by `grant`: scope `agents:write` only, expiring
/// `MINTED_TOKEN_SECS` from now (trusted publishing).
pub async fn issue_granted_token(
    store: &dyn Store,
    owner: &str,
    grant: &TokenGrant,
) -> StoreResult<IssuedToken> {
    let issued = new_token(owner, &[Scope::AgentsWrite], Some(MINTED_TOKEN_SECS));
    store.insert_granted_token(&issued.record, grant).await?;
    Ok(issued)
}

/// The authenticated caller of a request: the master key, or a token with its owner, scopes
/// and, for a token minted by trusted publishing, its namespaces and the identity it came from
/// (`GET /api/me` shows all of it).
#[derive(Debug, Clone)]
pub struct Caller {
    pub owner: String,
    pub scopes: Vec<Scope>,
    pub is_master: bool,
    /// The token's id (`tok_…`); `None` for the master key.
    pub token_id: Option<String>,
    pub expires_at: Option<Timestamp>,
    /// The namespaces the caller may write in; `None`: not restricted.
    pub namespaces: Option<Vec<String>>,
    /// The identity a minted token or a sign-in came from (a JSON object with its `kind`).
    pub issuer: Option<serde_json::Value>,
    /// The namespaces the caller's identity grants: held, whatever `namespaces` restricts.
    pub granted: Vec<String>,
    /// For a signed-in browser: its session.
    pub session: Option<SessionRef>,
}

/// The session a signed-in browser's request came with.
#[derive(Debug, Clone)]
pub struct SessionRef {
    /// `ses_…`.
    pub id: String,
    /// What the browser sends back in `X-CSRF-Token` with every write.
    pub csrf_token: String,
}

impl Caller {
    /// Whether the caller may see and revoke the owner's token `id`: any of them, unless the
    /// caller's own token is restricted to namespaces (a CI job's), which manages only itself.
    pub fn manages_token(&self, id: &str) -> bool {
        self.namespaces.is_none() || self.token_id.as_deref() == Some(id)
    }

    /// The master key: every scope, every agent.
    pub fn master() -> Self {
        Self {
            scopes: Scope::ALL.to_vec(),
            is_master: true,
            ..Self::person(MASTER_OWNER)
        }
    }

    /// A person (or owner) with the default scopes and nothing else yet.
    pub fn person(owner: &str) -> Self {
        Self {
            owner: owner.to_owned(),
            scopes: Scope::DEFAULT.to_vec(),
            is_master: false,
            token_id: None,
            expires_at: None,
            namespaces: None,
            issuer: None,
            granted: Vec::new(),
            session: None,
        }
    }

    /// The caller as the registry core sees it.
    pub fn actor(&self) -> Actor {
        Actor {
            owner: self.owner.clone(),
            is_master: self.is_master,
            namespaces: self.namespaces.clone(),
            identity: self.issuer.clone(),
            granted: self.granted.clone(),
        }
    }

    /// 403 unless the caller holds `scope`.
    pub fn require(&self, scope: Scope) -> ApiResult<()> {
        if self.is_master || self.scopes.contains(&scope) {
            Ok(())
        } else {
            Err(ApiError::forbidden(format!(
                "this token lacks the '{}' scope",
                scope.as_str()
            )))
        }
    }
}

/// The bearer secret of a request, if it carries one.
pub fn bearer_secret(parts: &Parts) -> ApiResult<&str> {
    let header = parts
        .headers
        .get(AUTHORIZATION)
        .ok_or_else(|| ApiError::unauthorized("missing Authorization: Bearer token"))?;
    let value = header
        .to_str()
        .map_err(|_| ApiError::unauthorized("malformed Authorization header"))?;
    let (scheme, secret) = value
        .split_once(' ')
        .ok_or_else(|| ApiError::unauthorized("expected Authorization: Bearer <token>"))?;
    if !scheme.eq_ignore_ascii_case("bearer") || secret.trim().is_empty() {
        return Err(ApiError::unauthorized(
            "expected Authorization: Bearer <token>",
        ));
    }
    Ok(secret.trim())
}

/// What checks bearer secrets: the tokens in the store, the master key, and the per-token rate
/// limit. Handlers reach it through the application state (`FromRef`), so this module needs
/// nothing of that state.
pub struct Authenticator {
    store: Arc<dyn Store>,
    /// SHA-256 (hex) of the master key, when one is configured.
    master_key_hash: Option<String>,
    token_limit: Arc<TokenRateLimit>,
}

impl Authenticator {
    pub fn new(
        store: Arc<dyn Store>,
        master_key: Option<&str>,
        token_limit: Arc<TokenRateLimit>,
    ) -> Self {
        Self {
            store,
            master_key_hash: master_key.filter(|key| !key.is_empty()).map(hash_secret),
            token_limit,
        }
    }

    /// Whether a master key is configured.
    pub fn has_master_key(&self) -> bool {
        self.master_key_hash.is_some()
    }

    /// Resolve a bearer secret to a caller: the master key, or a live token from the store.
    pub async fn authenticate(&self, secret: &str) -> ApiResult<Caller> {
        let hash = hash_secret(secret);
        if let Some(master_hash) = &self.master_key_hash
            && bool::from(hash.as_bytes().ct_eq(master_hash.as_bytes()))
        {
            return Ok(Caller::master());
        }
        // The lookup is by hash, so timing reveals nothing about the secret itself.
        let token = self.store.find_token_by_hash(&hash).await?;
        match token {
            Some(token) if token.is_live(Timestamp::now()) => {
                self.token_limit.check(&token.id)?;
                let grant = self.store.find_token_grant(&token.id).await?;
                let (namespaces, issuer, granted) = match grant {
                    Some(grant) if grant.restricted => (
                        Some(grant.namespaces.clone()),
                        Some(grant.issuer),
                        grant.namespaces,
                    ),
                    Some(grant) => (None, Some(grant.issuer), grant.namespaces),
                    None => (None, None, Vec::new()),
                };
                Ok(Caller {
                    owner: token.owner,
                    scopes: token.scopes,
                    is_master: false,
                    token_id: Some(token.id),
                    expires_at: token.expires_at,
                    namespaces,
                    issuer,
                    granted,
                    session: None,
                })
            }
            Some(token) if token.revoked_at.is_some() => {
                Err(ApiError::unauthorized("this token has been revoked"))
            }
            Some(_) => Err(ApiError::unauthorized("this token has expired")),
            None => Err(ApiError::unauthorized("unknown token")),
        }
    }
}

impl Authenticator {
    /// Resolve a session cookie's secret to a caller: the signed-in person, with every scope
    /// but the operators'. A write (any method but GET, HEAD and OPTIONS) must carry the
    /// session's CSRF token in `X-CSRF-Token`.
    pub async fn authenticate_session(
        &self,
        secret: &str,
        method: &axum::http::Method,
        csrf_header: Option<&str>,
    ) -> ApiResult<Caller> {
        let now = Timestamp::now();
        let Some(record) = self
            .store
            .find_web_session(&hash_secret(secret), now)
            .await?
        else {
            return Err(ApiError::unauthorized(
                "this sign-in has expired or was signed out; sign in again",
            ));
        };
        let data: crate::signin::SessionData = serde_json::from_str(&record.data)
            .map_err(|_| ApiError::unauthorized("this sign-in cannot be read; sign in again"))?;
        self.token_limit.check(&record.id)?;
        let safe = matches!(
            *method,
            axum::http::Method::GET | axum::http::Method::HEAD | axum::http::Method::OPTIONS
        );
        let csrf_ok = csrf_header
            .is_some_and(|sent| bool::from(sent.as_bytes().ct_eq(data.csrf_token.as_bytes())));
        if !safe && !csrf_ok {
            return Err(ApiError::forbidden(
                "a write from a signed-in browser needs the session's CSRF token in the \
                 X-CSRF-Token header (GET /api/me gives it)",
            ));
        }
        Ok(Caller {
            owner: record.owner,
            scopes: Scope::DEFAULT.to_vec(),
            is_master: false,
            token_id: None,
            expires_at: Some(record.expires_at),
            namespaces: None,
            issuer: Some(data.identity),
            granted: data.namespaces,
            session: Some(SessionRef {
                id: record.id,
                csrf_token: data.csrf_token,
            }),
        })
    }
}

impl Authenticator {
    /// Whose private agents `caller` reads: its own, the namespaces its identity grants and
    /// its organisations'; every agent for the master key.
    pub async fn viewer_of(&self, caller: &Caller) -> ApiResult<Viewer> {
        Ok(self.store.viewer_of(&caller.actor()).await?)
    }

    /// The viewer a read path serves, and the caller of a bearer token: anonymous without
    /// credentials; with a bearer token, its caller (an invalid token is 401, as on every other
    /// path); with a session cookie, the signed-in person, or anonymous when the session has
    /// ended (a stale cookie must not break public pages).
    pub async fn viewer(&self, parts: &Parts) -> ApiResult<(Viewer, Option<Caller>)> {
        if parts.headers.get(AUTHORIZATION).is_some() {
            let caller = self.authenticate(bearer_secret(parts)?).await?;
            return Ok((self.viewer_of(&caller).await?, Some(caller)));
        }
        let Some(secret) = session_secret(parts) else {
            return Ok((Viewer::Anonymous, None));
        };
        // Reads only: a session's CSRF token guards writes, and what a read shows goes only to
        // the page that asked (the cookie is SameSite=Lax, so no other site's POST carries it).
        // The session's caller is not kept: a write still checks its CSRF token.
        match self
            .authenticate_session(&secret, &axum::http::Method::GET, None)
            .await
        {
            Ok(caller) => Ok((self.viewer_of(&caller).await?, None)),
            Err(err) if err.code == crate::error::ErrorCode::RateLimited => Err(err),
            Err(_) => Ok((Viewer::Anonymous, None)),
        }
    }
}

/// Resolve who a read request comes from (`Authenticator::viewer`) once, before its handler:
/// the `Viewer` extractor then reads it. A bearer token that is not valid is refused here.
pub async fn resolve_viewer(
    axum::extract::State(auth): axum::extract::State<Arc<Authenticator>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let (mut parts, body) = request.into_parts();
    match auth.viewer(&parts).await {
        Ok((viewer, caller)) => {
            parts.extensions.insert(viewer);
            // A handler that needs the caller too finds it here, so its token is counted once
            // by the rate limit.
            if let Some(caller) = caller {
                parts.extensions.insert(caller);
            }
            next.run(axum::extract::Request::from_parts(parts, body))
                .await
        }
        Err(err) => err.into_response(),
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Viewer {
    type Rejection = std::convert::Infallible;

    /// The viewer `resolve_viewer` found; anonymous on a path it does not guard.
    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        Ok(parts
            .extensions
            .get::<Viewer>()
            .cloned()
            .unwrap_or_default())
    }
}

/// The header a signed-in browser's writes carry the session's CSRF token in.
pub const CSRF_HEADER: &str = "x-csrf-token";

/// The name of the cookie a signed-in browser carries.
pub const SESSION_COOKIE: &str = "ar_session";

/// The secret of a request's session cookie, if it carries one.
pub fn session_secret(parts: &Parts) -> Option<String> {
    axum_extra::extract::cookie::CookieJar::from_headers(&parts.headers)
        .get(SESSION_COOKIE)
        .map(|cookie| cookie.value().to_owned())
        .filter(|value| !value.is_empty())
}

/// Per-token token bucket for authenticated paths (the master key is not limited).
pub struct TokenRateLimit {
    limiter: Option<governor::DefaultKeyedRateLimiter<String>>,
}

impl TokenRateLimit {
    pub fn new(per_minute: u32, burst: u32) -> Self {
        let limiter = std::num::NonZeroU32::new(per_minute).map(|per_minute| {
            let burst = std::num::NonZeroU32::new(burst).unwrap_or(per_minute);
            governor::RateLimiter::keyed(governor::Quota::per_minute(per_minute).allow_burst(burst))
        });
        Self { limiter }
    }

    /// 429 `rate_limited` with the seconds to wait when token `id` is over its limit.
    pub fn check(&self, id: &str) -> ApiResult<()> {
        use governor::clock::{Clock, DefaultClock};
        let Some(limiter) = &self.limiter else {
            return Ok(());
        };
        limiter.check_key(&id.to_owned()).map_err(|not_until| {
            let wait = not_until
                .wait_time_from(DefaultClock::default().now())
                .as_secs()
                .max(1);
            let mut error = ApiError::new(
                crate::error::ErrorCode::RateLimited,
                format!("too many requests with this token; retry in {wait} s"),
            );
            error.retry_after_secs = Some(wait);
            error
        })
    }

    /// Forget tokens whose buckets are full again, every minute until the limiter is dropped.
    pub fn prune_periodically(limit: &std::sync::Arc<Self>) {
        crate::middleware::prune_every_minute(limit, |limit| limit.limiter.as_ref());
    }
}

impl<S> FromRequestParts<S> for Caller
where
    S: Send + Sync,
    Arc<Authenticator>: FromRef<S>,
{
    type Rejection = ApiError;

    /// A bearer token when the request has an `Authorization` header; otherwise a signed-in
    /// browser's session cookie.
    async fn from_request_parts(parts: &mut Parts, state: &S) -> ApiResult<Self> {
        let authenticator = Arc::<Authenticator>::from_ref(state);
        let caller = if let Some(caller) = parts.extensions.get::<Caller>() {
            // Already authenticated by `resolve_viewer` (a bearer token).
            caller.clone()
        } else if parts.headers.get(AUTHORIZATION).is_none()
            && let Some(secret) = session_secret(parts)
        {
            let csrf = parts
                .headers
                .get(CSRF_HEADER)
                .and_then(|value| value.to_str().ok());
            authenticator
                .authenticate_session(&secret, &parts.method, csrf)
                .await?
        } else {
            let secret = bearer_secret(parts)?.to_owned();
            authenticator.authenticate(&secret).await?
        };
        // The audit log names whoever this request writes as.
        crate::audit::set_actor(|| crate::audit::AuditActor {
            owner: caller.owner.clone(),
            kind: if caller.is_master {
                "master"
            } else if caller.session.is_some() {
                "session"
            } else {
                "token"
            },
            token_id: caller.token_id.clone(),
            session_id: caller.session.as_ref().map(|session| session.id.clone()),
        });
        Ok(caller)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_prefixed_random_and_hashed_to_hex_sha256() {
        let a = random_secret("ar_");
        let b = random_secret("ar_");
        assert!(a.starts_with("ar_"));
        assert_eq!(a.len(), 3 + 64);
        assert_ne!(a, b);
        assert_eq!(hash_secret(&a).len(), 64);
        assert_ne!(hash_secret(&a), a);
    }

    #[test]
    fn scopes_round_trip_through_their_names() {
        for scope in Scope::ALL {
            assert_eq!(Scope::parse(scope.as_str()), Some(scope));
        }
        assert_eq!(Scope::parse("admin"), None);
    }

    #[test]
    fn owner_names_are_checked() {
        assert_eq!(parse_owner(" alice ").as_deref(), Ok("alice"));
        assert!(parse_owner("").is_err());
        assert!(parse_owner("a b").is_err());
        assert!(parse_owner(SYSTEM_OWNER).is_err());
        assert!(parse_owner(MASTER_OWNER).is_err());
        assert!(parse_owner(&"x".repeat(65)).is_err());
    }
}
