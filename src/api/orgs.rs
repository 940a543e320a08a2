//! Organisations (a team that owns agents together, with a role per member) and transfers of
//! an agent to another owner. See docs/access.md.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::auth::{Caller, Scope};
use crate::domain::FieldError;
use crate::domain::org::{OrgRole, parse_org_name};
use crate::error::{ApiError, ApiResult, ErrorCode};
use crate::extract::{JsonBody, PathParam};
use crate::state::AppState;
use crate::store::{MemberRecord, OrgRecord, TransferRecord, TransferStatus};
use crate::timestamp::Timestamp;

/// Longest display name kept.
const MAX_DISPLAY_NAME: usize = 200;

/// One member of an organisation.
#[derive(Debug, Serialize, ToSchema)]
pub struct MemberView {
    /// The member's owner name (what their tokens and sign-ins carry).
    pub owner: String,
    pub role: OrgRole,
    pub added_at: Timestamp,
}

impl From<&MemberRecord> for MemberView {
    fn from(member: &MemberRecord) -> Self {
        Self {
            owner: member.owner.clone(),
            role: member.role,
            added_at: member.added_at,
        }
    }
}

/// An organisation.
#[derive(Debug, Serialize, ToSchema)]
pub struct OrgView {
    pub name: String,
    /// The owner name its agents carry: `org:<name>`.
    pub owner: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    pub created_by: String,
    pub created_at: Timestamp,
    /// The caller's role; absent for the master key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<OrgRole>,
    /// Its members, by owner (not in lists).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub members: Option<Vec<MemberView>>,
    /// The GitHub organisation it is linked to, if any (not in lists): whoever signs in with
    /// GitHub as one of its members is a member here with `role`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub github: Option<GithubLink>,
}

/// A link from an organisation to a GitHub organisation.
#[derive(Debug, Serialize, ToSchema)]
pub struct GithubLink {
    /// The GitHub organisation's login, lowercase.
    pub org: String,
    /// The role its members have here: `publisher` or `viewer`.
    pub role: OrgRole,
}

impl OrgView {
    fn of(org: &OrgRecord, role: Option<OrgRole>, members: Option<&[MemberRecord]>) -> Self {
        Self {
            name: org.name.clone(),
            owner: crate::domain::org::org_owner(&org.name),
            display_name: org.display_name.clone(),
            created_by: org.created_by.clone(),
            created_at: org.created_at,
            role,
            members: members.map(|members| members.iter().map(MemberView::from).collect()),
            github: None,
        }
    }
}

/// The caller's organisations.
#[derive(Debug, Serialize, ToSchema)]
pub struct OrgList {
    pub orgs: Vec<OrgView>,
}

/// 403 for a token restricted to namespaces (a CI job's): organisations are people's.
fn refuse_restricted(caller: &Caller) -> ApiResult<()> {
    if caller.namespaces.is_some() {
        return Err(ApiError::forbidden(
            "a token restricted to namespaces (a CI job's) does not manage organisations or transfers",
        ));
    }
    Ok(())
}

/// Create an organisation; the caller becomes its admin (the master key names the first admin
/// with `"admin"`).
#[utoipa::path(post, path = "/api/orgs", tag = "management",
    request_body(content = crate::wire::schema::CreateOrgRequest, description = "`{\"name\": \"acme\", \"display_name\"?}`"),
    responses((status = 201, body = OrgView, description = "Created, with its members"),
              (status = 409, body = crate::error::Problem, description = "`conflict`: the name is taken")),
    security(("bearer" = [])))]
pub async fn create_org(
    State(state): State<AppState>,
    caller: Caller,
    JsonBody(body): JsonBody,
) -> ApiResult<(StatusCode, Json<OrgView>)> {
    caller.require(Scope::AgentsWrite)?;
    refuse_restricted(&caller)?;
    let mut errors = Vec::new();
    let name = match super::string_field(&body, "name")? {
        Some(name) => parse_org_name(name)
            .map_err(|message| errors.push(FieldError::new("name", message)))
            .ok(),
        None => {
            errors.push(FieldError::new("name", "is required"));
            None
        }
    };
    let display_name = super::string_field(&body, "display_name")?
        .map(str::trim)
        .filter(|text| !text.is_empty());
    if display_name
        .is_some_and(|text| text.chars().count() > MAX_DISPLAY_NAME || text.contains('\0'))
    {
        errors.push(FieldError::new(
            "display_name",
            format!("must be at most {MAX_DISPLAY_NAME} characters"),
        ));
    }
    let admin = match (caller.is_master, super::string_field(&body, "admin")?) {
        (true, Some(admin)) => crate::auth::parse_owner(admin)
            .map_err(|message| errors.push(FieldError::new("admin", message)))
            .ok(),
        (true, None) => {
            errors.push(FieldError::new(
                "admin",
                "is required with the master key: the owner who becomes its first admin",
            ));
            None
        }
        (false, _) => Some(caller.owner.clone()),
    };
    let (Some(name), Some(admin), true) = (name, admin, errors.is_empty()) else {
        return Err(ApiError::validation(errors));
    };
    let org = OrgRecord {
        name,
        display_name: display_name.map(str::to_owned),
        created_by: admin,
        created_at: Timestamp::now(),
    };
    state.store.create_org(&org).await?;
    let members = state.store.org_members(&org.name).await?;
    tracing::info!(org = %org.name, admin = %org.created_by, "organisation created");
    let role = (!caller.is_master).then_some(OrgRole::Admin);
    Ok((
        StatusCode::CREATED,
        Json(OrgView::of(&org, role, Some(&members))),
    ))
}

/// The organisations the caller is a member of, with its role in each.
#[utoipa::path(get, path = "/api/orgs", tag = "management",
    responses((status = 200, body = OrgList)),
    security(("bearer" = [])))]
pub async fn list_orgs(State(state): State<AppState>, caller: Caller) -> ApiResult<Json<OrgList>> {
    let mut orgs = Vec::new();
    for member in state
        .store
        .memberships_of(&caller.owner, &caller.granted)
        .await?
    {
        if let Some(org) = state.store.find_org(&member.org).await? {
            orgs.push(OrgView::of(&org, Some(member.role), None));
        }
    }
    Ok(Json(OrgList { orgs }))
}

/// An organisation and the caller's role in it: for its members and the master key.
async fn visible_org(
    state: &AppState,
    caller: &Caller,
    name: &str,
) -> ApiResult<(OrgRecord, Option<OrgRole>, Vec<MemberRecord>)> {
    let not_found = || {
        ApiError::new(
            ErrorCode::OrgNotFound,
            format!(
                "no organisation '{}' that you are a member of",
                crate::domain::truncate(name, 60)
            ),
        )
    };
    let org = state
        .store
        .find_org(name.trim())
        .await?
        .ok_or_else(not_found)?;
    let members = state.store.org_members(&org.name).await?;
    let role = caller_role(state, caller, &org.name).await?;
    if role.is_none() && !caller.is_master {
        return Err(not_found());
    }
    Ok((org, role, members))
}

/// The caller's role in organisation `org`: as a member, or through its GitHub link.
async fn caller_role(state: &AppState, caller: &Caller, org: &str) -> ApiResult<Option<OrgRole>> {
    Ok(state
        .store
        .memberships_of(&caller.owner, &caller.granted)
        .await?
        .into_iter()
        .find(|member| member.org == org)
        .map(|member| member.role))
}

/// An organisation with its members (members and the master key only; to anyone else it does
/// not exist).
#[utoipa::path(get, path = "/api/orgs/{org}", tag = "management",
    params(("org" = String, Path, description = "The organisation's name")),
    responses((status = 200, body = OrgView),
              (status = 404, body = crate::error::Problem, description = "`org_not_found`: no such organisation, or the caller is not a member")),
    security(("bearer" = [])))]
pub async fn get_org(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(name): PathParam,
) -> ApiResult<Json<OrgView>> {
    let (org, role, members) = visible_org(&state, &caller, &name).await?;
    let mut view = OrgView::of(&org, role, Some(&members));
    view.github = state
        .store
        .github_link(&org.name)
        .await?
        .map(|(org, role)| GithubLink { org, role });
    Ok(Json(view))
}

/// Link the organisation to a GitHub organisation (its admins, or the master key): every
/// person who signs in with GitHub as a member of it is then a member here with `role`
/// (`viewer` unless it says `publisher`), for as long as their sign-in says so. The admin
/// linking must hold that GitHub organisation themselves (their GitHub sign-in grants
/// `io.github.<github_org>`), so nobody links a GitHub organisation they are not in.
#[utoipa::path(put, path = "/api/orgs/{org}/github", tag = "management",
    params(("org" = String, Path, description = "The organisation's name")),
    request_body(content = crate::wire::schema::GithubLinkRequest, description = "`{\"github_org\": \"acme\", \"role\"?: \"viewer\" | \"publisher\"}`"),
    responses((status = 200, body = OrgView, description = "The organisation with its link"),
              (status = 403, body = crate::error::Problem, description = "`forbidden`: not an admin, or the caller's sign-in does not grant that GitHub organisation"),
              (status = 404, body = crate::error::Problem, description = "`org_not_found`"),
              (status = 409, body = crate::error::Problem, description = "`conflict`: that GitHub organisation is linked to another organisation"),
              (status = 422, body = crate::error::Problem, description = "`validation_failed`: no or a malformed `github_org`, or a role other than viewer or publisher")),
    security(("bearer" = [])))]
pub async fn link_github(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(name): PathParam,
    JsonBody(body): JsonBody,
) -> ApiResult<Json<OrgView>> {
    let (org, _) = administered(&state, &caller, &name).await?;
    let mut errors = Vec::new();
    let github = match super::string_field(&body, "github_org")? {
        Some(text) => match parse_org_name(text) {
            Ok(github) => Some(github),
            Err(_) => {
                errors.push(FieldError::new(
                    "github_org",
                    "must be a GitHub organisation's login in lowercase: 1 to 39 letters, digits and hyphens, not starting or ending with one",
                ));
                None
            }
        },
        None => {
            errors.push(FieldError::new("github_org", "is required"));
            None
        }
    };
    let role = match super::string_field(&body, "role")?.map(str::trim) {
        None => Some(OrgRole::Viewer),
        Some(text) => match OrgRole::parse(text) {
            Some(role @ (OrgRole::Viewer | OrgRole::Publisher)) => Some(role),
            _ => {
                errors.push(FieldError::new(
                    "role",
                    "must be viewer or publisher (admins are added by name)",
                ));
                None
            }
        },
    };
    let (Some(github), Some(role), true) = (github, role, errors.is_empty()) else {
        return Err(ApiError::validation(errors));
    };
    if !caller.is_master && !crate::domain::org::github_names(&caller.granted).contains(&github) {
        return Err(ApiError::forbidden(format!(
            "your sign-in does not show you in the GitHub organisation '{github}': sign in with \
             GitHub as one of its members to link it"
        )));
    }
    state
        .store
        .set_github_link(&org.name, Some((&github, role)), Timestamp::now())
        .await?;
    get_org(State(state), caller, PathParam(org.name)).await
}

/// Remove the organisation's GitHub link (its admins, or the master key): the members it gave
/// are members no more, unless they were added by name.
#[utoipa::path(delete, path = "/api/orgs/{org}/github", tag = "management",
    params(("org" = String, Path, description = "The organisation's name")),
    responses((status = 204, description = "Unlinked (or it was not linked)"),
              (status = 403, body = crate::error::Problem, description = "`forbidden`: not an admin"),
              (status = 404, body = crate::error::Problem, description = "`org_not_found`")),
    security(("bearer" = [])))]
pub async fn unlink_github(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(name): PathParam,
) -> ApiResult<StatusCode> {
    let (org, _) = administered(&state, &caller, &name).await?;
    state
        .store
        .set_github_link(&org.name, None, Timestamp::now())
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The organisation `name`, for a caller who may manage its members (an admin, or the master
/// key): 404 to non-members, 403 to members who are not admins.
async fn administered(
    state: &AppState,
    caller: &Caller,
    name: &str,
) -> ApiResult<(OrgRecord, Option<OrgRole>)> {
    caller.require(Scope::AgentsWrite)?;
    refuse_restricted(caller)?;
    let (org, role, _) = visible_org(state, caller, name).await?;
    if !caller.is_master && role != Some(OrgRole::Admin) {
        return Err(ApiError::forbidden(format!(
            "only the admins of organisation '{}' manage its members",
            org.name
        )));
    }
    Ok((org, role))
}

/// Add a member or change their role (admins, and the master key).
#[utoipa::path(put, path = "/api/orgs/{org}/members/{owner}", tag = "management",
    params(("org" = String, Path, description = "The organisation's name"),
           ("owner" = String, Path, description = "The member's owner name")),
    request_body(content = crate::wire::schema::SetMemberRequest, description = "`{\"role\": \"admin\" | \"publisher\" | \"viewer\"}`"),
    responses((status = 200, body = OrgView, description = "The organisation with its members"),
              (status = 404, body = crate::error::Problem, description = "`org_not_found`, or `not_found`: no owner can have that name"),
              (status = 409, body = crate::error::Problem, description = "`conflict`: that would leave it without an admin")),
    security(("bearer" = [])))]
pub async fn set_member(
    State(state): State<AppState>,
    caller: Caller,
    axum::extract::Path((name, owner)): axum::extract::Path<(String, String)>,
    JsonBody(body): JsonBody,
) -> ApiResult<Json<OrgView>> {
    let (org, _) = administered(&state, &caller, &name).await?;
    // The path names the member: a name no owner can have names nobody (404).
    let owner = crate::auth::parse_owner(&owner).map_err(|message| {
        ApiError::new(
            ErrorCode::NotFound,
            format!(
                "'{}' cannot be a member: {message}",
                crate::domain::truncate(&owner, 64)
            ),
        )
    })?;
    let mut errors = Vec::new();
    let new_role = match super::string_field(&body, "role")? {
        Some(text) => OrgRole::parse(text.trim()).or_else(|| {
            errors.push(FieldError::new(
                "role",
                "must be one of admin, publisher, viewer",
            ));
            None
        }),
        None => {
            errors.push(FieldError::new("role", "is required"));
            None
        }
    };
    let (Some(new_role), true) = (new_role, errors.is_empty()) else {
        return Err(ApiError::validation(errors));
    };
    state
        .store
        .set_member(&MemberRecord {
            org: org.name.clone(),
            owner: owner.clone(),
            role: new_role,
            added_at: Timestamp::now(),
        })
        .await?;
    tracing::info!(org = %org.name, member = %owner, role = new_role.as_str(), by = %caller.owner, "organisation member set");
    let members = state.store.org_members(&org.name).await?;
    let role = caller_role(&state, &caller, &org.name).await?;
    Ok(Json(OrgView::of(&org, role, Some(&members))))
}

/// Remove a member (admins, the master key, or the member leaving); the last admin cannot
/// leave.
#[utoipa::path(delete, path = "/api/orgs/{org}/members/{owner}", tag = "management",
    params(("org" = String, Path, description = "The organisation's name"),
           ("owner" = String, Path, description = "The member's owner name")),
    responses((status = 204, description = "Removed"),
              (status = 404, body = crate::error::Problem, description = "`org_not_found`, or `not_found`: no such member"),
              (status = 409, body = crate::error::Problem, description = "`conflict`: the last admin")),
    security(("bearer" = [])))]
pub async fn remove_member(
    State(state): State<AppState>,
    caller: Caller,
    axum::extract::Path((name, owner)): axum::extract::Path<(String, String)>,
) -> ApiResult<StatusCode> {
    let org = if owner == caller.owner {
        caller.require(Scope::AgentsWrite)?;
        visible_org(&state, &caller, &name).await?.0
    } else {
        administered(&state, &caller, &name).await?.0
    };
    if !state.store.remove_member(&org.name, &owner).await? {
        return Err(ApiError::new(
            ErrorCode::NotFound,
            format!(
                "'{}' is not a member of '{}'",
                crate::domain::truncate(&owner, 64),
                org.name
            ),
        ));
    }
    tracing::info!(org = %org.name, member = %owner, by = %caller.owner, "organisation member removed");
    Ok(StatusCode::NO_CONTENT)
}

/// A transfer, and the agent as it now is once it moved.
#[derive(Debug, Serialize, ToSchema)]
pub struct TransferView {
    /// `trf_…`.
    pub id: String,
    pub agent_id: String,
    pub package_name: String,
    pub from: String,
    /// A person's owner name, or `org:<name>`.
    pub to: String,
    pub requested_by: String,
    pub status: TransferStatus,
    pub created_at: Timestamp,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resolved_at: Option<Timestamp>,
    /// The agent, once it moved.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub agent: Option<Value>,
}

impl TransferView {
    fn of(transfer: &TransferRecord, agent: Option<&crate::store::Agent>) -> Self {
        Self {
            id: transfer.id.clone(),
            agent_id: transfer.agent_id.clone(),
            package_name: transfer.package_name.clone(),
            from: transfer.from_owner.clone(),
            to: transfer.to_owner.clone(),
            requested_by: transfer.requested_by.clone(),
            status: transfer.status,
            created_at: transfer.created_at,
            resolved_at: transfer.resolved_at,
            agent: agent.and_then(|agent| {
                serde_json::to_value(crate::wire::AgentRecord::owned(agent)).ok()
            }),
        }
    }
}

/// Pending transfers the caller is a party to.
#[derive(Debug, Serialize, ToSchema)]
pub struct TransferList {
    pub transfers: Vec<TransferView>,
}

/// Give an agent to another owner (a person's owner name, or `org:<name>`): a pending
/// transfer its receiver accepts. The master key moves it at once.
#[utoipa::path(post, path = "/api/agents/{id}/transfer", tag = "management",
    params(("id" = String, Path, description = "Agent id or package name")),
    request_body(content = crate::wire::schema::TransferRequest, description = "`{\"to\": \"bob\"}` or `{\"to\": \"org:acme\"}`"),
    responses((status = 201, body = TransferView, description = "Pending: the receiver accepts or declines it"),
              (status = 200, body = TransferView, description = "The master key's: done, with the agent as it now is"),
              (status = 404, body = crate::error::Problem, description = "`agent_not_found`, or `org_not_found` for the receiver"),
              (status = 409, body = crate::error::Problem, description = "`conflict`: a transfer of this agent is pending already, or the receiver owns it already")),
    security(("bearer" = [])))]
pub async fn transfer_agent(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(identifier): PathParam,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    caller.require(Scope::AgentsWrite)?;
    refuse_restricted(&caller)?;
    let to = super::string_field(&body, "to")?
        .ok_or_else(|| ApiError::validation(vec![FieldError::new("to", "is required")]))?;
    let (transfer, moved) = state
        .registry
        .request_transfer(&identifier, to, &caller.actor())
        .await?;
    tracing::info!(transfer.id = %transfer.id, agent.id = %transfer.agent_id,
        from = %transfer.from_owner, to = %transfer.to_owner, status = transfer.status.as_str(),
        "transfer requested");
    let status = if moved.is_some() {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok((status, Json(TransferView::of(&transfer, moved.as_ref()))).into_response())
}

/// The pending transfers from or to the caller (and its organisations).
#[utoipa::path(get, path = "/api/transfers", tag = "management",
    responses((status = 200, body = TransferList)),
    security(("bearer" = [])))]
pub async fn list_transfers(
    State(state): State<AppState>,
    caller: Caller,
) -> ApiResult<Json<TransferList>> {
    let transfers = state.registry.pending_transfers(&caller.actor()).await?;
    Ok(Json(TransferList {
        transfers: transfers
            .iter()
            .map(|transfer| TransferView::of(transfer, None))
            .collect(),
    }))
}

async fn settle(
    state: &AppState,
    caller: &Caller,
    id: &str,
    accept: bool,
) -> ApiResult<Json<TransferView>> {
    caller.require(Scope::AgentsWrite)?;
    refuse_restricted(caller)?;
    let (transfer, moved) = state
        .registry
        .settle_transfer(id, accept, &caller.actor())
        .await?;
    tracing::info!(transfer.id = %transfer.id, agent.id = %transfer.agent_id,
        status = transfer.status.as_str(), by = %caller.owner, "transfer settled");
    Ok(Json(TransferView::of(&transfer, moved.as_ref())))
}

/// Accept a transfer: the agent, its versions, verification and identifier move to the
/// receiver; its package name and card URL stay.
#[utoipa::path(post, path = "/api/transfers/{id}/accept", tag = "management",
    params(("id" = String, Path, description = "The transfer's id, `trf_…`")),
    responses((status = 200, body = TransferView, description = "Accepted, with the agent as it now is"),
              (status = 404, body = crate::error::Problem, description = "`transfer_not_found`: none pending that the caller is a party to"),
              (status = 409, body = crate::error::Problem, description = "`conflict`: the agent changed owner since")),
    security(("bearer" = [])))]
pub async fn accept_transfer(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(id): PathParam,
) -> ApiResult<Json<TransferView>> {
    settle(&state, &caller, &id, true).await
}

/// Decline a transfer (the receiver), or withdraw it (the sender).
#[utoipa::path(post, path = "/api/transfers/{id}/decline", tag = "management",
    params(("id" = String, Path, description = "The transfer's id, `trf_…`")),
    responses((status = 200, body = TransferView, description = "Declined"),
              (status = 404, body = crate::error::Problem, description = "`transfer_not_found`: none pending that the caller is a party to")),
    security(("bearer" = [])))]
pub async fn decline_transfer(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(id): PathParam,
) -> ApiResult<Json<TransferView>> {
    settle(&state, &caller, &id, false).await
}
