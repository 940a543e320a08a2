//! Publishing bindings (`/api/bindings`): a package name or namespace bound to the CI
//! repository, and on GitHub the workflow, allowed to publish it by trusted publishing. Once a
//! binding covers a package, tokens minted from other CI identities may not write it (403
//! `binding_mismatch`). See docs/publishing.md.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::auth::{Caller, Scope};
use crate::domain::binding::BindingRule;
use crate::domain::trusted_issuer::IssuerKind;
use crate::domain::{FieldError, Namespace, PackageName};
use crate::error::{ApiError, ApiResult, ErrorCode};
use crate::extract::{JsonBody, PathParam};
use crate::state::AppState;
use crate::store::BindingRecord;
use crate::timestamp::Timestamp;

/// A binding.
#[derive(Debug, Serialize, ToSchema)]
pub struct Binding {
    /// `bnd_…`.
    pub id: String,
    /// The package name or namespace it covers (a namespace covers every name under it).
    pub scope: String,
    /// `github`, `gitlab` or `generic`: the trusted issuer's kind.
    pub kind: String,
    /// GitHub: `owner/repo`; GitLab: the project path; generic: the ID token's `sub`.
    pub repository: String,
    /// GitHub only: the workflow file that must run the job; absent: any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workflow: Option<String>,
    /// Who made it.
    pub owner: String,
    pub created_at: Timestamp,
}

impl From<BindingRecord> for Binding {
    fn from(record: BindingRecord) -> Self {
        Self {
            id: record.id,
            scope: record.scope,
            kind: record.rule.kind.as_str().to_owned(),
            repository: record.rule.repository,
            workflow: record.rule.workflow,
            owner: record.owner,
            created_at: record.created_at,
        }
    }
}

/// The caller's bindings (every binding for the master key).
#[derive(Debug, Serialize, ToSchema)]
pub struct BindingList {
    pub bindings: Vec<Binding>,
}

/// Bind a package name or namespace the caller holds to a CI identity.
#[utoipa::path(post, path = "/api/bindings", tag = "management",
    request_body(content = crate::wire::schema::CreateBindingRequest, description = r#"`{"scope": "io.github.acme.weather", "kind": "github", "repository": "acme/weather", "workflow": ".github/workflows/publish.yml"}`"#),
    responses((status = 201, body = Binding, description = "Bound: from now on only this identity's minted tokens (or another binding's) write the packages it covers"),
              (status = 403, body = crate::error::Problem, description = "`forbidden`: a token without `agents:write`, or one minted by trusted publishing; `namespace_not_owned`: the caller holds no namespace that covers `scope`"),
              (status = 409, body = crate::error::Problem, description = "`conflict`: the same binding exists"),
              (status = 422, body = crate::error::Problem, description = "`validation_failed`, naming each bad field")),
    security(("bearer" = [])))]
pub async fn create_binding(
    State(state): State<AppState>,
    caller: Caller,
    JsonBody(body): JsonBody,
) -> ApiResult<(StatusCode, Json<Binding>)> {
    caller.require(Scope::AgentsWrite)?;
    if caller.namespaces.is_some() {
        return Err(ApiError::forbidden(
            "a token minted by trusted publishing cannot make bindings: the namespace's owner does",
        ));
    }
    let (scope, rule) = parse(&body).map_err(ApiError::validation)?;
    let package = PackageName::parse(scope.as_str())
        .map_err(|message| ApiError::validation(vec![FieldError::new("scope", message)]))?;
    state
        .registry
        .check_holds(&package, &caller.actor())
        .await?;
    let record = BindingRecord {
        id: format!("bnd_{}", ulid::Ulid::new()),
        owner: caller.owner.clone(),
        scope: scope.as_str().to_owned(),
        rule,
        created_at: Timestamp::now(),
    };
    state.registry.bind(&record).await?;
    tracing::info!(binding = %record.id, scope = %record.scope, owner = %record.owner, "binding made");
    Ok((StatusCode::CREATED, Json(record.into())))
}

/// The caller's bindings; every binding for the master key.
#[utoipa::path(get, path = "/api/bindings", tag = "management",
    responses((status = 200, body = BindingList, description = "By scope")),
    security(("bearer" = [])))]
pub async fn list_bindings(
    State(state): State<AppState>,
    caller: Caller,
) -> ApiResult<Json<BindingList>> {
    let owner = (!caller.is_master).then_some(caller.owner.as_str());
    let bindings = state.registry.bindings_of(owner).await?;
    Ok(Json(BindingList {
        bindings: bindings.into_iter().map(Binding::from).collect(),
    }))
}

/// Delete a binding the caller made (any, for the master key).
#[utoipa::path(delete, path = "/api/bindings/{id}", tag = "management",
    params(("id" = String, Path, description = "The binding's id, `bnd_…`")),
    responses((status = 204, description = "Deleted"),
              (status = 404, body = crate::error::Problem, description = "`binding_not_found`")),
    security(("bearer" = [])))]
pub async fn delete_binding(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(id): PathParam,
) -> ApiResult<StatusCode> {
    caller.require(Scope::AgentsWrite)?;
    if caller.namespaces.is_some() {
        return Err(ApiError::forbidden(
            "a token minted by trusted publishing cannot change bindings",
        ));
    }
    let owner = (!caller.is_master).then_some(caller.owner.as_str());
    if !state.registry.unbind(&id, owner).await? {
        return Err(ApiError::new(
            ErrorCode::BindingNotFound,
            format!(
                "no binding '{}' of yours",
                crate::domain::truncate(&id, 100)
            ),
        ));
    }
    tracing::info!(binding = %id, "binding deleted");
    Ok(StatusCode::NO_CONTENT)
}

/// The scope and rule of a request, or every bad field.
fn parse(body: &Value) -> Result<(Namespace, BindingRule), Vec<FieldError>> {
    let mut errors = Vec::new();
    let text = |name: &str, errors: &mut Vec<FieldError>| match body.get(name) {
        Some(Value::String(text)) => Some(text.clone()),
        None | Some(Value::Null) => {
            errors.push(FieldError::new(name, "is required"));
            None
        }
        Some(_) => {
            errors.push(FieldError::new(name, "must be a string"));
            None
        }
    };
    let scope = text("scope", &mut errors).and_then(|scope| {
        Namespace::parse(&scope)
            .map_err(|message| errors.push(FieldError::new("scope", message)))
            .ok()
    });
    let kind = text("kind", &mut errors).and_then(|kind| {
        IssuerKind::parse(&kind).or_else(|| {
            errors.push(FieldError::new("kind", "must be github, gitlab or generic"));
            None
        })
    });
    let repository = text("repository", &mut errors);
    let workflow = match body.get("workflow") {
        None | Some(Value::Null) => None,
        Some(Value::String(workflow)) => Some(workflow.clone()),
        Some(_) => {
            errors.push(FieldError::new("workflow", "must be a string"));
            None
        }
    };
    let rule = match (kind, repository) {
        (Some(kind), Some(repository)) => BindingRule::new(kind, &repository, workflow.as_deref())
            .map_err(|(field, message)| errors.push(FieldError::new(field, message)))
            .ok(),
        (None, Some(repository)) => {
            // Checked as far as it can be without a kind, so every bad field is named at once.
            if let Err((field, message)) = BindingRule::new(IssuerKind::Generic, &repository, None)
            {
                errors.push(FieldError::new(field, message));
            }
            None
        }
        _ => None,
    };
    match (scope, rule) {
        (Some(scope), Some(rule)) if errors.is_empty() => Ok((scope, rule)),
        _ => Err(errors),
    }
}
