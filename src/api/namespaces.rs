//! Namespaces an owner claims and proves before publishing in them (`--namespace-policy
//! owned`): `POST /api/namespaces` answers the token to publish at the namespace's domain,
//! `POST /api/namespaces/{namespace}/verify` looks for it. The master key assigns a namespace
//! to any owner without a proof. See docs/publishing.md.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::auth::{Caller, Scope};
use crate::domain::{FieldError, Namespace};
use crate::error::{ApiError, ApiResult, ErrorCode};
use crate::extract::{JsonBody, PathParam};
use crate::registry::RegistryError;
use crate::state::AppState;
use crate::store::{NamespaceRecord, StoreError};
use crate::timestamp::Timestamp;
use crate::verify::{TXT_PREFIX, file_url};

/// An owner's claim on a namespace, and how to prove it.
#[derive(Debug, Serialize, ToSchema)]
pub struct NamespaceClaim {
    /// `com.example`: it covers `com.example` and every package name under `com.example.`.
    pub namespace: String,
    pub owner: String,
    /// The domain whose control proves it (`example.com`; `hub.example.com` for
    /// `com.example.hub`).
    pub domain: String,
    /// Proven: the owner publishes under it.
    pub verified: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verified_at: Option<Timestamp>,
    /// How it was proven: the file's URL, `dns:<domain>`, `agent:<id>` (an agent of the
    /// domain verified) or `assigned` (by the master key).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proof: Option<String>,
    /// What to publish: a line of the file, or the value of the TXT record.
    pub token: String,
    /// Where the file goes: the token on a line of its own (or after `agent-registry-verify=`).
    pub file_url: Option<String>,
    /// The TXT record of `domain` that proves it instead: `agent-registry-verify=<token>`.
    pub dns_txt: String,
    /// Where to ask the registry to look once the proof is in place.
    pub verify_url: String,
}

impl NamespaceClaim {
    fn of(record: NamespaceRecord, state: &AppState) -> Self {
        let domain = Namespace::parse(&record.namespace)
            .map(|namespace| namespace.domain())
            .unwrap_or_default();
        let file_url = file_url(&state.config.upstreams.verify_url_template, &domain)
            .ok()
            .map(|url| url.to_string());
        Self {
            verify_url: format!(
                "{}/api/namespaces/{}/verify",
                state.config.base_url(),
                record.namespace
            ),
            dns_txt: format!("{TXT_PREFIX}{}", record.token),
            file_url,
            domain,
            verified: record.verified_at.is_some(),
            verified_at: record.verified_at,
            proof: record.proof,
            token: record.token,
            owner: record.owner,
            namespace: record.namespace,
        }
    }
}

/// The caller's namespaces.
#[derive(Debug, Serialize, ToSchema)]
pub struct NamespaceList {
    /// `open` or `owned`: whether publishing needs a namespace.
    pub policy: String,
    pub namespaces: Vec<NamespaceClaim>,
}

/// Claim a namespace: answers the token that proves it (`201`, or `200` when the caller had
/// claimed it already). With the master key and an `owner`, assigns it to that owner, proven.
#[utoipa::path(post, path = "/api/namespaces", tag = "management",
    request_body(content = crate::wire::schema::ClaimNamespaceRequest, description = r#"`{"namespace": "com.example"}`; the master key may add `"owner": "alice"` to assign it"#),
    responses((status = 201, body = NamespaceClaim, description = "Claimed (or assigned): publish `token` in `file_url` or as `dns_txt`, then POST `verify_url`"),
              (status = 200, body = NamespaceClaim, description = "The caller's existing claim"),
              (status = 403, body = crate::error::Problem, description = "`forbidden`: a token without `agents:write`, or `owner` without the master key"),
              (status = 409, body = crate::error::Problem, description = "`namespace_taken`: another owner holds it"),
              (status = 422, body = crate::error::Problem, description = "`validation_failed`: not a namespace (`com.example`), or a shared suffix such as `io.github`")),
    security(("bearer" = [])))]
pub async fn claim_namespace(
    State(state): State<AppState>,
    caller: Caller,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    caller.require(Scope::AgentsWrite)?;
    let namespace = namespace_field(&body)?;
    let owner = match body.get("owner") {
        None | Some(Value::Null) => caller.owner.clone(),
        Some(Value::String(owner)) if caller.is_master => {
            crate::auth::parse_owner(owner).map_err(|message| invalid("owner", message))?
        }
        Some(Value::String(_)) => {
            return Err(ApiError::forbidden(
                "only the master key assigns a namespace to another owner",
            ));
        }
        Some(_) => return Err(invalid("owner", "must be a string")),
    };
    if let Some(holder) = state.registry.namespace_holder(&namespace).await?
        && holder.owner != owner
    {
        return Err(taken(&namespace));
    }
    let existing = state
        .registry
        .namespaces_of(&owner)
        .await?
        .into_iter()
        .any(|claim| claim.namespace == namespace.as_str());
    let record = if caller.is_master && owner != caller.owner {
        state
            .registry
            .prove_namespace(&namespace, &owner, "assigned", Timestamp::now())
            .await
            .map_err(|err| conflict_is_taken(err, &namespace))?
    } else {
        state.registry.claim_namespace(&namespace, &owner).await?
    };
    tracing::info!(namespace = %namespace, owner = %owner, "namespace claimed");
    let status = if existing {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok((status, Json(NamespaceClaim::of(record, &state))).into_response())
}

/// Look for the claim's token in the well-known file of the namespace's domain, then in its
/// DNS TXT records; proven, the namespace is the caller's to publish under.
#[utoipa::path(post, path = "/api/namespaces/{namespace}/verify", tag = "management",
    params(("namespace" = String, Path, description = "The namespace, `com.example`")),
    responses((status = 200, body = NamespaceClaim, description = "Proven"),
              (status = 404, body = crate::error::Problem, description = "`namespace_not_found`: the caller has not claimed it"),
              (status = 409, body = crate::error::Problem, description = "`namespace_taken`: another owner holds it"),
              (status = 422, body = crate::error::Problem, description = "`verification_failed`, saying what was checked")),
    security(("bearer" = [])))]
pub async fn verify_namespace(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(name): PathParam,
) -> ApiResult<Json<NamespaceClaim>> {
    caller.require(Scope::AgentsWrite)?;
    let namespace = Namespace::parse(&name).map_err(|_| not_claimed(&name))?;
    let own = state
        .registry
        .namespaces_of(&caller.owner)
        .await?
        .into_iter()
        .find(|claim| claim.namespace == namespace.as_str());
    let claim = match own {
        Some(claim) => claim,
        // The master key sees whoever holds it (one it assigned, say).
        None if caller.is_master => state
            .registry
            .namespace_holder(&namespace)
            .await?
            .ok_or_else(|| not_claimed(namespace.as_str()))?,
        None => return Err(not_claimed(namespace.as_str())),
    };
    if claim.verified_at.is_some() {
        return Ok(Json(NamespaceClaim::of(claim, &state)));
    }
    if state.registry.namespace_holder(&namespace).await?.is_some() {
        return Err(taken(&namespace));
    }
    let proof = crate::verify::verify_domain(
        &state.outbound,
        &state.config.upstreams,
        &namespace.domain(),
        &claim.token,
    )
    .await?;
    let record = state
        .registry
        .prove_namespace(
            &namespace,
            &caller.owner,
            &proof.describe(),
            Timestamp::now(),
        )
        .await
        .map_err(|err| conflict_is_taken(err, &namespace))?;
    tracing::info!(namespace = %namespace, owner = %caller.owner, proof = ?proof, "namespace verified");
    Ok(Json(NamespaceClaim::of(record, &state)))
}

/// The caller's namespace claims, proven or not (the master key's own: it needs none).
#[utoipa::path(get, path = "/api/namespaces", tag = "management",
    responses((status = 200, body = NamespaceList, description = "The claims and the policy")),
    security(("bearer" = [])))]
pub async fn list_namespaces(
    State(state): State<AppState>,
    caller: Caller,
) -> ApiResult<Json<NamespaceList>> {
    let namespaces = state
        .registry
        .namespaces_of(&caller.owner)
        .await?
        .into_iter()
        .map(|record| NamespaceClaim::of(record, &state))
        .collect();
    Ok(Json(NamespaceList {
        policy: state.registry.namespace_policy().as_str().to_owned(),
        namespaces,
    }))
}

/// Give up a claim (proven or not); the namespace is free for others to prove. With the master
/// key, every claim on the namespace goes (a takedown).
#[utoipa::path(delete, path = "/api/namespaces/{namespace}", tag = "management",
    params(("namespace" = String, Path, description = "The namespace, `com.example`")),
    responses((status = 204, description = "Released"),
              (status = 404, body = crate::error::Problem, description = "`namespace_not_found`: the caller has not claimed it")),
    security(("bearer" = [])))]
pub async fn release_namespace(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(name): PathParam,
) -> ApiResult<StatusCode> {
    caller.require(Scope::AgentsWrite)?;
    let namespace = Namespace::parse(&name).map_err(|_| not_claimed(&name))?;
    let owner = (!caller.is_master).then_some(caller.owner.as_str());
    if !state.registry.release_namespace(&namespace, owner).await? {
        return Err(not_claimed(namespace.as_str()));
    }
    tracing::info!(namespace = %namespace, owner = %caller.owner, "namespace released");
    Ok(StatusCode::NO_CONTENT)
}

fn namespace_field(body: &Value) -> ApiResult<Namespace> {
    match body.get("namespace") {
        Some(Value::String(text)) => {
            Namespace::parse(text).map_err(|message| invalid("namespace", message))
        }
        Some(_) => Err(invalid("namespace", "must be a string such as com.example")),
        None => Err(invalid(
            "namespace",
            "is required (for example com.example)",
        )),
    }
}

fn invalid(field: &str, message: impl Into<String>) -> ApiError {
    ApiError::validation(vec![FieldError::new(field, message)])
}

fn taken(namespace: &Namespace) -> ApiError {
    ApiError::new(
        ErrorCode::NamespaceTaken,
        format!("another owner holds the namespace '{namespace}'"),
    )
}

fn conflict_is_taken(err: RegistryError, namespace: &Namespace) -> ApiError {
    match err {
        RegistryError::Store(StoreError::Conflict(_)) => taken(namespace),
        other => other.into(),
    }
}

fn not_claimed(namespace: &str) -> ApiError {
    ApiError::new(
        ErrorCode::NamespaceNotFound,
        format!(
            "you have no claim on the namespace '{}': claim it with POST /api/namespaces",
            crate::domain::truncate(namespace, 200)
        ),
    )
}
