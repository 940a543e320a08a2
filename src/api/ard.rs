//! The ARD HTTP surface (`ard` is the core): the manifest (at ARD's path and at the AI
//! Catalog's), and the registry API at `/ard`.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::auth::Viewer;
use crate::error::{ApiError, ApiResult};
use crate::extract::{JsonBody, PathParam, Query, QueryPairs};
use crate::search::{Filters, Listing, SearchRequest, Sort};

use crate::ard::entry::{self, Detail};
use crate::ard::error::{ArdError, ArdErrorBody};
use crate::ard::{AI_CATALOG_PATH, Ard, CATALOG_TYPE, FEDERATED_BY, MANIFEST_PATH};

/// Which page of the manifest.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ManifestQuery {
    /// Where a page starts: the `url` of the previous page's last entry (a nested catalogue)
    /// carries it.
    pub cursor: Option<String>,
}

/// The registry's ARD manifest.
#[utoipa::path(get, path = "/.well-known/ard.json", tag = "discovery",
    params(ManifestQuery,
           ("If-None-Match" = Option<String>, Header, description = "ETags already held; a match is 304")),
    responses((status = 200, description = "An ARD manifest (also a valid AI Catalog): `{specVersion, host, entries}`. The first page starts with the registry's own entry (`type: application/ai-registry+json`, `url`: the ARD API base); then every ACTIVE agent by name as an ARD entry; with more than one page, the last entry is the next page, a nested catalogue (`type: application/ai-catalog+json`).", body = crate::wire::schema::ArdManifest,
                headers(("ETag" = String, description = "Of the page's content"), ("Cache-Control" = String))),
              (status = 304, description = "Not modified"),
              (status = 400, body = crate::error::Problem, description = "`invalid_parameter`: a malformed cursor")),
    security((), ("bearer" = [])))]
pub async fn manifest(
    State(ard): State<Arc<Ard>>,
    viewer: Viewer,
    Query(query): Query<ManifestQuery>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    manifest_at(&ard, MANIFEST_PATH, query.cursor, &headers, &viewer).await
}

/// The same manifest at the AI Catalog's path, for consumers of the predecessor format.
#[utoipa::path(get, path = "/.well-known/ai-catalog.json", tag = "discovery",
    params(ManifestQuery,
           ("If-None-Match" = Option<String>, Header, description = "ETags already held; a match is 304")),
    responses((status = 200, description = "The ARD manifest of `/.well-known/ard.json`, its next pages at this path", body = crate::wire::schema::ArdManifest,
                headers(("ETag" = String, description = "Of the page's content"), ("Cache-Control" = String))),
              (status = 304, description = "Not modified"),
              (status = 400, body = crate::error::Problem, description = "`invalid_parameter`: a malformed cursor")),
    security((), ("bearer" = [])))]
pub async fn ai_catalog(
    State(ard): State<Arc<Ard>>,
    viewer: Viewer,
    Query(query): Query<ManifestQuery>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    manifest_at(&ard, AI_CATALOG_PATH, query.cursor, &headers, &viewer).await
}

async fn manifest_at(
    ard: &Ard,
    path: &str,
    cursor: Option<String>,
    headers: &HeaderMap,
    viewer: &Viewer,
) -> ApiResult<Response> {
    let base = &ard.base_url;
    let page_size = ard.manifest_page_size;
    let mut cursor = cursor.filter(|cursor| !cursor.is_empty());
    let mut entries = Vec::new();
    if cursor.is_none() {
        entries.push(entry::registry_entry(&ard.identifier, &ard.api_url));
    }
    let mut agents = 0;
    let mut next = None;
    // The search function pages by at most 100: one manifest page is gathered from several.
    while agents < page_size {
        let request = SearchRequest {
            text: String::new(),
            filters: Filters {
                collapse_duplicates: false,
                ..Filters::default()
            },
            sort: Some(Sort::Name),
            limit: (page_size - agents).min(crate::search::MAX_LIMIT),
            cursor: cursor.take(),
            offset: 0,
            facets: false,
            viewer: viewer.clone(),
        };
        let page = ard.registry.search(&request).await?;
        agents += page.hits.len();
        entries.extend(
            page.hits
                .iter()
                .map(|hit| entry::of_listing(&hit.listing, base, Detail::Full)),
        );
        match page.next_cursor {
            Some(after) if agents < page_size => cursor = Some(after),
            Some(after) => next = Some(after),
            None => break,
        }
    }
    if let Some(after) = next {
        let mut url = url::Url::parse(&format!("{base}{path}"))
            .map_err(|_| ApiError::internal("the public URL is not a URL"))?;
        url.query_pairs_mut().append_pair("cursor", &after);
        let page_id = hex::encode(&<sha2::Sha256 as sha2::Digest>::digest(after.as_bytes())[..8]);
        entries.push(json!({
            "identifier": format!("{}:catalog:page-{page_id}", ard.identifier),
            "type": CATALOG_TYPE,
            "url": url.as_str(),
            "displayName": "More agents",
            "description": "The next page of this registry's agents, by name.",
        }));
    }
    let document = json!({
        "specVersion": "1.0",
        "host": {
            "displayName": "Agent Registry",
            "identifier": ard.identifier,
            "documentationUrl": format!("{base}/docs"),
        },
        "entries": entries,
    });
    let response = crate::cached::card_response(None, headers, &document, None);
    Ok(crate::cached::per_viewer(response, viewer))
}

/// The registry's federated search.
#[utoipa::path(post, path = "/ard/search", tag = "discovery",
    request_body(content = crate::wire::schema::ArdSearchRequest, content_type = "application/json"),
    params(("ard-federated-by" = Option<String>, Header, description = "Set by a registry federating this search: the answer is then local only")),
    responses((status = 200, description = "Ranked results, each with an integer `score` (relevance only, 100 for the best match here) and its `source` registry; `referrals` in `referrals` mode; `pageToken` while more follow; `unanswered` names upstreams that did not answer in time", body = crate::wire::schema::ArdSearchResponse),
              (status = 400, body = ArdErrorBody, description = "`INVALID_ARGUMENT`: a malformed body, query, filter key or value, page size or token"),
              (status = 413, body = ArdErrorBody, description = "`PAYLOAD_TOO_LARGE`"),
              (status = 415, body = ArdErrorBody, description = "`UNSUPPORTED_MEDIA_TYPE`: not JSON"),
              (status = 429, body = ArdErrorBody, description = "`RATE_LIMIT_EXCEEDED`")),
    security((), ("bearer" = [])))]
pub async fn search(
    State(ard): State<Arc<Ard>>,
    viewer: Viewer,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> Result<Response, ArdError> {
    let via = headers
        .get(FEDERATED_BY)
        .and_then(|value| value.to_str().ok());
    let answer = crate::ard::search::run(&ard, &body, via, &viewer).await?;
    let json = answer
        .to_json()
        .map_err(|err| ArdError::from(ApiError::internal(err)))?;
    Ok((
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        json,
    )
        .into_response())
}

/// Facet counts over every match of a query.
#[utoipa::path(post, path = "/ard/explore", tag = "discovery",
    request_body(content = crate::wire::schema::ArdExploreRequest, content_type = "application/json"),
    responses((status = 200, description = "`{resultType: \"facets\", facets: {field: {buckets: [{value, count}], otherCount?}}}`, counted over every local match (the same relevance cut-off as search); never federated", body = crate::wire::schema::ArdExploreResponse),
              (status = 400, body = ArdErrorBody, description = "`INVALID_ARGUMENT`: a malformed body, query, facet field or limit"),
              (status = 413, body = ArdErrorBody, description = "`PAYLOAD_TOO_LARGE`"),
              (status = 415, body = ArdErrorBody, description = "`UNSUPPORTED_MEDIA_TYPE`: not JSON"),
              (status = 429, body = ArdErrorBody, description = "`RATE_LIMIT_EXCEEDED`")),
    security((), ("bearer" = [])))]
pub async fn explore(
    State(ard): State<Arc<Ard>>,
    viewer: Viewer,
    JsonBody(body): JsonBody,
) -> Result<Json<Value>, ArdError> {
    Ok(Json(
        crate::ard::search::explore(&ard, &body, &viewer).await?,
    ))
}

/// The deterministic listing.
#[utoipa::path(get, path = "/ard/agents", tag = "discovery",
    params(("filter" = Option<String>, Query, description = "`field op value` clauses joined by AND: displayName (contains, ignoring case), type and publisherId (comma-separated, OR), createdAfter and updatedAfter (RFC 3339 time or date; `>` after, `>=` at or after). E.g. `type = 'application/mcp-server-card+json' AND createdAfter > '2026-01-01'`"),
           ("orderBy" = Option<String>, Query, description = "`key [ASC|DESC]`, comma-separated; keys displayName (default), createdAt, updatedAt"),
           ("pageSize" = Option<i64>, Query, minimum = 1, description = "Default 20; above 100 reads as 100"),
           ("pageToken" = Option<String>, Query, description = "The previous answer's `pageToken`")),
    responses((status = 200, description = "`{items: [ARD entry], total, pageToken?}`", body = crate::wire::schema::ArdListResponse),
              (status = 400, body = ArdErrorBody, description = "`INVALID_ARGUMENT`: a malformed filter, order, page size or token"),
              (status = 429, body = ArdErrorBody, description = "`RATE_LIMIT_EXCEEDED`")),
    security((), ("bearer" = [])))]
pub async fn list(
    State(ard): State<Arc<Ard>>,
    viewer: Viewer,
    QueryPairs(pairs): QueryPairs,
) -> Result<Json<Value>, ArdError> {
    let one = |name: &str| -> Result<Option<&str>, ArdError> {
        let mut values = pairs.iter().filter(|(key, _)| key == name);
        let first = values.next().map(|(_, value)| value.as_str());
        if values.next().is_some() {
            return Err(ArdError::invalid(format!("{name}: given more than once")));
        }
        Ok(first)
    };
    let page_size = match one("pageSize")? {
        None => None,
        Some(text) => Some(crate::ard::search::whole_number_text(text, "pageSize")?),
    };
    let params = crate::ard::list::ListParams {
        filter: one("filter")?,
        order_by: one("orderBy")?,
        page_size,
        page_token: one("pageToken")?,
    };
    Ok(Json(crate::ard::list::list(&ard, &params, &viewer).await?))
}

/// One entry by its identifier.
#[utoipa::path(get, path = "/ard/agents/{identifier}", tag = "discovery",
    params(("identifier" = String, Path, description = "The entry's `urn:air:` identifier, percent-encoded as one path segment"),
           ("If-None-Match" = Option<String>, Header, description = "ETags already held; a match is 304")),
    responses((status = 200, description = "The complete ARD entry", body = crate::wire::schema::ArdEntry,
                headers(("ETag" = String, description = "Of the entry"), ("Cache-Control" = String), ("Last-Modified" = String))),
              (status = 304, description = "Not modified"),
              (status = 400, body = ArdErrorBody, description = "`INVALID_ARGUMENT`: not a `urn:air:` identifier"),
              (status = 404, body = ArdErrorBody, description = "`NOT_FOUND`: no ACTIVE agent has it")),
    security((), ("bearer" = [])))]
pub async fn lookup(
    State(ard): State<Arc<Ard>>,
    viewer: Viewer,
    headers: HeaderMap,
    PathParam(identifier): PathParam,
) -> Result<Response, ArdError> {
    if identifier.trim() != identifier {
        return Err(ArdError::invalid(
            "identifier: an urn:air: identifier has no surrounding whitespace",
        ));
    }
    let urn = crate::domain::AirUrn::parse(&identifier)
        .map_err(|message| ArdError::invalid(format!("identifier: {message}")))?;
    let agent = ard
        .registry
        .find_active(urn.as_str(), &viewer)
        .await
        .map_err(|err| match err {
            crate::registry::RegistryError::NotFound(_) => {
                ArdError::not_found(format!("no entry '{urn}'"))
            }
            other => other.into(),
        })?;
    let worst = ard.registry.worst_severity(&agent);
    let listing = match worst {
        Some(worst) => Listing::with_severity(&agent, worst),
        None => Listing::of(&agent),
    };
    let entry = entry::of_listing(&listing, &ard.base_url, Detail::Full);
    let response = crate::cached::card_response(None, &headers, &entry, Some(agent.updated_at));
    Ok(crate::cached::per_viewer(response, &viewer))
}
