//! Sign-in for people over HTTP: the providers (`GET /api/auth/providers`), the browser's
//! round trip (`/auth/login` → the provider → `/auth/callback`), signing out
//! (`POST /auth/logout`), and the CLI's GitHub device flow ending in a registry token
//! (`POST /api/auth/github`). See `crate::signin` for the rules.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::http::header::{CACHE_CONTROL, LOCATION, SET_COOKIE};
use axum::response::{IntoResponse, Response};
use axum_extra::extract::cookie::{Cookie, CookieJar, SameSite};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::auth::{self, Caller, SESSION_COOKIE, Scope};
use crate::domain::FieldError;
use crate::error::{ApiError, ApiResult};
use crate::extract::{JsonBody, Query};
use crate::signin::{ProviderView, SIGNIN_COOKIE, SIGNIN_SECS};
use crate::state::AppState;
use crate::timestamp::Timestamp;

/// The sign-in providers this registry is configured with.
#[derive(Debug, Serialize, ToSchema)]
pub struct ProviderList {
    pub providers: Vec<ProviderView>,
}

/// The providers a person may sign in with: the console shows one button each; the CLI reads
/// GitHub's client id for its device flow.
#[utoipa::path(get, path = "/api/auth/providers", tag = "tokens",
    responses((status = 200, body = ProviderList, description = "The configured providers (none: sign-in is off)")))]
pub async fn providers(State(state): State<AppState>) -> Json<ProviderList> {
    Json(ProviderList {
        providers: state.signin.providers(),
    })
}

#[derive(Debug, Deserialize)]
pub struct LoginQuery {
    provider: Option<String>,
    return_to: Option<String>,
}

/// Start signing in (a browser navigation): a cookie tying the sign-in to this browser, and a
/// redirect to the provider.
#[utoipa::path(get, path = "/auth/login", tag = "tokens",
    params(("provider" = String, Query, description = "A configured provider's name (`GET /api/auth/providers`)"),
           ("return_to" = Option<String>, Query, description = "A path on this site to return to once signed in (default `/console`); anything else is ignored")),
    responses((status = 303, description = "To the provider's sign-in page; sets the HttpOnly sign-in cookie (10 minutes)"),
              (status = 400, body = crate::error::Problem, description = "`invalid_parameter`: no provider named"),
              (status = 404, body = crate::error::Problem, description = "`not_found`: no such provider is configured"),
              (status = 429, body = crate::error::Problem, description = "`rate_limited`: too many sign-ins from this address"),
              (status = 502, body = crate::error::Problem, description = "`upstream_error`: the provider's discovery document cannot be read")))]
pub async fn login(State(state): State<AppState>, Query(query): Query<LoginQuery>) -> Response {
    let Some(provider) = query.provider else {
        return ApiError::invalid_parameter("provider is required (see GET /api/auth/providers)")
            .into_response();
    };
    match state
        .signin
        .start(&provider, query.return_to.as_deref())
        .await
    {
        Ok((key, url)) => {
            let cookie = cookie(SIGNIN_COOKIE, key, "/auth", SIGNIN_SECS, &state);
            redirect(url.as_str(), vec![cookie])
        }
        Err(err) => err.into_response(),
    }
}

#[derive(Debug, Deserialize)]
pub struct CallbackQuery {
    code: Option<String>,
    state: Option<String>,
    /// The issuer the answer says it is from (RFC 9207), checked when present.
    iss: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

/// The provider's answer (a browser navigation): on success a session cookie and a redirect to
/// where the sign-in started; otherwise back to the console with the reason (never a code or a
/// token).
#[utoipa::path(get, path = "/auth/callback", tag = "tokens",
    params(("code" = Option<String>, Query, description = "The authorization code"),
           ("state" = Option<String>, Query, description = "Must be the state this browser's sign-in made"),
           ("iss" = Option<String>, Query, description = "The provider's issuer (RFC 9207), checked when sent"),
           ("error" = Option<String>, Query, description = "The provider's refusal"),
           ("error_description" = Option<String>, Query, description = "Its explanation")),
    responses((status = 303, description = "Signed in: to `return_to`, setting the HttpOnly session cookie. Refused: to `/console?signin_error=…` with the reason"),
              (status = 429, body = crate::error::Problem, description = "`rate_limited`: too many sign-ins from this address")))]
pub async fn callback(
    State(state): State<AppState>,
    jar: CookieJar,
    Query(query): Query<CallbackQuery>,
) -> Response {
    let clear_signin = cookie(SIGNIN_COOKIE, String::new(), "/auth", 0, &state);
    let result = match (&query.error, &query.code, &query.state) {
        (Some(error), _, _) => Err(format!(
            "the provider refused: {}{}",
            crate::domain::truncate(error, 60),
            query
                .error_description
                .as_deref()
                .map(|d| format!(" ({})", crate::domain::truncate(d, 200)))
                .unwrap_or_default()
        )),
        (None, Some(code), Some(returned_state)) => state
            .signin
            .finish(
                jar.get(SIGNIN_COOKIE).map(Cookie::value),
                returned_state,
                code,
                query.iss.as_deref(),
            )
            .await
            .map_err(|err| err.detail),
        _ => Err("the provider's answer has no code and state".to_owned()),
    };
    match result {
        Ok(session) => {
            let max_age = session
                .expires_at
                .micros()
                .saturating_sub(Timestamp::now().micros())
                / 1_000_000;
            let session_cookie = cookie(
                SESSION_COOKIE,
                session.secret,
                "/",
                u64::try_from(max_age).unwrap_or(0),
                &state,
            );
            redirect(&session.return_to, vec![clear_signin, session_cookie])
        }
        Err(why) => {
            tracing::info!(reason = %why, "sign-in refused");
            let query =
                serde_urlencoded::to_string([("signin_error", why.as_str())]).unwrap_or_default();
            redirect(&format!("/console?{query}"), vec![clear_signin])
        }
    }
}

/// Sign out: the session ends now and its cookie is cleared. A write like any other from a
/// browser, so it needs the session's `X-CSRF-Token`.
#[utoipa::path(post, path = "/auth/logout", tag = "tokens",
    responses((status = 204, description = "Signed out; the session cookie is cleared"),
              (status = 401, body = crate::error::Problem, description = "`unauthorized`: no live session"),
              (status = 403, body = crate::error::Problem, description = "`forbidden`: the X-CSRF-Token header is missing or wrong"),
              (status = 429, body = crate::error::Problem, description = "`rate_limited`: too many requests in this session")),
    security(("bearer" = [])))]
pub async fn logout(State(state): State<AppState>, caller: Caller) -> ApiResult<Response> {
    if let Some(session) = &caller.session {
        state.signin.close_session(&session.id).await?;
        tracing::info!(session.id = %session.id, owner = %caller.owner, "signed out");
    }
    let clear = cookie(SESSION_COOKIE, String::new(), "/", 0, &state);
    Ok((StatusCode::NO_CONTENT, [(SET_COOKIE, clear)]).into_response())
}

/// A registry token for a person signed in to GitHub.
#[derive(Debug, Serialize, ToSchema)]
pub struct PersonToken {
    /// The bearer secret (`ar_…`), shown this once.
    pub token: String,
    pub token_id: String,
    pub owner: String,
    pub scopes: Vec<Scope>,
    /// The namespaces the GitHub identity grants (`io.github.<login>`, `io.github.<org>`).
    pub namespaces: Vec<String>,
    pub expires_at: Option<Timestamp>,
}

/// Exchange a GitHub access token (the CLI's device flow) for a registry token of the person
/// it belongs to.
#[utoipa::path(post, path = "/api/auth/github", tag = "tokens",
    request_body(content = crate::wire::schema::GithubExchangeRequest, description = "A GitHub OAuth access token from this registry's GitHub app, with the read:org scope"),
    responses((status = 201, body = PersonToken, description = "A token for the person: every scope but mirrors:read, 90 days"),
              (status = 401, body = crate::error::Problem, description = "`unauthorized`: GitHub does not accept the access token, or the owner name is held by another account"),
              (status = 404, body = crate::error::Problem, description = "`not_found`: GitHub sign-in is not configured"),
              (status = 429, body = crate::error::Problem, description = "`rate_limited`: too many sign-ins from this address, or tokens for this person"),
              (status = 502, body = crate::error::Problem, description = "`upstream_error`: GitHub cannot be reached")))]
pub async fn github_exchange(
    State(state): State<AppState>,
    JsonBody(body): JsonBody,
) -> ApiResult<(StatusCode, Json<PersonToken>)> {
    let access_token = match body.as_object().map(|object| object.get("access_token")) {
        None => {
            return Err(ApiError::validation(vec![FieldError::new(
                "body",
                "must be a JSON object",
            )]));
        }
        Some(Some(Value::String(token))) if !token.trim().is_empty() && token.len() <= 1024 => {
            token.trim().to_owned()
        }
        Some(Some(_)) => {
            return Err(ApiError::validation(vec![FieldError::new(
                "access_token",
                "must be a non-empty string of at most 1024 characters",
            )]));
        }
        Some(None) => {
            return Err(ApiError::validation(vec![FieldError::new(
                "access_token",
                "is required",
            )]));
        }
    };
    let person = state.signin.github_person(&access_token).await?;
    state.exchange_limit.check(&person.owner)?;
    let caller = Caller {
        granted: person.namespaces.clone(),
        issuer: Some(person.identity.clone()),
        ..Caller::person(&person.owner)
    };
    let issued = auth::issue_person_token(
        state.store.as_ref(),
        &caller,
        &[],
        Some(crate::api::tokens::PERSON_TOKEN_DAYS),
    )
    .await?;
    tracing::info!(token.id = %issued.record.id, owner = %person.owner,
        identity = %person.identity, "token minted for a GitHub sign-in");
    Ok((
        StatusCode::CREATED,
        Json(PersonToken {
            token: issued.secret,
            token_id: issued.record.id,
            owner: person.owner,
            scopes: issued.record.scopes,
            namespaces: person.namespaces,
            expires_at: issued.record.expires_at,
        }),
    ))
}

/// A `Set-Cookie` value: HttpOnly, SameSite=Lax, Secure when the public URL is https; a
/// `max_age` of 0 clears it.
fn cookie(name: &str, value: String, path: &str, max_age: u64, state: &AppState) -> String {
    Cookie::build((name.to_owned(), value))
        .path(path.to_owned())
        .http_only(true)
        .same_site(SameSite::Lax)
        .secure(state.signin.secure_cookies())
        .max_age(time::Duration::seconds(
            i64::try_from(max_age).unwrap_or(i64::MAX),
        ))
        .build()
        .to_string()
}

/// 303 to `location`, setting `cookies`, never cached.
fn redirect(location: &str, cookies: Vec<String>) -> Response {
    let mut response = (StatusCode::SEE_OTHER, [(CACHE_CONTROL, "no-store")]).into_response();
    if let Ok(value) = location.parse() {
        response.headers_mut().insert(LOCATION, value);
    }
    for cookie in cookies {
        if let Ok(value) = cookie.parse() {
            response.headers_mut().append(SET_COOKIE, value);
        }
    }
    response
}
