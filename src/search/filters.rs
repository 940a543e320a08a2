//! Search filters, parsed once from what any transport received (query string, JSON body,
//! JSON-RPC data part) so every path applies exactly the same rules.

use crate::domain::HealthStatus;
use crate::domain::payment::{PaymentFilter, PaymentFilterInput};
use crate::domain::scan::Severity;
use crate::domain::x402::X402Filter;
use crate::store::VerificationLevel;

use super::SearchError;

/// Filter values as a transport received them: comma lists already joined with `,`.
#[derive(Debug, Default, Clone)]
pub struct RawFilters {
    pub target: Option<String>,
    pub category: Option<String>,
    pub tags: Option<String>,
    pub verification_level: Option<String>,
    pub payment: PaymentFilterInput,
    /// `collapse`: one agent per duplicate group (default), or every agent.
    pub collapse: Option<bool>,
    /// `health`: comma-separated statuses (OR).
    pub health: Option<String>,
    /// `max_severity`: the worst scanner finding an agent may have.
    pub max_severity: Option<String>,
    /// `include_deprecated`: keep deprecated agents (default), or drop them.
    pub include_deprecated: Option<bool>,
}

/// Most distinct values one filter may list.
pub const MAX_FILTER_TERMS: usize = 32;

/// Parsed filters. Empty lists are filters not applied.
#[derive(Debug, Clone)]
pub struct Filters {
    /// Lowercase; an agent's target must equal one of them (case-insensitively).
    pub targets: Vec<String>,
    pub categories: Vec<String>,
    /// Lowercase; an agent must carry one of them.
    pub tags: Vec<String>,
    pub verification_levels: Vec<VerificationLevel>,
    pub payment: PaymentFilter,
    /// The x402 discovery paths' filter: only agents taking x402 payments, with an offer
    /// meeting its constraints. No query string or body of the search paths sets it.
    pub x402: Option<X402Filter>,
    /// The MCP Registry paths' filters: only agents that list an MCP remote or package, changed
    /// at or after a time, of one version. No query string or body of the search paths sets
    /// them.
    pub mcp: Option<McpFilter>,
    /// Show one agent per duplicate group (`duplicates`): what the search paths do unless asked
    /// for `collapse=false`. Not a filter `is_empty` counts: it hides no distinct agent.
    pub collapse_duplicates: bool,
    /// Only agents whose last probe found one of these (an agent never probed is `unknown`).
    pub health: Vec<HealthStatus>,
    /// The scanner severities an agent's worst finding may have (`max_severity` and those
    /// below it); empty: any.
    pub severities: Vec<Severity>,
    /// Keep deprecated agents (the default; they rank below their equals), or drop them.
    pub include_deprecated: bool,
    /// A test on each listed agent that a transport compiled from its own filter language (the
    /// ARD API's term paths). No query string or body of the search paths sets it.
    pub listing: Option<ListingFilter>,
}

/// A per-agent test on the listing, applied with the other per-agent filters.
#[derive(Clone)]
pub struct ListingFilter(pub std::sync::Arc<dyn Fn(&super::Listing) -> bool + Send + Sync>);

impl std::fmt::Debug for ListingFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ListingFilter(..)")
    }
}

/// Which MCP servers the MCP Registry read API lists.
#[derive(Debug, Default, Clone)]
pub struct McpFilter {
    /// Only records updated at or after this.
    pub updated_since: Option<crate::timestamp::Timestamp>,
    /// Only this version (as the record states it, `1.0.0` when none).
    pub version: Option<String>,
    /// Only servers whose MCP name or description contains this text, ignoring case: the MCP
    /// Registry's `search`, a filter rather than a ranking.
    pub contains: Option<String>,
}

impl McpFilter {
    /// Whether a listed agent passes: it is an MCP server and meets the constraints.
    pub fn matches(&self, listing: &super::Listing) -> bool {
        listing.mcp
            && self
                .updated_since
                .is_none_or(|since| listing.updated_at >= since)
            && self.version.as_deref().is_none_or(|version| {
                listing.version().unwrap_or(super::DEFAULT_VERSION) == version
            })
            && self.contains.as_deref().is_none_or(|text| {
                let name = crate::domain::package_name::mcp_name(listing.package_name());
                contains_ignoring_case(&name, text)
                    || contains_ignoring_case(listing.description(), text)
            })
    }
}

/// Whether `haystack` contains `needle`, ignoring case (ASCII letters compared in place; any
/// other text lowercased first).
pub fn contains_ignoring_case(haystack: &str, needle: &str) -> bool {
    if needle.is_empty() {
        return true;
    }
    if !needle.is_ascii() {
        return haystack.to_lowercase().contains(&needle.to_lowercase());
    }
    haystack
        .as_bytes()
        .windows(needle.len())
        .any(|window| window.eq_ignore_ascii_case(needle.as_bytes()))
}

impl Default for Filters {
    /// No filter: every agent, deprecated ones included, duplicates not collapsed.
    fn default() -> Self {
        Self {
            targets: Vec::new(),
            categories: Vec::new(),
            tags: Vec::new(),
            verification_levels: Vec::new(),
            payment: PaymentFilter::default(),
            x402: None,
            mcp: None,
            collapse_duplicates: false,
            health: Vec::new(),
            severities: Vec::new(),
            include_deprecated: true,
            listing: None,
        }
    }
}

impl Filters {
    /// No filter at all: every agent passes.
    pub fn is_empty(&self) -> bool {
        self.targets.is_empty()
            && self.categories.is_empty()
            && self.tags.is_empty()
            && self.verification_levels.is_empty()
            && self.payment.is_empty()
            && self.x402.is_none()
            && self.mcp.is_none()
            && self.health.is_empty()
            && self.severities.is_empty()
            && self.include_deprecated
            && self.listing.is_none()
    }

    /// Whether some filter is tested agent by agent (the rest are set operations of the index).
    pub fn per_agent(&self) -> bool {
        !self.payment.is_empty()
            || self.x402.is_some()
            || self.mcp.is_some()
            || self.listing.is_some()
    }

    /// Whether a listed agent passes the per-agent filters.
    pub fn listing_matches(&self, listing: &super::Listing) -> bool {
        self.payment_matches(listing.payment.as_deref())
            && self.mcp.as_ref().is_none_or(|mcp| mcp.matches(listing))
            && self.listing.as_ref().is_none_or(|test| (test.0)(listing))
    }

    /// Whether an agent with these payment terms passes the per-agent filters (payment and
    /// x402); the facet filters are set operations of the index.
    pub fn payment_matches(&self, payment: Option<&crate::domain::Payment>) -> bool {
        self.payment.matches(payment) && self.x402.as_ref().is_none_or(|x402| x402.matches(payment))
    }

    pub fn parse(raw: &RawFilters) -> Result<Self, SearchError> {
        // Every list is bounded before any term is read: each term costs work per agent.
        let lists = [
            ("target", &raw.target),
            ("category", &raw.category),
            ("tags", &raw.tags),
            ("verification_level", &raw.verification_level),
            ("payment_model", &raw.payment.model),
            ("payment_protocol", &raw.payment.protocol),
            ("payment_rail", &raw.payment.rail),
            ("payment_direction", &raw.payment.direction),
            ("health", &raw.health),
        ];
        for (parameter, value) in lists {
            // Blank and repeated entries cost nothing once read, so only distinct ones count.
            let terms = comma_terms(value.as_deref())
                .into_iter()
                .collect::<std::collections::HashSet<_>>()
                .len();
            if terms > MAX_FILTER_TERMS {
                return Err(SearchError::InvalidParameter {
                    parameter: parameter.to_owned(),
                    message: format!("{terms} values; at most {MAX_FILTER_TERMS} are accepted"),
                });
            }
        }
        let payment =
            PaymentFilter::parse(&raw.payment).map_err(|err| SearchError::InvalidParameter {
                parameter: err.parameter.to_owned(),
                message: err.message.clone(),
            })?;
        let verification_levels = comma_terms(raw.verification_level.as_deref())
            .into_iter()
            .map(|term| {
                VerificationLevel::parse(&term).ok_or_else(|| SearchError::InvalidParameter {
                    parameter: "verification_level".to_owned(),
                    message: format!(
                        "unknown verification_level '{}'; allowed: unverified, domain_verified",
                        crate::domain::truncate(&term, 40)
                    ),
                })
            })
            .collect::<Result<_, _>>()?;
        let health = comma_terms(raw.health.as_deref())
            .into_iter()
            .map(|term| {
                HealthStatus::parse(&term).ok_or_else(|| SearchError::InvalidParameter {
                    parameter: "health".to_owned(),
                    message: format!(
                        "unknown health '{}'; allowed: up, down, not_conformant, unknown, not_probed",
                        crate::domain::truncate(&term, 40)
                    ),
                })
            })
            .collect::<Result<_, _>>()?;
        let severities = match raw.max_severity.as_deref().map(str::trim) {
            None | Some("") => Vec::new(),
            Some(text) => {
                let max = Severity::parse(text).ok_or_else(|| SearchError::InvalidParameter {
                    parameter: "max_severity".to_owned(),
                    message: format!(
                        "unknown max_severity '{}'; allowed: none, low, medium, high, critical",
                        crate::domain::truncate(text, 40)
                    ),
                })?;
                Severity::ALL
                    .into_iter()
                    .filter(|severity| *severity <= max)
                    .collect()
            }
        };
        Ok(Self {
            targets: comma_terms(raw.target.as_deref()),
            categories: comma_terms(raw.category.as_deref()),
            tags: comma_terms(raw.tags.as_deref()),
            verification_levels,
            payment,
            x402: None,
            mcp: None,
            collapse_duplicates: raw.collapse.unwrap_or(true),
            health,
            severities,
            include_deprecated: raw.include_deprecated.unwrap_or(true),
            listing: None,
        })
    }
}

/// Split a comma list into trimmed, lowercase, non-empty terms. Values may contain spaces
/// (`Location Services`), so only commas separate them.
pub fn comma_terms(value: Option<&str>) -> Vec<String> {
    value
        .unwrap_or_default()
        .split(',')
        .map(|term| term.trim().to_lowercase())
        .filter(|term| !term.is_empty())
        .collect()
}

/// Join the values of a JSON string-or-array filter with commas.
pub fn join_json_value(value: &serde_json::Value) -> Option<Result<String, ()>> {
    match value {
        serde_json::Value::Null => None,
        serde_json::Value::String(s) => Some(Ok(s.clone())),
        serde_json::Value::Array(items) => Some(
            items
                .iter()
                .map(|item| item.as_str().map(str::to_owned).ok_or(()))
                .collect::<Result<Vec<_>, _>>()
                .map(|parts| parts.join(",")),
        ),
        _ => Some(Err(())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comma_terms_are_trimmed_lowercased_and_keep_inner_spaces() {
        assert_eq!(
            comma_terms(Some(" Location Services , ,Finance")),
            vec!["location services", "finance"]
        );
        assert!(comma_terms(Some(" , ")).is_empty());
        assert!(comma_terms(None).is_empty());
    }

    #[test]
    fn unknown_verification_levels_are_rejected() {
        let raw = RawFilters {
            verification_level: Some("gold".into()),
            ..RawFilters::default()
        };
        assert!(matches!(
            Filters::parse(&raw),
            Err(SearchError::InvalidParameter { parameter, .. }) if parameter == "verification_level"
        ));
    }

    #[test]
    fn json_filters_may_be_strings_or_arrays_of_strings() {
        let array = serde_json::json!(["a", "b"]);
        assert_eq!(join_json_value(&array), Some(Ok("a,b".to_owned())));
        assert_eq!(
            join_json_value(&serde_json::json!("x")),
            Some(Ok("x".into()))
        );
        assert_eq!(join_json_value(&serde_json::json!(3)), Some(Err(())));
        assert_eq!(join_json_value(&serde_json::Value::Null), None);
    }
}
