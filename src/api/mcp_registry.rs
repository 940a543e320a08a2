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
use serde_json::{Map, Value, json};
use utoipa::IntoParams;

use crate::domain::reach::Package;
use crate::error::{ApiError, ApiResult};
use crate::extract::Query;
use crate::search::{DEFAULT_VERSION, Filters, McpFilter, SearchRequest, Sort};
use crate::state::AppState;
use crate::store::Agent;
use crate::timestamp::Timestamp;

/// The `server.json` schema the answers follow.
pub const SERVER_SCHEMA: &str =
    "https://static.modelcontextprotocol.io/schemas/2025-09-29/server.schema.json";
/// The official registry's `_meta` key for registry-managed metadata.
const OFFICIAL_META: &str = "io.modelcontextprotocol.registry/official";
/// This registry's `_meta` key.
const REGISTRY_META: &str = "io.github.agent-registry/listing";
/// `server.json` limits its description to this many characters.
const MAX_DESCRIPTION_CHARS: usize = 100;

/// `GET /v0.1/servers`'s query string.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ServersQuery {
    /// Text to search for, with the registry's one search function (relevance order); absent:
    /// every server by name.
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
              (status = 400, body = crate::error::Problem, description = "`invalid_parameter`: a malformed cursor, limit, updated_since or search")))]
pub async fn list_servers(
    State(state): State<AppState>,
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
    let text = query.search.unwrap_or_default();
    if text.chars().count() > 500 {
        return Err(ApiError::invalid_parameter(
            "search: at most 500 characters",
        ));
    }
    let request = SearchRequest {
        sort: Some(if text.trim().is_empty() {
            Sort::Name
        } else {
            Sort::Relevance
        }),
        text,
        filters: Filters {
            mcp: Some(McpFilter {
                updated_since,
                version,
            }),
            ..Filters::default()
        },
        limit: crate::search::clamp_limit(query.limit, 30, crate::search::MAX_LIMIT),
        cursor: query.cursor.filter(|cursor| !cursor.is_empty()),
        offset: 0,
        facets: false,
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
              (status = 404, body = crate::error::Problem, description = "`agent_not_found`: no ACTIVE MCP server of that name, or it never had that version (or was no MCP server at it)")))]
pub async fn get_server(
    State(state): State<AppState>,
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
                .find_active(&package)
                .await
                .map_err(not_found)?,
            true,
        )
    } else {
        state
            .registry
            .version(&package, &version)
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
              (status = 404, body = crate::error::Problem, description = "`agent_not_found`: no ACTIVE MCP server of that name")))]
pub async fn list_server_versions(
    State(state): State<AppState>,
    path: Result<axum::extract::Path<String>, axum::extract::rejection::PathRejection>,
) -> ApiResult<Json<Value>> {
    let axum::extract::Path(name) =
        path.map_err(|rejection| ApiError::invalid_parameter(rejection.body_text()))?;
    let package = package_of(&name).ok_or_else(|| ApiError::agent_not_found(&name))?;
    let (current, versions) = state
        .registry
        .versions(&package)
        .await
        .map_err(|_| ApiError::agent_not_found(&name))?;
    if !is_mcp(&current) {
        return Err(ApiError::agent_not_found(&name));
    }
    let mut servers = vec![server_entry(&current, true)];
    for earlier in versions.iter().skip(1) {
        let (agent, _) = state
            .registry
            .version(&package, &earlier.version)
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

/// Whether an agent (at some version) is an MCP server: it lists a remote or a package.
fn is_mcp(agent: &Agent) -> bool {
    !agent.draft.reach.remotes.is_empty() || !agent.draft.reach.packages.is_empty()
}

/// The MCP name of a package name: the last label after `/`.
pub fn mcp_name(package: &str) -> String {
    match package.rsplit_once('.') {
        Some((namespace, name)) => format!("{}/{name}", namespace.replace('_', "-")),
        None => package.to_owned(),
    }
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
    json!({
        "server": server_json(agent),
        "_meta": {
            OFFICIAL_META: {
                "status": "active",
                "publishedAt": published,
                "updatedAt": agent.updated_at,
                "isLatest": is_latest,
            },
        },
    })
}

/// An agent as a `server.json` document, within the published schema's rules: a one-slash
/// name, a description of at most 100 characters (the full one is in `_meta`), a version, and
/// only packages that name a version (the schema requires one; the others are listed in
/// `_meta`).
pub fn server_json(agent: &Agent) -> Value {
    let draft = &agent.draft;
    let reach = &draft.reach;
    let mut server = Map::new();
    server.insert("$schema".to_owned(), json!(SERVER_SCHEMA));
    server.insert("name".to_owned(), json!(mcp_name(agent.package_name())));
    server.insert("title".to_owned(), json!(draft.name));
    server.insert(
        "description".to_owned(),
        json!(short_description(&draft.description)),
    );
    server.insert(
        "version".to_owned(),
        json!(draft.version.as_deref().unwrap_or(DEFAULT_VERSION)),
    );
    if let Some(repository) = &reach.repository {
        server.insert(
            "repository".to_owned(),
            json!({"url": repository.url, "source": repository.source.as_deref().unwrap_or("unknown")}),
        );
    }
    let (versioned, unversioned): (Vec<&Package>, Vec<&Package>) = reach
        .packages
        .iter()
        .partition(|package| package.version.as_deref().is_some_and(|v| v != "latest"));
    if !versioned.is_empty() {
        server.insert(
            "packages".to_owned(),
            Value::Array(versioned.into_iter().map(package_json).collect()),
        );
    }
    if !reach.remotes.is_empty() {
        let remotes: Vec<Value> = reach
            .remotes
            .iter()
            .map(|remote| json!({"type": remote.kind, "url": remote.url}))
            .collect();
        server.insert("remotes".to_owned(), Value::Array(remotes));
    }
    let mut listing = json!({
        "id": agent.id,
        "package_name": agent.package_name(),
        "description": draft.description,
        "verification_level": agent.verification_level,
    });
    if !unversioned.is_empty() {
        listing["unversioned_packages"] =
            Value::Array(unversioned.into_iter().map(package_json).collect());
    }
    server.insert(
        "_meta".to_owned(),
        json!({"io.modelcontextprotocol.registry/publisher-provided": {REGISTRY_META: listing}}),
    );
    Value::Object(server)
}

fn package_json(package: &Package) -> Value {
    let mut out = json!({
        "registryType": package.registry_type,
        "identifier": package.identifier,
        "transport": {"type": package.transport.kind},
    });
    if let Some(version) = &package.version {
        out["version"] = json!(version);
    }
    if let Some(hint) = &package.runtime_hint {
        out["runtimeHint"] = json!(hint);
    }
    if !package.environment_variables.is_empty() {
        let variables: Vec<Value> = package
            .environment_variables
            .iter()
            .map(|variable| {
                let mut out = json!({
                    "name": variable.name,
                    "isRequired": variable.is_required,
                    "isSecret": variable.is_secret,
                });
                if let Some(description) = &variable.description {
                    out["description"] = json!(description);
                }
                out
            })
            .collect();
        out["environmentVariables"] = Value::Array(variables);
    }
    out
}

/// At most 100 characters, cut at a word with `…` when longer.
fn short_description(text: &str) -> String {
    let text = text.trim();
    if text.chars().count() <= MAX_DESCRIPTION_CHARS {
        return text.to_owned();
    }
    let cut: String = text.chars().take(MAX_DESCRIPTION_CHARS - 1).collect();
    let at_word = cut.rsplit_once(' ').map_or(cut.as_str(), |(head, _)| head);
    format!("{}…", at_word.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mcp_names_and_package_names_map_both_ways() {
        assert_eq!(mcp_name("io.github.acme.weather"), "io.github.acme/weather");
        assert_eq!(
            package_of("io.github.acme/weather").as_deref(),
            Some("io.github.acme.weather")
        );
        assert_eq!(package_of("no-slash"), None);
        assert_eq!(package_of("a/b/c"), None);
    }

    #[test]
    fn long_descriptions_are_cut_at_a_word() {
        let long = "word ".repeat(40);
        let short = short_description(&long);
        assert!(short.chars().count() <= MAX_DESCRIPTION_CHARS, "{short}");
        assert!(short.ends_with("word…"), "{short}");
        assert_eq!(short_description(" tidy "), "tidy");
    }
}
