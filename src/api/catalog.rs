//! The AI Catalog (`/.well-known/ai-catalog.json`): every ACTIVE agent as a catalogue entry that
//! points at its A2A card, so one document lists what `agent-card.json` (one agent per host)
//! cannot. A large catalogue is split the way the format allows: each page is itself a
//! catalogue whose last entry is a nested catalogue, the next page.

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa::IntoParams;

use crate::error::ApiResult;
use crate::extract::Query;
use crate::search::{Filters, Listing, SearchRequest, Sort};
use crate::state::AppState;

/// The catalogue format version served.
pub const SPEC_VERSION: &str = "1.0";
/// Media type of an entry that is an A2A agent card.
pub const A2A_CARD_TYPE: &str = "application/a2a-agent-card+json";
/// Media type of an entry that is a nested catalogue.
pub const CATALOG_TYPE: &str = "application/ai-catalog+json";

/// Which page of the catalogue.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CatalogQuery {
    /// Where a page starts: the `url` of the previous page's nested `next` entry carries it.
    pub cursor: Option<String>,
}

/// The registry's catalogue of ACTIVE agents.
#[utoipa::path(get, path = "/.well-known/ai-catalog.json", tag = "public",
    params(CatalogQuery,
           ("If-None-Match" = Option<String>, Header, description = "ETags already held; a match is 304")),
    responses((status = 200, description = "An AI Catalog: `{specVersion, host, entries: [{identifier, type, url, description, tags, version, updatedAt, metadata}]}`, agents by name; with more than one page of agents, the last entry is the next page as a nested catalogue", body = Object,
                headers(("ETag" = String, description = "Of the page's content"), ("Cache-Control" = String))),
              (status = 304, description = "Not modified"),
              (status = 400, body = crate::error::Problem, description = "`invalid_parameter`: a malformed cursor")))]
pub async fn ai_catalog(
    State(state): State<AppState>,
    Query(query): Query<CatalogQuery>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let base = &state.base_url;
    let page_size = usize::try_from(state.config.ai_catalog_page_size).unwrap_or(1000);
    let mut entries = Vec::new();
    let mut cursor = query.cursor.filter(|cursor| !cursor.is_empty());
    let mut next = None;
    // The search function pages by at most 100: gather one catalogue page from several.
    while entries.len() < page_size {
        let request = SearchRequest {
            text: String::new(),
            filters: Filters::default(),
            sort: Some(Sort::Name),
            limit: (page_size - entries.len()).min(crate::search::MAX_LIMIT),
            cursor: cursor.take(),
        };
        let page = state.registry.search(&request).await?;
        entries.extend(page.hits.iter().map(|hit| entry(&hit.listing, base)));
        match page.next_cursor {
            Some(after) if entries.len() < page_size => cursor = Some(after),
            Some(after) => next = Some(after),
            None => break,
        }
    }
    if let Some(after) = next {
        let mut url = url::Url::parse(&format!("{base}/.well-known/ai-catalog.json"))
            .map_err(|_| crate::error::ApiError::internal("the public URL is not a URL"))?;
        url.query_pairs_mut().append_pair("cursor", &after);
        entries.push(json!({
            "identifier": format!("{base}/.well-known/ai-catalog.json#next"),
            "type": CATALOG_TYPE,
            "url": url.as_str(),
            "displayName": "More agents",
            "description": "The next page of this registry's agents, by name.",
        }));
    }
    let catalog = json!({
        "specVersion": SPEC_VERSION,
        "host": {
            "displayName": "Agent Registry",
            "identifier": base.as_ref(),
            "documentationUrl": format!("{base}/docs"),
        },
        "entries": entries,
    });
    Ok(crate::a2a::card_response(None, &headers, &catalog, None))
}

/// One agent as a catalogue entry: its package name, its card by URL, and what a crawler
/// filters on.
fn entry(listing: &Listing, base: &str) -> Value {
    let mut entry = json!({
        "identifier": listing.package_name,
        "type": A2A_CARD_TYPE,
        "url": format!("{base}/public/agents/resolve/{}", listing.package_name),
        "description": listing.description,
        "updatedAt": listing.updated_at,
        "metadata": {
            "registry.id": listing.id,
            "registry.record": format!("{base}/public/agents/{}", listing.package_name),
            "registry.verification_level": listing.verification_level,
        },
    });
    if !listing.tags.is_empty() {
        entry["tags"] = json!(listing.tags);
    }
    if let Some(version) = &listing.version {
        entry["version"] = json!(version);
    }
    entry
}
