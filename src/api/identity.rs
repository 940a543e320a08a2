//! Who the caller is (`GET /api/me`), and trusted publishing: a CI system's OIDC ID token
//! exchanged for a short-lived registry token restricted to the namespaces its identity
//! grants (`POST /api/auth/oidc`). See docs/publishing.md.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::auth::{self, Caller, Scope};
use crate::domain::FieldError;
use crate::domain::trusted_issuer;
use crate::error::{ApiError, ApiResult};
use crate::extract::JsonBody;
use crate::state::AppState;
use crate::timestamp::Timestamp;

/// What a caller is: the master key, or a token.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CallerKind {
    Master,
    Token,
    /// A person signed in to the web console (a session cookie).
    Session,
}

/// The caller of a request, as every authenticated path sees it.
#[derive(Debug, Serialize, ToSchema)]
pub struct CallerView {
    pub kind: CallerKind,
    /// The owner it acts as: `admin` for the master key; for a token minted by trusted
    /// publishing, its namespace (`io.github.acme`).
    pub owner: String,
    /// The token's id (`tok_…`); absent for the master key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_id: Option<String>,
    pub scopes: Vec<Scope>,
    /// The namespaces it may write in (a package is in namespace `N` when it is `N` or starts
    /// with `N.`); `null`: not restricted.
    #[schema(value_type = Option<Vec<String>>)]
    pub namespaces: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Timestamp>,
    /// The identity behind the caller: for a token minted by trusted publishing, the CI
    /// identity (`kind` `github`, `gitlab` or `generic`, and the claims that name it, such as
    /// `repository`, `repository_owner` and `repository_owner_id`); for a signed-in person or
    /// their tokens, who signed in (`kind` `github` with `login`, `id` and `orgs`, or `oidc`
    /// with `provider`, `issuer` and `sub`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub issuer: Option<Value>,
    /// The namespaces the caller's identity grants (a GitHub sign-in's `io.github.<login>` and
    /// organisations, a CI identity's): held, whatever `namespaces` restricts.
    pub granted_namespaces: Vec<String>,
    /// For a signed-in browser: the session's id (`ses_…`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// For a signed-in browser: what every write must send in `X-CSRF-Token`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub csrf_token: Option<String>,
    /// `open` or `owned`: whether publishing needs a namespace the owner holds.
    pub namespace_policy: String,
    /// The namespaces the owner holds, proven (`POST /api/namespaces`) or assigned; a token
    /// restricted to `namespaces` also publishes under those.
    pub owned_namespaces: Vec<String>,
}

impl From<&Caller> for CallerView {
    fn from(caller: &Caller) -> Self {
        let mut scopes = caller.scopes.clone();
        scopes.sort_by_key(|scope| scope.as_str());
        Self {
            kind: if caller.is_master {
                CallerKind::Master
            } else if caller.session.is_some() {
                CallerKind::Session
            } else {
                CallerKind::Token
            },
            owner: caller.owner.clone(),
            token_id: caller.token_id.clone(),
            scopes,
            namespaces: caller.namespaces.clone(),
            expires_at: caller.expires_at,
            issuer: caller.issuer.clone(),
            granted_namespaces: caller.granted.clone(),
            session_id: caller.session.as_ref().map(|session| session.id.clone()),
            csrf_token: caller
                .session
                .as_ref()
                .map(|session| session.csrf_token.clone()),
            namespace_policy: String::new(),
            owned_namespaces: Vec::new(),
        }
    }
}

/// Who the request's caller is: its kind, owner, scopes, namespace restriction, and the
/// namespaces its owner holds.
#[utoipa::path(get, path = "/api/me", tag = "tokens",
    responses((status = 200, body = CallerView, description = "The caller")),
    security(("bearer" = [])))]
pub async fn me(State(state): State<AppState>, caller: Caller) -> ApiResult<Json<CallerView>> {
    let mut view = CallerView::from(&caller);
    view.namespace_policy = state.registry.namespace_policy().as_str().to_owned();
    view.owned_namespaces = state
        .registry
        .namespaces_of(&caller.owner)
        .await?
        .into_iter()
        .filter(|claim| claim.verified_at.is_some())
        .map(|claim| claim.namespace)
        .collect();
    Ok(Json(view))
}

/// How long a minted token stays listed after it expired.
const MINTED_KEPT_AFTER_EXPIRY_SECS: i64 = 24 * 60 * 60;

/// A token minted by trusted publishing, with its secret (shown this once).
#[derive(Debug, Serialize, ToSchema)]
pub struct MintedToken {
    /// The bearer secret (`ar_…`).
    pub token: String,
    /// Its id (`tok_…`), to revoke it early.
    pub token_id: String,
    /// At most 15 minutes from now.
    pub expires_at: Timestamp,
    /// `agents:write` only.
    pub scopes: Vec<Scope>,
    /// The namespaces its writes are restricted to.
    pub namespaces: Vec<String>,
    /// The owner of what it publishes: the namespace.
    pub owner: String,
}

/// Exchange a CI system's OIDC ID token for a registry token (trusted publishing).
#[utoipa::path(post, path = "/api/auth/oidc", tag = "tokens",
    request_body(content = crate::wire::schema::OidcExchangeRequest, description = "The ID token, whose audience (`aud`) is the registry's public URL"),
    responses((status = 201, body = MintedToken, description = "A token with scope `agents:write`, valid 15 minutes, restricted to the namespaces the ID token's identity grants"),
              (status = 401, body = crate::error::Problem, description = "`unauthorized`: the ID token is garbled, expired, not yet valid, unsigned or HMAC-signed, badly signed, for another audience, from an issuer this registry does not trust, or grants no namespace; `WWW-Authenticate: Bearer error=\"invalid_token\"` says why"),
              (status = 502, body = crate::error::Problem, description = "`upstream_error`: the issuer's keys cannot be fetched")))]
pub async fn exchange(
    State(state): State<AppState>,
    JsonBody(body): JsonBody,
) -> ApiResult<(StatusCode, Json<MintedToken>)> {
    let token = match body.as_object().map(|object| object.get("token")) {
        None => {
            return Err(ApiError::validation(vec![FieldError::new(
                "body",
                "must be a JSON object",
            )]));
        }
        Some(Some(Value::String(token))) if !token.trim().is_empty() => token.trim(),
        Some(Some(_)) => {
            return Err(ApiError::validation(vec![FieldError::new(
                "token",
                "must be a non-empty string",
            )]));
        }
        Some(None) => {
            return Err(ApiError::validation(vec![FieldError::new(
                "token",
                "is required",
            )]));
        }
    };
    if !state.publishing.is_enabled() {
        return Err(ApiError::invalid_token(
            "this registry trusts no OIDC issuer (the operator configures --trusted-issuer)",
        ));
    }
    let verified = state.publishing.verify(token).await?;
    let grant = trusted_issuer::grant(verified.issuer.kind, &verified.claims)
        .map_err(|reason| ApiError::invalid_token(crate::domain::truncate(&reason, 300)))?;
    // The owner is the namespace: what CI publishes belongs to the identity, not to a person.
    let namespace = grant.namespaces.first().cloned().unwrap_or_default();
    let owner = auth::parse_owner(&namespace).map_err(|message| {
        ApiError::invalid_token(format!(
            "the namespace '{namespace}' cannot own agents: {message}"
        ))
    })?;
    state.exchange_limit.check(&owner)?;
    // Minted tokens that expired a day ago are of no use to anyone: each exchange clears them,
    // so a registry that CI jobs publish to every day does not keep every job's token.
    let stale = Timestamp::from_micros(
        Timestamp::now()
            .micros()
            .saturating_sub(MINTED_KEPT_AFTER_EXPIRY_SECS * 1_000_000),
    );
    let purged = state.store.purge_expired_minted_tokens(stale).await?;
    if purged > 0 {
        tracing::debug!(purged, "expired minted tokens purged");
    }
    let issued = auth::issue_granted_token(
        state.store.as_ref(),
        &owner,
        &crate::store::TokenGrant {
            namespaces: grant.namespaces.clone(),
            issuer: grant.identity.clone(),
            restricted: true,
        },
    )
    .await?;
    tracing::info!(token.id = %issued.record.id, owner = %owner,
        issuer = %verified.issuer.issuer, identity = %grant.identity,
        "token minted by trusted publishing");
    Ok((
        StatusCode::CREATED,
        Json(MintedToken {
            token: issued.secret,
            token_id: issued.record.id,
            expires_at: issued
                .record
                .expires_at
                .unwrap_or_else(|| Timestamp::now().plus_secs(auth::MINTED_TOKEN_SECS)),
            scopes: issued.record.scopes,
            namespaces: grant.namespaces,
            owner,
        }),
    ))
}
