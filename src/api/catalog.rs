//! Publishing from an AI Catalog or ARD manifest: publishing from a URL that holds one publishes
//! each of its A2A card entries. (The registry's own manifest is served by `ard`.)

use serde::Serialize;
use serde_json::{Value, json};
use utoipa::ToSchema;

use crate::auth::Caller;
use crate::domain::{A2aCard, FieldError};
use crate::error::{ApiError, ApiResult};
use crate::store::Agent;

use crate::state::AppState;
use crate::wire::AgentRecord;

use crate::ard::{A2A_TYPE as A2A_CARD_TYPE, CATALOG_TYPE};

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
                crate::wire::fetch::fetch_card(&state.outbound, &link).await?,
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
    // An entry named by its discovery identifier keeps it.
    if crate::domain::urn::is_urn(identifier) {
        body["identifier"] = json!(identifier);
    }
    if let Some(manifest_url) = manifest_url {
        body["manifest_url"] = json!(manifest_url);
    }
    let draft = super::agents::parse_draft(state, &body).await?;
    Ok(state.registry.publish(draft, &caller.actor()).await?)
}

/// The package name an entry identifier gives (`domain::urn::package_name_of`).
fn package_name_of(identifier: &str) -> Option<String> {
    crate::domain::urn::package_name_of(identifier).map(|name| name.as_str().to_owned())
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
            Some("com.acme-corp.a2a.finance")
        );
        assert_eq!(package_name_of("finance-agent"), None);
        assert_eq!(package_name_of("urn:air:"), None);
    }
}
