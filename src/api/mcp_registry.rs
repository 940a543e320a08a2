//! The MCP Registry's read API over the agents that list an MCP remote or package, so MCP
//! clients and aggregators can read or mirror this registry as they read the official one:
//! `GET /v0.1/servers`, `GET /v0.1/servers/{name}/versions` and
//! `GET /v0.1/servers/{name}/versions/{version}`, answering `server.json` documents.
//!
//! Names: package `io.github.acme.weather` is served as `io.github.acme/weather` (the last label
//! becomes the name after `/`).

use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa::IntoParams;

use crate::auth::Viewer;
use crate::error::{ApiError, ApiResult};
use crate::extract::Query;
use crate::search::{Filters, McpFilter, SearchRequest, Sort};
use crate::state::AppState;
use crate::store::Agent;
use crate::timestamp::Timestamp;

use crate::wire::server_json::{self, is_mcp};

/// The official registry's `_meta` key for registry-managed metadata.
const OFFICIAL_META: &str = "io.modelcontextprotocol.registry/official";

/// `GET /v0.1/servers`'s query string.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ServersQuery {
    /// Only servers whose name (or description) contains this text, ignoring case, as the MCP
    /// Registry filters; in name order either way.
    #[param(max_length = 500)]
    pub search: Option<String>,
    /// `metadata.nextCursor` of the previous page.
    pub cursor: Option<String>,
    /// Servers per page, default 30, at most 100.
    #[serde(default, deserialize_with = "crate::extract::integer")]
    #[param(value_type = Option<i64>)]
    pub limit: Option<i64>,
    /// RFC 3339 time: only servers updated at or after it.
    #[param(format = DateTime)]
    pub updated_since: Option<String>,
    /// `latest` (every server has one version here), or a version string to match exactly.
    pub version: Option<String>,
}

/// MCP servers listed in this registry, as the MCP Registry API lists them.
#[utoipa::path(get, path = "/v0.1/servers", tag = "discovery",
    params(ServersQuery),
    responses((status = 200, description = "`{servers: [{server: server.json, _meta}], metadata: {nextCursor, count}}`", body = Object),
              (status = 400, body = crate::error::Problem, description = "`invalid_parameter`: a malformed cursor, limit, updated_since or search")),
    security((), ("bearer" = [])))]
pub async fn list_servers(
    State(state): State<AppState>,
    viewer: Viewer,
    Query(query): Query<ServersQuery>,
) -> ApiResult<Json<Value>> {
    let updated_since = match query.updated_since.as_deref() {
        None => None,
        Some(text) => Some(
            serde_json::from_value::<Timestamp>(json!(text)).map_err(|_| {
                ApiError::invalid_parameter("updated_since: must be an RFC 3339 time")
            })?,
        ),
    };
    let version = query
        .version
        .as_deref()
        .map(str::trim)
        .filter(|version| !version.is_empty() && *version != "latest")
        .map(str::to_owned);
    let contains = query
        .search
        .map(|text| text.trim().to_owned())
        .filter(|text| !text.is_empty());
    if contains
        .as_ref()
        .is_some_and(|text| text.chars().count() > 500)
    {
        return Err(ApiError::invalid_parameter(
            "search: at most 500 characters",
        ));
    }
    let request = SearchRequest {
        sort: Some(Sort::Name),
        text: String::new(),
        filters: Filters {
            mcp: Some(McpFilter {
                updated_since,
                version,
                contains,
            }),
            ..Filters::default()
        },
        limit: crate::search::clamp_limit(query.limit, 30, crate::search::MAX_LIMIT),
        cursor: query.cursor.filter(|cursor| !cursor.is_empty()),
        offset: 0,
        facets: false,
        viewer,
    };
    let page = state.registry.search(&request).await?;
    let mut servers = Vec::with_capacity(page.hits.len());
    for hit in &page.hits {
        // The index keeps what lists need; a server.json needs the whole record.
        if let Some(agent) = state.registry.find(hit.listing.id()).await? {
            servers.push(server_entry(&agent, true));
        }
    }
    let mut metadata = json!({"count": servers.len()});
    if let Some(next) = page.next_cursor {
        metadata["nextCursor"] = json!(next);
    }
    Ok(Json(json!({"servers": servers, "metadata": metadata})))
}

/// One MCP server, by its MCP name, at a version: `latest`, its current version, or one it had
/// earlier (as it was then, `isLatest: false`).
#[utoipa::path(get, path = "/v0.1/servers/{name}/versions/{version}", tag = "discovery",
    params(("name" = String, Path, description = "The MCP name, `/` percent-encoded: `io.github.acme%2Fweather`"),
           ("version" = String, Path, description = "`latest`, or one of the server's versions")),
    responses((status = 200, description = "`{server: server.json, _meta}`", body = Object),
              (status = 404, body = crate::error::Problem, description = "`agent_not_found`: no ACTIVE MCP server of that name, or it never had that version (or was no MCP server at it)")),
    security((), ("bearer" = [])))]
pub async fn get_server(
    State(state): State<AppState>,
    viewer: Viewer,
    path: Result<axum::extract::Path<(String, String)>, axum::extract::rejection::PathRejection>,
) -> ApiResult<Json<Value>> {
    let axum::extract::Path((name, version)) =
        path.map_err(|rejection| ApiError::invalid_parameter(rejection.body_text()))?;
    let package = package_of(&name).ok_or_else(|| ApiError::agent_not_found(&name))?;
    let not_found = |_| ApiError::agent_not_found(&name);
    let (agent, is_latest) = if version == "latest" {
        (
            state
                .registry
                .find_active(&package, &viewer)
                .await
                .map_err(not_found)?,
            true,
        )
    } else {
        state
            .registry
            .version(&package, &version, &viewer)
            .await
            .map_err(not_found)?
    };
    if !is_mcp(&agent) {
        return Err(ApiError::agent_not_found(&name));
    }
    Ok(Json(server_entry(&agent, is_latest)))
}

/// Every version of one MCP server, the latest first (the versions at which it listed no MCP
/// remote or package are left out).
#[utoipa::path(get, path = "/v0.1/servers/{name}/versions", tag = "discovery",
    params(("name" = String, Path, description = "The MCP name, `/` percent-encoded: `io.github.acme%2Fweather`")),
    responses((status = 200, description = "`{servers: [{server: server.json, _meta}], metadata: {count}}`", body = Object),
              (status = 404, body = crate::error::Problem, description = "`agent_not_found`: no ACTIVE MCP server of that name")),
    security((), ("bearer" = [])))]
pub async fn list_server_versions(
    State(state): State<AppState>,
    viewer: Viewer,
    path: Result<axum::extract::Path<String>, axum::extract::rejection::PathRejection>,
) -> ApiResult<Json<Value>> {
    let axum::extract::Path(name) =
        path.map_err(|rejection| ApiError::invalid_parameter(rejection.body_text()))?;
    let package = package_of(&name).ok_or_else(|| ApiError::agent_not_found(&name))?;
    let (current, versions) = state
        .registry
        .versions(&package, &viewer)
        .await
        .map_err(|_| ApiError::agent_not_found(&name))?;
    if !is_mcp(&current) {
        return Err(ApiError::agent_not_found(&name));
    }
    let mut servers = vec![server_entry(&current, true)];
    for earlier in versions.iter().skip(1) {
        let (agent, _) = state
            .registry
            .version(&package, &earlier.version, &viewer)
            .await
            .map_err(|_| ApiError::agent_not_found(&name))?;
        if is_mcp(&agent) {
            servers.push(server_entry(&agent, false));
        }
    }
    let count = servers.len();
    Ok(Json(
        json!({"servers": servers, "metadata": {"count": count}}),
    ))
}

/// The package name an MCP name stands for.
fn package_of(name: &str) -> Option<String> {
    let (namespace, short) = name.trim().split_once('/')?;
    if namespace.is_empty() || short.is_empty() || short.contains('/') {
        return None;
    }
    Some(format!("{namespace}.{short}").to_ascii_lowercase())
}

/// `{server, _meta}` for one agent, at its latest version or (`is_latest` false) as it was at
/// an earlier one, written at its `updated_at`.
fn server_entry(agent: &Agent, is_latest: bool) -> Value {
    let published = if is_latest {
        agent.published_at.unwrap_or(agent.created_at)
    } else {
        agent.updated_at
    };
    // Deprecated by its publisher here, or (a mirrored server) at its source.
    let deprecated = agent.deprecation.is_some()
        || agent
            .provenance
            .as_ref()
            .is_some_and(|provenance| provenance.status.as_deref() == Some("deprecated"));
    json!({
        "server": server_json::document(agent),
        "_meta": {
            OFFICIAL_META: {
                "status": if deprecated { "deprecated" } else { "active" },
                "publishedAt": published,
                "updatedAt": agent.updated_at,
                "isLatest": is_latest,
            },
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mcp_names_map_back_to_package_names() {
        assert_eq!(
            package_of("io.github.acme/weather").as_deref(),
            Some("io.github.acme.weather")
        );
        assert_eq!(package_of("no-slash"), None);
        assert_eq!(package_of("a/b/c"), None);
    }
}
