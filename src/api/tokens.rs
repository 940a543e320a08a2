//! API tokens: the master key creates them; owners list and revoke their own.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::auth::{self, Caller, Scope};
use crate::domain::FieldError;
use crate::error::{ApiError, ApiResult, ErrorCode};
use crate::extract::{JsonBody, PathParam};
use crate::state::AppState;
use crate::store::TokenRecord;
use crate::timestamp::Timestamp;

/// Longest token lifetime accepted, in days (ten years).
const MAX_EXPIRY_DAYS: u64 = 3650;

/// How long a token a signed-in person mints lives when they do not say.
pub const PERSON_TOKEN_DAYS: u32 = 90;

/// A token as listed: never its secret.
#[derive(Debug, Serialize, ToSchema)]
pub struct TokenView {
    /// `tok_…`, used to revoke it.
    pub id: String,
    pub owner: String,
    pub scopes: Vec<Scope>,
    pub created_at: Timestamp,
    pub expires_at: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<Timestamp>,
    /// The namespaces the token carries: those trusted publishing restricts it to (when
    /// `restricted`), or those a signed-in person's identity grants. Absent when none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<Vec<String>>,
    /// Whether the token writes only in `namespaces` (minted by trusted publishing).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restricted: Option<bool>,
    /// The identity it came from (a CI job's claims, or who signed in).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub identity: Option<Value>,
}

impl From<&TokenRecord> for TokenView {
    fn from(record: &TokenRecord) -> Self {
        Self {
            id: record.id.clone(),
            owner: record.owner.clone(),
            scopes: record.scopes.clone(),
            created_at: record.created_at,
            expires_at: record.expires_at,
            revoked_at: record.revoked_at,
            namespaces: None,
            restricted: None,
            identity: None,
        }
    }
}

/// A new token with its secret, shown this once.
#[derive(Debug, Serialize, ToSchema)]
pub struct CreatedToken {
    /// The bearer secret (`ar_…`). It is stored only as a hash and cannot be shown again.
    pub token: String,
    #[serde(flatten)]
    pub view: TokenView,
}

/// What a token list holds.
#[derive(Debug, Serialize, ToSchema)]
pub struct TokenList {
    pub tokens: Vec<TokenView>,
}

/// A validated token request.
pub struct TokenRequest {
    pub owner: String,
    pub scopes: Vec<Scope>,
    pub expires_in_days: Option<u32>,
}

impl TokenRequest {
    /// Parse `{"owner", "scopes"?, "expires_in_days"?}`, reporting every bad field.
    pub fn parse(body: &Value) -> Result<Self, Vec<FieldError>> {
        let mut errors = Vec::new();
        let Some(object) = body.as_object() else {
            return Err(vec![FieldError::new("body", "must be a JSON object")]);
        };
        let owner = match object.get("owner") {
            Some(Value::String(owner)) => auth::parse_owner(owner)
                .map_err(|message| errors.push(FieldError::new("owner", message)))
                .ok(),
            Some(_) => {
                errors.push(FieldError::new("owner", "must be a string"));
                None
            }
            None => {
                errors.push(FieldError::new("owner", "is required"));
                None
            }
        };
        let scopes = match object.get("scopes") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .filter_map(|(i, item)| {
                    let scope = item.as_str().and_then(Scope::parse);
                    if scope.is_none() {
                        errors.push(FieldError::new(
                            format!("scopes[{i}]"),
                            "must be one of agents:write, a2a, playground, mirrors:read",
                        ));
                    }
                    scope
                })
                .collect(),
            Some(_) => {
                errors.push(FieldError::new("scopes", "must be an array of strings"));
                Vec::new()
            }
        };
        let expires_in_days = match object.get("expires_in_days") {
            None | Some(Value::Null) => None,
            // A whole number, however written: JSON Schema's `integer` includes `90.0`.
            Some(value) => {
                match whole_number(value).filter(|d| (1..=MAX_EXPIRY_DAYS).contains(d)) {
                    Some(days) => u32::try_from(days).ok(),
                    None => {
                        errors.push(FieldError::new(
                            "expires_in_days",
                            format!("must be a whole number of days from 1 to {MAX_EXPIRY_DAYS}"),
                        ));
                        None
                    }
                }
            }
        };
        match owner {
            Some(owner) if errors.is_empty() => Ok(Self {
                owner,
                scopes,
                expires_in_days,
            }),
            _ => Err(errors),
        }
    }
}

/// A JSON number with no fractional part, as a `u64`.
fn whole_number(value: &Value) -> Option<u64> {
    value.as_u64().or_else(|| {
        value
            .as_f64()
            .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f <= u32::MAX as f64)
            .map(|f| f as u64)
    })
}

/// Create a token: the master key for any owner, or a person signed in to the console for
/// themselves (every scope but `mirrors:read`, 90 days unless they say; the namespaces their
/// sign-in grants travel with it).
#[utoipa::path(post, path = "/api/tokens", tag = "tokens",
    request_body(content = crate::wire::schema::CreateTokenRequest, description = "The owner, its scopes (none: every scope but the operators' `mirrors:read`) and its lifetime"),
    responses((status = 201, body = CreatedToken, description = "The token with its secret, shown this once"),
              (status = 403, body = crate::error::Problem, description = "`forbidden`: only the master key and signed-in people (a console session, with its `X-CSRF-Token`) create tokens"),
              (status = 422, body = crate::error::Problem, description = "`validation_failed`, with every invalid field")),
    security(("bearer" = [])))]
pub async fn create_token(
    State(state): State<AppState>,
    caller: Caller,
    JsonBody(body): JsonBody,
) -> ApiResult<(StatusCode, Json<CreatedToken>)> {
    if !caller.is_master && caller.session.is_none() {
        return Err(ApiError::forbidden(
            "tokens are created by the master key, or by a person signed in to the console",
        ));
    }
    // A signed-in person mints tokens for themselves: the owner is theirs whether named or not.
    let body = match (&caller.session, body) {
        (Some(_), Value::Object(mut object)) => {
            match object.get("owner") {
                None | Some(Value::Null) => {
                    object.insert("owner".to_owned(), Value::String(caller.owner.clone()));
                }
                Some(Value::String(owner)) if owner.trim() == caller.owner => {}
                Some(_) => {
                    return Err(ApiError::validation(vec![FieldError::new(
                        "owner",
                        format!(
                            "a signed-in person mints tokens for '{}' only",
                            caller.owner
                        ),
                    )]));
                }
            }
            Value::Object(object)
        }
        (_, body) => body,
    };
    let mut request = TokenRequest::parse(&body).map_err(ApiError::validation)?;
    let issued = if caller.is_master {
        auth::issue_token(
            state.store.as_ref(),
            &request.owner,
            &request.scopes,
            request.expires_in_days,
        )
        .await?
    } else {
        if request.scopes.contains(&Scope::MirrorsRead) {
            return Err(ApiError::validation(vec![FieldError::new(
                "scopes",
                "mirrors:read is the operators'; a signed-in person's tokens may hold agents:write, a2a and playground",
            )]));
        }
        request.expires_in_days = request.expires_in_days.or(Some(PERSON_TOKEN_DAYS));
        auth::issue_person_token(
            state.store.as_ref(),
            &caller,
            &request.scopes,
            request.expires_in_days,
        )
        .await?
    };
    tracing::info!(token.id = %issued.record.id, owner = %issued.record.owner, "token created");
    Ok((
        StatusCode::CREATED,
        Json(CreatedToken {
            token: issued.secret,
            view: TokenView::from(&issued.record),
        }),
    ))
}

/// List tokens: all of them for the master key, the caller's own otherwise (a token restricted to
/// namespaces, such as one minted for a CI job, sees only itself).
#[utoipa::path(get, path = "/api/tokens", tag = "tokens",
    responses((status = 200, body = TokenList)),
    security(("bearer" = [])))]
pub async fn list_tokens(
    State(state): State<AppState>,
    caller: Caller,
) -> ApiResult<Json<TokenList>> {
    let owner = (!caller.is_master).then_some(caller.owner.as_str());
    let tokens = state.store.list_tokens(owner).await?;
    let mut views = Vec::new();
    for token in tokens
        .iter()
        .filter(|token| caller.manages_token(&token.id))
    {
        let mut view = TokenView::from(token);
        if let Some(grant) = state.store.find_token_grant(&token.id).await? {
            view.namespaces = Some(grant.namespaces);
            view.restricted = Some(grant.restricted);
            view.identity = Some(grant.issuer).filter(|issuer| !issuer.is_null());
        }
        views.push(view);
    }
    Ok(Json(TokenList { tokens: views }))
}

/// Revoke a token, effective immediately.
#[utoipa::path(delete, path = "/api/tokens/{id}", tag = "tokens",
    params(("id" = String, Path, description = "Token id, `tok_…`")),
    responses((status = 204, description = "Revoked"), (status = 404, body = crate::error::Problem, description = "`token_not_found`: unknown, revoked, or not the caller's")),
    security(("bearer" = [])))]
pub async fn revoke_token(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(id): PathParam,
) -> ApiResult<StatusCode> {
    let owner = (!caller.is_master).then_some(caller.owner.as_str());
    let owned = state
        .store
        .list_tokens(owner)
        .await?
        .into_iter()
        .any(|token| token.id == id && token.revoked_at.is_none() && caller.manages_token(&id));
    if !owned || !state.store.revoke_token(&id, Timestamp::now()).await? {
        return Err(ApiError::new(
            ErrorCode::TokenNotFound,
            format!("no live token '{}'", crate::domain::truncate(&id, 64)),
        ));
    }
    tracing::info!(token.id = %id, "token revoked");
    Ok(StatusCode::NO_CONTENT)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn expires_in_days_is_a_whole_number_however_written() {
        let days = |value: Value| {
            TokenRequest::parse(&json!({"owner": "alice", "expires_in_days": value}))
                .map(|request| request.expires_in_days)
        };
        assert_eq!(days(json!(90)).ok(), Some(Some(90)));
        assert_eq!(days(json!(904.0)).ok(), Some(Some(904)));
        assert_eq!(days(json!(3650.0)).ok(), Some(Some(3650)));
        for refused in [
            json!(1.5),
            json!(0),
            json!(3651.0),
            json!(-1.0),
            json!("90"),
            json!(1e300),
        ] {
            assert!(days(refused.clone()).is_err(), "{refused}");
        }
    }
}
