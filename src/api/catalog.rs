//! The AI Catalog (`/.well-known/ai-catalog.json`): every ACTIVE agent as a catalogue entry that
//! points at its A2A card, so one document lists what `agent-card.json` (one agent per host)
//! cannot. A large catalogue is split the way the format allows: each page is itself a
//! catalogue whose last entry is a nested catalogue, the next page. And the other way in:
//! publishing from a URL that holds a catalogue publishes each of its A2A card entries.

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::{IntoParams, ToSchema};

use crate::auth::Caller;
use crate::domain::{A2aCard, FieldError, PackageName};
use crate::error::{ApiError, ApiResult};
use crate::extract::Query;
use crate::store::Agent;

use super::wire::AgentRecord;
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
            offset: 0,
            facets: false,
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
            .map_err(|_| ApiError::internal("the public URL is not a URL"))?;
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
        "identifier": listing.package_name(),
        "type": A2A_CARD_TYPE,
        "url": format!("{base}/public/agents/resolve/{}", listing.package_name()),
        "description": listing.description(),
        "updatedAt": listing.updated_at,
        "metadata": {
            "registry.id": listing.id(),
            "registry.record": format!("{base}/public/agents/{}", listing.package_name()),
            "registry.verification_level": listing.verification_level,
        },
    });
    if listing.tags().len() > 0 {
        entry["tags"] = json!(listing.tags().collect::<Vec<_>>());
    }
    if let Some(version) = listing.version() {
        entry["version"] = json!(version);
    }
    entry
}

/// Most catalogue entries published by one request; the rest are reported as skipped.
pub const MAX_PUBLISHED_ENTRIES: usize = 100;

/// What publishing from an AI Catalog did with each entry.
#[derive(Debug, Serialize, ToSchema)]
pub struct CatalogPublished {
    /// The catalogue's URL.
    pub catalog: String,
    pub created: usize,
    pub rejected: usize,
    pub skipped: usize,
    /// One result per entry, in the catalogue's order.
    pub results: Vec<EntryResult>,
}

/// The outcome of one catalogue entry.
#[derive(Debug, Serialize, ToSchema)]
pub struct EntryResult {
    /// The entry's `identifier`, as given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identifier: Option<String>,
    /// `created` (in STAGE), `rejected` (see `errors`), or `skipped` (see `reason`: not an A2A
    /// card, a nested catalogue, or past the per-request limit).
    pub status: EntryStatus,
    /// The created agent, the owner's view.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentRecord>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<FieldError>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum EntryStatus {
    Created,
    Rejected,
    Skipped,
}

/// Publish each A2A card entry of the AI Catalog at `url` as a STAGE agent of `caller`. An
/// entry's package name is its `identifier` when that is one, or built from an
/// `urn:air:{domain}:…:{name}` identifier as `{reversed domain}.{name}`.
pub async fn publish_entries(
    state: &AppState,
    caller: &Caller,
    url: &url::Url,
    catalog: &Value,
) -> CatalogPublished {
    let entries = catalog["entries"].as_array().map_or(&[][..], Vec::as_slice);
    let mut results = Vec::with_capacity(entries.len());
    for (i, entry) in entries.iter().enumerate() {
        let identifier = entry["identifier"].as_str().map(str::to_owned);
        let result = if i >= MAX_PUBLISHED_ENTRIES {
            skipped(
                identifier,
                format!("at most {MAX_PUBLISHED_ENTRIES} entries are published per request"),
            )
        } else if entry["type"] == CATALOG_TYPE {
            skipped(
                identifier,
                "a nested catalogue: publish it from its own URL".to_owned(),
            )
        } else if entry["type"] != A2A_CARD_TYPE {
            skipped(
                identifier,
                format!("not an A2A agent card ({A2A_CARD_TYPE})"),
            )
        } else {
            match publish_entry(state, caller, url, entry).await {
                Ok(agent) => EntryResult {
                    identifier,
                    status: EntryStatus::Created,
                    agent: Some(AgentRecord::owned(&agent)),
                    errors: Vec::new(),
                    reason: None,
                },
                Err(err) => EntryResult {
                    identifier,
                    status: EntryStatus::Rejected,
                    agent: None,
                    errors: if err.errors.is_empty() {
                        vec![FieldError::new("", err.detail)]
                    } else {
                        err.errors
                    },
                    reason: None,
                },
            }
        };
        results.push(result);
    }
    let count = |status| results.iter().filter(|r| r.status == status).count();
    CatalogPublished {
        catalog: url.to_string(),
        created: count(EntryStatus::Created),
        rejected: count(EntryStatus::Rejected),
        skipped: count(EntryStatus::Skipped),
        results,
    }
}

fn skipped(identifier: Option<String>, reason: String) -> EntryResult {
    EntryResult {
        identifier,
        status: EntryStatus::Skipped,
        agent: None,
        errors: Vec::new(),
        reason: Some(reason),
    }
}

async fn publish_entry(
    state: &AppState,
    caller: &Caller,
    catalog_url: &url::Url,
    entry: &Value,
) -> ApiResult<Agent> {
    let identifier = entry["identifier"].as_str().unwrap_or_default();
    let package_name = package_name_of(identifier).ok_or_else(|| {
        ApiError::validation(vec![FieldError::new(
            "identifier",
            "neither a package name (com.example.agent) nor urn:air:{domain}:…:{name}",
        )])
    })?;
    let (card, manifest_url) = match (entry.get("data"), entry["url"].as_str()) {
        (Some(data), _) if data.is_object() => (
            A2aCard::parse(data.clone()).map_err(ApiError::validation)?,
            None,
        ),
        (_, Some(link)) => {
            let link = catalog_url
                .join(link)
                .map_err(|_| ApiError::validation(vec![FieldError::new("url", "not a URL")]))?;
            (
                crate::a2a::fetch::fetch_card(&state.outbound, &link).await?,
                Some(link.to_string()),
            )
        }
        _ => {
            return Err(ApiError::validation(vec![FieldError::new(
                "url",
                "an entry needs a `url` or an inline `data` card",
            )]));
        }
    };
    let mut body = json!({"package_name": package_name, "card": card.into_value()});
    if let Some(manifest_url) = manifest_url {
        body["manifest_url"] = json!(manifest_url);
    }
    let draft = super::agents::parse_draft(state, &body).await?;
    Ok(state.registry.publish(draft, &caller.actor()).await?)
}

/// The package name an entry identifier gives.
fn package_name_of(identifier: &str) -> Option<String> {
    if let Ok(name) = PackageName::parse(identifier) {
        return Some(name.as_str().to_owned());
    }
    let rest = identifier.strip_prefix("urn:air:")?;
    let mut parts = rest.split(':');
    let domain = parts.next()?;
    let name = parts.next_back()?;
    let reversed: Vec<&str> = domain.split('.').rev().collect();
    let candidate = format!("{}.{name}", reversed.join("."));
    PackageName::parse(&candidate)
        .ok()
        .map(|name| name.as_str().to_owned())
}

#[cfg(test)]
mod tests {
    use super::package_name_of;

    #[test]
    fn entry_identifiers_give_package_names() {
        assert_eq!(
            package_name_of("com.example.weather").as_deref(),
            Some("com.example.weather")
        );
        assert_eq!(
            package_name_of("urn:air:acme-corp.com:a2a:finance").as_deref(),
            Some("com.acme-corp.finance")
        );
        assert_eq!(package_name_of("finance-agent"), None);
        assert_eq!(package_name_of("urn:air:"), None);
    }
}
