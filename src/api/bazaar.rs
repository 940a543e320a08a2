//! x402 Bazaar discovery: the ACTIVE agents that take x402 payments, listed as the paid
//! resources of a Bazaar catalogue, so x402 clients find them the way they find any paid HTTP
//! resource (docs/payments.md). Both paths run the registry's one search with the x402 filter.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::auth::Viewer;
use crate::domain::x402::{self, X402Filter, X402FilterInput};
use crate::error::{ApiError, ApiResult};
use crate::extract::Query;
use crate::search::{Filters, Listing, SearchPage, SearchRequest, Sort, clamp_limit};
use crate::state::AppState;
use crate::timestamp::Timestamp;

/// The x402 protocol version of these shapes (CAIP-2 networks, `amount`).
pub const X402_VERSION: u32 = 2;
/// Resources per page unless `limit` says otherwise.
pub const DEFAULT_LIMIT: usize = 20;
/// Largest page; larger `limit`s are clamped.
pub const MAX_LIMIT: usize = 100;

/// The filters both discovery paths take.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ResourceFilters {
    /// Resource type: every agent is an `http` resource (ASCII case ignored); any other value
    /// matches nothing.
    #[serde(rename = "type")]
    #[param(rename = "type")]
    pub resource_type: Option<String>,
    /// Network: a CAIP-2 id (`eip155:8453`) or the registry's network name (`base`). An id no
    /// agent uses matches nothing.
    #[param(
        pattern = r"^(?:[A-Za-z0-9][A-Za-z0-9-]{0,63}|[A-Za-z0-9-]{3,8}:[A-Za-z0-9_-]{1,32})?$"
    )]
    pub network: Option<String>,
    /// Asset: its x402 identifier (the token contract on EVM chains, the mint on Solana; ASCII
    /// case ignored) or the registry's asset name (`usdc`).
    #[param(pattern = r"^(?:[A-Za-z0-9][A-Za-z0-9._:-]{0,127})?$")]
    pub asset: Option<String>,
    /// Payment scheme, e.g. `exact` (ASCII case ignored).
    #[param(pattern = r"^(?:[A-Za-z0-9][A-Za-z0-9_-]{0,31})?$")]
    pub scheme: Option<String>,
    /// Payee address; `0x` addresses compare ignoring ASCII case, others exactly.
    #[serde(rename = "payTo")]
    #[param(rename = "payTo", pattern = r"^[!-~]{0,128}$")]
    pub pay_to: Option<String>,
    /// Highest price, in the asset's smallest unit (combine with `asset` to compare like with
    /// like). Agents without a price in an offered asset do not match.
    #[serde(rename = "maxAmount")]
    #[param(rename = "maxAmount", pattern = r"^[0-9]{0,78}$")]
    pub max_amount: Option<String>,
    /// Extension keys: no resource listed here carries extensions, so any value matches
    /// nothing.
    pub extensions: Option<String>,
}

/// `GET /discovery/resources`: offset paging (beside `ResourceFilters`).
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ResourcesQuery {
    /// Page size, default 20, max 100; values below 1 are read as 1, above 100 as 100.
    #[serde(default, deserialize_with = "crate::extract::integer")]
    #[param(value_type = Option<i64>)]
    pub limit: Option<i64>,
    /// Resources to skip, default 0. Resources are listed in the order they went live, so a
    /// resource going live between two requests does not shift the pages before it.
    #[serde(default, deserialize_with = "crate::extract::integer")]
    #[param(value_type = Option<i64>)]
    pub offset: Option<i64>,
}

/// `GET /discovery/search`: a query and cursor paging (beside `ResourceFilters`).
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SearchQuery {
    /// What to look for, in keywords or a sentence (ranked as `GET /public/agents?q=` ranks).
    #[param(
        required = true,
        min_length = 1,
        pattern = r"[^\t\n\u000b\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"
    )]
    pub query: Option<String>,
    /// Page size, default 20, max 100; values below 1 are read as 1, above 100 as 100.
    #[serde(default, deserialize_with = "crate::extract::integer")]
    #[param(value_type = Option<i64>)]
    pub limit: Option<i64>,
    /// `pagination.cursor` of the previous page of the same search.
    pub cursor: Option<String>,
}

impl ResourceFilters {
    /// The search filters, or `None` when `type` or `extensions` rule out every agent.
    fn filters(&self) -> ApiResult<Option<Filters>> {
        let input = X402FilterInput {
            network: self.network.clone(),
            asset: self.asset.clone(),
            scheme: self.scheme.clone(),
            pay_to: self.pay_to.clone(),
            max_amount: self.max_amount.clone(),
        };
        let x402 = X402Filter::parse(&input).map_err(|err| {
            ApiError::invalid_parameter(format!("{}: {}", err.parameter, err.message))
        })?;
        let http = self
            .resource_type
            .as_deref()
            .is_none_or(|kind| kind.is_empty() || kind.eq_ignore_ascii_case("http"));
        let no_extensions = self.extensions.as_deref().is_none_or(str::is_empty);
        Ok((http && no_extensions).then(|| Filters {
            x402: Some(x402),
            ..Filters::default()
        }))
    }
}

/// The page a search for `text` (empty: every agent) with `filters` finds, in `sort` order
/// from `cursor` or `offset`; `None` when there are no filters: they rule out every agent.
async fn search(
    state: &AppState,
    viewer: Viewer,
    filters: Option<Filters>,
    text: String,
    sort: Sort,
    (limit, cursor, offset): (usize, Option<String>, usize),
) -> ApiResult<Option<SearchPage>> {
    let Some(filters) = filters else {
        return Ok(None);
    };
    let request = SearchRequest {
        text,
        filters,
        sort: Some(sort),
        limit,
        cursor,
        offset,
        facets: false,
        viewer,
    };
    Ok(Some(state.registry.search(&request).await?))
}

/// The only kind of resource listed: agents are called over HTTP.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ResourceType {
    Http,
}

/// One way to pay for a resource, in x402's terms.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PaymentRequirements {
    /// `exact` unless the agent names another scheme.
    #[schema(example = "exact")]
    pub scheme: String,
    /// CAIP-2 network id.
    #[schema(example = "eip155:8453")]
    pub network: String,
    /// The asset as x402 names it: the token contract on EVM chains, the mint on Solana.
    #[schema(example = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913")]
    pub asset: String,
    /// The payee, when the agent gave one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pay_to: Option<String>,
    /// The price in the asset's smallest unit, when the agent's price is in this asset.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(example = "10000")]
    pub amount: Option<String>,
}

/// What the registry knows of the agent behind a resource.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceMetadata {
    /// Display name.
    pub name: String,
    /// What the agent does.
    pub description: String,
    /// The agent's package name in the registry.
    pub package_name: String,
    /// The agent's A2A card, signed by the registry.
    pub card_url: String,
}

/// One paid resource: an agent that takes x402 payments.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiscoveryResource {
    /// The agent's A2A endpoint, or its public record in the registry when it has none.
    pub resource: String,
    #[serde(rename = "type")]
    #[schema(rename = "type")]
    pub kind: ResourceType,
    /// Always 2.
    #[schema(example = 2)]
    pub x402_version: u32,
    /// One entry per rail the agent takes x402 payments on that the registry can name in
    /// x402's terms; empty when it names none.
    pub accepts: Vec<PaymentRequirements>,
    /// When the agent's record last changed.
    pub last_updated: Timestamp,
    pub metadata: ResourceMetadata,
}

/// Where a list page is.
#[derive(Debug, Serialize, ToSchema)]
pub struct OffsetPagination {
    /// The page size used (after clamping).
    pub limit: usize,
    /// Resources skipped.
    pub offset: u64,
    /// Matches over all pages.
    pub total: usize,
}

/// `GET /discovery/resources`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiscoveryResources {
    /// Always 2.
    #[schema(example = 2)]
    pub x402_version: u32,
    pub items: Vec<DiscoveryResource>,
    pub pagination: OffsetPagination,
}

/// Where a search page is.
#[derive(Debug, Serialize, ToSchema)]
pub struct CursorPagination {
    /// The page size used (after clamping).
    pub limit: usize,
    /// Pass back as `cursor` for the next page; null on the last page.
    pub cursor: Option<String>,
    /// Matches over all pages.
    pub total: usize,
}

/// `GET /discovery/search`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiscoverySearch {
    /// Always 2.
    #[schema(example = 2)]
    pub x402_version: u32,
    /// Best match first (the x402 Bazaar's name for the list).
    pub resources: Vec<DiscoveryResource>,
    /// The same list under the name `/discovery/resources` uses, for clients that read both
    /// answers alike.
    pub items: Vec<DiscoveryResource>,
    /// Always false: every match is reachable through `pagination.cursor`.
    pub partial_results: bool,
    pub pagination: CursorPagination,
}

impl DiscoveryResource {
    fn of(listing: &Listing, base_url: &str) -> Self {
        let accepts = listing
            .payment
            .as_ref()
            .map(|payment| {
                x402::offers(payment)
                    .into_iter()
                    .map(|offer| PaymentRequirements {
                        scheme: offer.scheme.to_owned(),
                        network: offer.network.to_owned(),
                        asset: offer.asset.to_owned(),
                        pay_to: offer.pay_to.map(str::to_owned),
                        amount: offer.amount.map(str::to_owned),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let package = listing.package_name();
        Self {
            resource: listing.url().map_or_else(
                || format!("{base_url}/public/agents/{package}"),
                str::to_owned,
            ),
            kind: ResourceType::Http,
            x402_version: X402_VERSION,
            accepts,
            last_updated: listing.updated_at,
            metadata: ResourceMetadata {
                name: listing.name().to_owned(),
                description: listing.description().to_owned(),
                package_name: package.to_owned(),
                card_url: format!("{base_url}/public/agents/resolve/{package}"),
            },
        }
    }
}

fn resources(page: Option<&SearchPage>, base_url: &str) -> Vec<DiscoveryResource> {
    page.map(|page| {
        page.hits
            .iter()
            .map(|hit| DiscoveryResource::of(&hit.listing, base_url))
            .collect()
    })
    .unwrap_or_default()
}

/// ACTIVE agents that take x402 payments, in the order they went live.
#[utoipa::path(get, path = "/discovery/resources", tag = "discovery",
    params(ResourceFilters, ResourcesQuery),
    responses((status = 200, body = DiscoveryResources)),
    security((), ("bearer" = [])))]
pub async fn list_resources(
    State(state): State<AppState>,
    viewer: Viewer,
    Query(filters): Query<ResourceFilters>,
    Query(query): Query<ResourcesQuery>,
) -> ApiResult<Json<DiscoveryResources>> {
    let filters = filters.filters()?;
    let limit = clamp_limit(query.limit, DEFAULT_LIMIT, MAX_LIMIT);
    let offset = match query.offset {
        Some(offset) if offset < 0 => {
            return Err(ApiError::invalid_parameter("offset: must not be negative"));
        }
        offset => offset.unwrap_or(0).unsigned_abs(),
    };
    let skipped = usize::try_from(offset).unwrap_or(usize::MAX);
    let paging = (limit, None, skipped);
    let page = search(&state, viewer, filters, String::new(), Sort::Oldest, paging).await?;
    Ok(Json(DiscoveryResources {
        x402_version: X402_VERSION,
        items: resources(page.as_ref(), &state.base_url),
        pagination: OffsetPagination {
            limit,
            offset,
            total: page.as_ref().map_or(0, |page| page.total),
        },
    }))
}

/// ACTIVE agents that take x402 payments, best match for `query` first.
#[utoipa::path(get, path = "/discovery/search", tag = "discovery",
    params(SearchQuery, ResourceFilters),
    responses((status = 200, body = DiscoverySearch)),
    security((), ("bearer" = [])))]
pub async fn search_resources(
    State(state): State<AppState>,
    viewer: Viewer,
    Query(query): Query<SearchQuery>,
    Query(filters): Query<ResourceFilters>,
) -> ApiResult<Json<DiscoverySearch>> {
    let text = match query.query.as_deref() {
        None => return Err(ApiError::invalid_parameter("query: is required")),
        Some(text) if text.trim().is_empty() => {
            return Err(ApiError::invalid_parameter("query: must not be blank"));
        }
        Some(text) => text.to_owned(),
    };
    let filters = filters.filters()?;
    let limit = clamp_limit(query.limit, DEFAULT_LIMIT, MAX_LIMIT);
    let cursor = query.cursor.clone().filter(|cursor| !cursor.is_empty());
    let page = search(
        &state,
        viewer,
        filters,
        text,
        Sort::Relevance,
        (limit, cursor, 0),
    )
    .await?;
    let found = resources(page.as_ref(), &state.base_url);
    Ok(Json(DiscoverySearch {
        x402_version: X402_VERSION,
        items: found.clone(),
        resources: found,
        partial_results: false,
        pagination: CursorPagination {
            limit,
            cursor: page.as_ref().and_then(|page| page.next_cursor.clone()),
            total: page.as_ref().map_or(0, |page| page.total),
        },
    }))
}
