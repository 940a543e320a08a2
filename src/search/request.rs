//! Building a `SearchRequest` from what each transport received: a query string (repeated keys
//! joined with `,`) or a JSON object (`filters`, top-level payment keys, camelCase aliases).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::domain::payment::PaymentFilterInput;

use super::filters::join_json_value;
use super::{Filters, RawFilters};

/// Why a search request cannot run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SearchError {
    #[error("{message}")]
    InvalidParameter { parameter: String, message: String },
    #[error("malformed or stale cursor")]
    InvalidCursor,
    #[error("unknown sort '{0}'; allowed: relevance, newest, name")]
    InvalidSort(String),
}

/// Result order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Sort {
    /// Best match first (needs query text; without it, falls back to `Newest`).
    Relevance,
    /// Most recently published first.
    Newest,
    /// By display name, A→Z.
    Name,
    /// Longest published first: agents that go live join the end, so offsets into this order
    /// stay put while the catalogue grows (the x402 resource list pages by offset). Not a
    /// `sort` value of the search paths.
    Oldest,
}

impl Sort {
    pub fn parse(value: &str) -> Result<Self, SearchError> {
        match value.trim().to_ascii_lowercase().as_str() {
            "relevance" => Ok(Self::Relevance),
            "newest" => Ok(Self::Newest),
            "name" => Ok(Self::Name),
            _ => Err(SearchError::InvalidSort(crate::domain::truncate(value, 40))),
        }
    }
}

/// One search, as every transport expresses it.
#[derive(Debug, Clone)]
pub struct SearchRequest {
    pub text: String,
    pub filters: Filters,
    /// `None`: relevance with query text, else newest.
    pub sort: Option<Sort>,
    /// Already clamped to 1..=MAX_LIMIT by the caller's defaults.
    pub limit: usize,
    pub cursor: Option<String>,
    /// Matches skipped (after the cursor, if any) before the page: offset paging, for the
    /// paths that offer it. 0 everywhere else.
    pub offset: usize,
    /// Also count the matches per category, tag, payment model, health and scanner severity (`counts`).
    pub facets: bool,
    /// Whose private agents the search may find (anonymous: none). Part of the search, like a
    /// filter: totals, facets and pages count only what the viewer may see.
    pub viewer: crate::domain::access::Viewer,
}

impl SearchRequest {
    pub(super) fn has_text(&self) -> bool {
        !self.text.trim().is_empty()
    }

    pub(super) fn effective_sort(&self) -> Sort {
        match self.sort {
            Some(Sort::Relevance) | None if self.has_text() => Sort::Relevance,
            Some(Sort::Relevance) | None => Sort::Newest,
            Some(sort) => sort,
        }
    }
}

/// Clamp a requested page size: absent → `default`, 0 → 1, above `max` → `max`.
pub fn clamp_limit(requested: Option<i64>, default: usize, max: usize) -> usize {
    match requested {
        None => default,
        Some(n) if n < 1 => 1,
        Some(n) => usize::try_from(n).unwrap_or(max).min(max),
    }
}

/// Page-size defaults of one path.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub default: usize,
    pub max: usize,
}

/// `GET /public/agents`: 20 by default, at most 100.
pub const LIST_LIMITS: Limits = Limits {
    default: 20,
    max: 100,
};
/// `POST /public/agents/search` and `search_agents`: 5 by default, at most 100.
pub const SEARCH_LIMITS: Limits = Limits {
    default: 5,
    max: 100,
};
/// `POST /a2a/discover`: 5 by default, at most 20.
pub const DISCOVER_LIMITS: Limits = Limits {
    default: 5,
    max: 20,
};

/// One integer query parameter (`limit`, `since`), read the same way on every path: absent is
/// `None`; a value that is not an integer, or a parameter given more than once (which of two
/// page sizes would be meant?), is an error message naming the parameter.
pub fn integer_param(pairs: &[(String, String)], name: &str) -> Result<Option<i64>, String> {
    let mut values = pairs.iter().filter(|(key, _)| key == name);
    let Some((_, text)) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(format!("{name}: given more than once"));
    }
    text.trim()
        .parse()
        .map(Some)
        .map_err(|_| format!("{name}: must be an integer"))
}

/// `true` or `false`, ASCII case and surrounding whitespace ignored.
fn parse_bool(value: &str) -> Option<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    }
}

fn invalid(parameter: &str, message: impl Into<String>) -> SearchError {
    SearchError::InvalidParameter {
        parameter: parameter.to_owned(),
        message: message.into(),
    }
}

/// From decoded query-string pairs. Unknown keys are ignored.
pub fn from_query_pairs(
    pairs: &[(String, String)],
    limits: Limits,
) -> Result<SearchRequest, SearchError> {
    let joined = |key: &str| -> Option<String> {
        let values: Vec<&str> = pairs
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .collect();
        (!values.is_empty()).then(|| values.join(","))
    };
    let limit = integer_param(pairs, "limit").map_err(|message| invalid("limit", message))?;
    let sort = joined("sort")
        .filter(|s| !s.trim().is_empty())
        .map(|s| Sort::parse(&s))
        .transpose()?;
    let raw = RawFilters {
        target: joined("target"),
        category: joined("category"),
        tags: joined("tags").or_else(|| joined("tag")),
        verification_level: joined("verification_level"),
        max_severity: joined("max_severity"),
        payment: PaymentFilterInput {
            model: joined("payment_model"),
            protocol: joined("payment_protocol"),
            rail: joined("payment_rail"),
            direction: joined("payment_direction"),
        },
        collapse: match joined("collapse") {
            None => None,
            Some(value) => Some(parse_bool(&value).ok_or_else(|| {
                invalid(
                    "collapse",
                    "must be true (one agent per duplicate group) or false",
                )
            })?),
        },
        health: joined("health"),
        include_deprecated: match joined("include_deprecated") {
            None => None,
            Some(value) => Some(parse_bool(&value).ok_or_else(|| {
                invalid(
                    "include_deprecated",
                    "must be true (deprecated agents too, ranked below their equals) or false",
                )
            })?),
        },
    };
    let facets = match joined("facets") {
        None => false,
        Some(value) => parse_bool(&value).ok_or_else(|| {
            invalid(
                "facets",
                "must be true (count the matches per category, tag, payment model, health and scanner severity) or false",
            )
        })?,
    };
    Ok(SearchRequest {
        text: joined("q").unwrap_or_default(),
        filters: Filters::parse(&raw)?,
        sort,
        limit: clamp_limit(limit, limits.default, limits.max),
        cursor: joined("cursor"),
        offset: 0,
        facets,
        // Anonymous until the transport says who is asking.
        viewer: Default::default(),
    })
}

/// From a JSON object: `{"query", "limit", "cursor", "sort", "collapse", "facets", "filters":
/// {…}}`, with filter keys
/// also accepted at the top level, and payment keys also in camelCase. A missing body (`null`) is
/// refused like any other non-object: `{}` is the search without criteria.
pub fn from_json(body: &Value, limits: Limits) -> Result<SearchRequest, SearchError> {
    let empty = Map::new();
    let object = match body {
        Value::Object(map) => map,
        Value::Null => {
            return Err(invalid(
                "body",
                "a JSON object is required (`{}` for no criteria)",
            ));
        }
        _ => return Err(invalid("body", "the request body must be a JSON object")),
    };
    let filters = match object.get("filters") {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(map)) => map,
        Some(_) => return Err(invalid("filters", "filters must be an object")),
    };
    let text = match object.get("query").or_else(|| object.get("q")) {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err(invalid("query", "query must be a string")),
    };
    let limit = match object.get("limit") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => Some(
            n.as_i64()
                .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64))
                .ok_or_else(|| invalid("limit", "limit must be an integer"))?,
        ),
        Some(Value::String(s)) => Some(
            s.trim()
                .parse::<i64>()
                .map_err(|_| invalid("limit", "limit must be an integer"))?,
        ),
        Some(_) => return Err(invalid("limit", "limit must be an integer")),
    };
    let cursor = string_field(object, "cursor")?;
    let sort = string_field(object, "sort")?
        .filter(|s| !s.trim().is_empty())
        .map(|s| Sort::parse(&s))
        .transpose()?;
    let filter = |names: &[&str]| -> Result<Option<String>, SearchError> {
        let found = names
            .iter()
            .find_map(|name| filters.get(*name).or_else(|| object.get(*name)));
        match found.map(join_json_value) {
            None | Some(None) => Ok(None),
            Some(Some(Ok(joined))) => Ok(Some(joined)),
            Some(Some(Err(()))) => Err(invalid(
                names[0],
                format!("{} must be a string or an array of strings", names[0]),
            )),
        }
    };
    let raw = RawFilters {
        target: filter(&["target"])?,
        category: filter(&["category"])?,
        tags: filter(&["tags"])?,
        verification_level: filter(&["verification_level", "verificationLevel"])?,
        max_severity: filter(&["max_severity", "maxSeverity"])?,
        payment: PaymentFilterInput {
            model: filter(&["payment_model", "paymentModel"])?,
            protocol: filter(&["payment_protocol", "paymentProtocol"])?,
            rail: filter(&["payment_rail", "paymentRail"])?,
            direction: filter(&["payment_direction", "paymentDirection"])?,
        },
        collapse: match filters.get("collapse").or_else(|| object.get("collapse")) {
            None | Some(Value::Null) => None,
            Some(Value::Bool(collapse)) => Some(*collapse),
            Some(_) => return Err(invalid("collapse", "collapse must be true or false")),
        },
        health: filter(&["health"])?,
        include_deprecated: match filters
            .get("include_deprecated")
            .or_else(|| filters.get("includeDeprecated"))
            .or_else(|| object.get("include_deprecated"))
            .or_else(|| object.get("includeDeprecated"))
        {
            None | Some(Value::Null) => None,
            Some(Value::Bool(include)) => Some(*include),
            Some(_) => {
                return Err(invalid(
                    "include_deprecated",
                    "include_deprecated must be true or false",
                ));
            }
        },
    };
    // A top-level member only: it asks for more in the answer, it filters nothing.
    let facets = match object.get("facets") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(facets)) => *facets,
        Some(_) => return Err(invalid("facets", "facets must be true or false")),
    };
    Ok(SearchRequest {
        text,
        filters: Filters::parse(&raw)?,
        sort,
        limit: clamp_limit(limit, limits.default, limits.max),
        cursor,
        offset: 0,
        facets,
        // Anonymous until the transport says who is asking.
        viewer: Default::default(),
    })
}

fn string_field(object: &Map<String, Value>, key: &str) -> Result<Option<String>, SearchError> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(invalid(key, format!("{key} must be a string"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn repeated_query_parameters_are_joined_with_commas() {
        let request = from_query_pairs(
            &pairs(&[("payment_rail", "base:usdc"), ("payment_rail", "nano:")]),
            LIST_LIMITS,
        );
        assert!(request.is_ok());
    }

    #[test]
    fn limits_are_defaulted_and_clamped() {
        let list = |limit: &str| {
            from_query_pairs(&pairs(&[("limit", limit)]), LIST_LIMITS)
                .map(|r| r.limit)
                .ok()
        };
        assert_eq!(list("500"), Some(100));
        assert_eq!(list("0"), Some(1));
        assert_eq!(list("-3"), Some(1));
        assert_eq!(list("x"), None);
        let default = from_json(&json!({}), DISCOVER_LIMITS).map(|r| r.limit);
        assert_eq!(default, Ok(5));
        let clamped = from_json(&json!({"limit": 50}), DISCOVER_LIMITS).map(|r| r.limit);
        assert_eq!(clamped, Ok(20));
    }

    #[test]
    fn json_filters_accept_top_level_and_camel_case_payment_keys() {
        let body = json!({"query": "x", "paymentRail": "base:usdc",
                          "filters": {"paymentModel": ["free", "paid"], "tags": ["a"]}});
        let request = from_json(&body, SEARCH_LIMITS);
        assert!(request.is_ok(), "{request:?}");
    }

    #[test]
    fn facets_are_asked_for_with_a_boolean_and_off_by_default() {
        let query = |value: &str| {
            from_query_pairs(&pairs(&[("facets", value)]), LIST_LIMITS).map(|r| r.facets)
        };
        assert_eq!(query("true"), Ok(true));
        assert_eq!(query(" FALSE "), Ok(false));
        assert!(matches!(
            query("maybe"),
            Err(SearchError::InvalidParameter { parameter, .. }) if parameter == "facets"
        ));
        assert_eq!(
            from_query_pairs(&[], LIST_LIMITS).map(|r| r.facets),
            Ok(false)
        );
        let body = |body: Value| from_json(&body, SEARCH_LIMITS).map(|r| r.facets);
        assert_eq!(body(json!({"facets": true})), Ok(true));
        assert_eq!(body(json!({"facets": null})), Ok(false));
        assert_eq!(body(json!({})), Ok(false));
        assert!(body(json!({"facets": "true"})).is_err());
        assert_eq!(
            body(json!({"filters": {"facets": true}})),
            Ok(false),
            "not a filter"
        );
    }

    #[test]
    fn wrong_json_types_are_invalid_parameters() {
        for body in [
            json!({"query": 3}),
            json!({"limit": "many"}),
            json!({"filters": []}),
            json!({"filters": {"tags": [1]}}),
            json!([1]),
            json!(null),
        ] {
            assert!(
                matches!(
                    from_json(&body, SEARCH_LIMITS),
                    Err(SearchError::InvalidParameter { .. })
                ),
                "{body}"
            );
        }
    }
}
