//! ARD's query model: `{"@context"?, "text"?, "filter"?}`, its filter keys resolved as JSON-LD
//! terms and compiled into a test on each agent's listing, applied inside the one search
//! function with the other filters.
//!
//! A key's first segment is resolved to an IRI through the effective context: the ARD base
//! context (every core term, unprefixed, in the ARD namespace) plus the query's `@context`
//! (prefixes and terms it binds). `tags`, `ard:tags` with `ard` bound to the ARD namespace, and
//! the full IRI are the same key. The rest of a key, after a `.`, is a literal path into
//! `metadata` or `trustManifest`. `publisher` is the URN's publisher domain. Values are an array
//! (a scalar is one value): OR within a key, AND across keys, and a term holding an array
//! matches when any element does. Text compares ignoring case, numbers and booleans exactly.
//!
//! A key this registry does not index (an unknown term, a term of another namespace, a path
//! under a term that has none, a prefix the query does not bind) is refused with 400 naming it:
//! a filter silently ignored would widen the results.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::search::{Listing, ListingFilter};

use super::entry;
use super::error::ArdError;

/// The ARD base context, the initial context of every entry and query.
pub const BASE_CONTEXT: &str = "https://agenticresourcediscovery.org/context/v1";
/// The default namespace every core term is in.
pub const NAMESPACE: &str = "https://agenticresourcediscovery.org/ns#";

/// Most keys one filter may have.
pub const MAX_FILTER_KEYS: usize = 16;
/// Most values one key may list.
pub const MAX_FILTER_VALUES: usize = 32;
/// Longest key or value, in characters.
pub const MAX_TERM_CHARS: usize = 512;
/// Longest query text, in characters.
pub const MAX_TEXT_CHARS: usize = 1000;

/// A filterable (or facetable) term of an entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TermPath {
    Identifier,
    DisplayName,
    Type,
    Url,
    Description,
    Tags,
    Capabilities,
    Version,
    /// The URN's publisher domain.
    Publisher,
    /// A literal path into `metadata` (at least one segment).
    Metadata(Vec<String>),
    /// A literal path into `trustManifest` (at least one segment).
    Trust(Vec<String>),
}

impl TermPath {
    /// Every value the term has in an agent's entry: one for a plain term, each element for an
    /// array, none when absent.
    pub fn values(&self, listing: &Listing, base: &str) -> Vec<Value> {
        let text = |s: &str| vec![Value::String(s.to_owned())];
        match self {
            Self::Identifier => text(listing.urn()),
            Self::DisplayName => text(listing.name()),
            Self::Type => text(entry::media_type(listing.kind)),
            Self::Url => text(&entry::artifact_url(listing, base)),
            Self::Description => text(listing.description()),
            Self::Tags => listing
                .tags()
                .map(|t| Value::String(t.to_owned()))
                .collect(),
            Self::Capabilities => listing
                .capabilities()
                .map(|c| Value::String(c.to_owned()))
                .collect(),
            Self::Version => listing.version().map(text).unwrap_or_default(),
            Self::Publisher => text(listing.publisher()),
            Self::Metadata(path) => walk(&Value::Object(entry::metadata(listing, base)), path),
            Self::Trust(path) => entry::trust_manifest(listing, base)
                .map(|trust| walk(&trust, path))
                .unwrap_or_default(),
        }
    }

    /// Whether the term holds one of `wanted`, without building values for the plain terms.
    fn matches(&self, listing: &Listing, base: &str, wanted: &[Value]) -> bool {
        let any_text = |mut values: crate::search::Strs<'_>| {
            values.any(|value| {
                wanted
                    .iter()
                    .any(|w| w.as_str().is_some_and(|w| same_text(value, w)))
            })
        };
        match self {
            Self::Tags => any_text(listing.tags()),
            Self::Capabilities => any_text(listing.capabilities()),
            Self::Type => wanted.iter().any(|w| {
                w.as_str()
                    .is_some_and(|w| same_media_type(w, entry::media_type(listing.kind)))
            }),
            _ => self
                .values(listing, base)
                .iter()
                .any(|value| wanted.iter().any(|w| same(value, w))),
        }
    }
}

/// The values at a literal path: each element where a step meets an array.
fn walk(value: &Value, path: &[String]) -> Vec<Value> {
    let Some((step, rest)) = path.split_first() else {
        return match value {
            Value::Array(items) => items.clone(),
            Value::Object(_) | Value::Null => Vec::new(),
            scalar => vec![scalar.clone()],
        };
    };
    match value {
        Value::Object(object) => object.get(step).map(|v| walk(v, rest)).unwrap_or_default(),
        Value::Array(items) => items.iter().flat_map(|item| walk(item, path)).collect(),
        _ => Vec::new(),
    }
}

/// Two filter values are the same: text ignoring case, anything else exactly.
fn same(held: &Value, wanted: &Value) -> bool {
    match (held, wanted) {
        (Value::String(a), Value::String(b)) => same_text(a, b),
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        (a, b) => a == b,
    }
}

fn same_text(a: &str, b: &str) -> bool {
    a.eq_ignore_ascii_case(b) || (!a.is_ascii() && a.to_lowercase() == b.to_lowercase())
}

/// Media types compare by type and subtype, ignoring case and parameters' spacing.
fn same_media_type(wanted: &str, held: &str) -> bool {
    let normal = |t: &str| {
        t.split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase()
    };
    normal(wanted) == normal(held)
}

/// The effective context of a query: the terms and prefixes its `@context` binds, as IRIs.
#[derive(Debug, Default, Clone)]
pub struct Context {
    bindings: HashMap<String, String>,
}

impl Context {
    /// Reads a query's `@context`: the base context's URL, an object of bindings, or an array
    /// of those.
    pub fn parse(value: Option<&Value>) -> Result<Self, ArdError> {
        let mut context = Self::default();
        match value {
            None | Some(Value::Null) => {}
            Some(Value::Array(items)) if items.len() <= 8 => {
                for item in items {
                    context.add(item)?;
                }
            }
            Some(Value::Array(_)) => {
                return Err(ArdError::invalid("query.@context: at most 8 contexts"));
            }
            Some(item) => context.add(item)?,
        }
        Ok(context)
    }

    fn add(&mut self, item: &Value) -> Result<(), ArdError> {
        match item {
            Value::String(url) if url == BASE_CONTEXT => Ok(()),
            Value::String(url) => Err(ArdError::invalid(format!(
                "query.@context: '{}' cannot be loaded; give bindings inline (only the ARD base context {BASE_CONTEXT} is known by URL)",
                crate::domain::truncate(url, 100)
            ))),
            Value::Object(bindings) if bindings.len() <= MAX_FILTER_KEYS * 2 => {
                for (name, binding) in bindings {
                    let iri = match binding {
                        Value::String(iri) => iri.as_str(),
                        Value::Object(definition) => definition
                            .get("@id")
                            .and_then(Value::as_str)
                            .unwrap_or_default(),
                        _ => "",
                    };
                    if iri.is_empty() || iri.chars().count() > MAX_TERM_CHARS {
                        return Err(ArdError::invalid(format!(
                            "query.@context.{}: must be an IRI (or {{\"@id\": IRI}})",
                            crate::domain::truncate(name, 80)
                        )));
                    }
                    self.bindings.insert(name.clone(), iri.to_owned());
                }
                Ok(())
            }
            Value::Object(_) => Err(ArdError::invalid("query.@context: too many bindings")),
            _ => Err(ArdError::invalid(
                "query.@context: must be a URL, an object of bindings, or an array of those",
            )),
        }
    }

    /// The IRI of a term or compact IRI, through this context then the base context.
    fn expand(&self, term: &str) -> Option<String> {
        if term.starts_with("http://") || term.starts_with("https://") {
            return Some(term.to_owned());
        }
        if let Some(iri) = self.bindings.get(term) {
            // A binding may itself be a compact IRI over another binding.
            return Some(match iri.split_once(':') {
                Some((prefix, rest)) if !rest.starts_with("//") => {
                    match self.bindings.get(prefix) {
                        Some(base) => format!("{base}{rest}"),
                        None => iri.clone(),
                    }
                }
                _ => iri.clone(),
            });
        }
        match term.split_once(':') {
            Some((prefix, local)) => Some(format!("{}{local}", self.bindings.get(prefix)?)),
            None => Some(format!("{NAMESPACE}{term}")),
        }
    }

    /// A filter key or facet field resolved to the term path it names.
    pub fn resolve(&self, key: &str, what: &str) -> Result<TermPath, ArdError> {
        let shown = crate::domain::truncate(key, 120);
        if key.trim().is_empty() || key.chars().count() > MAX_TERM_CHARS {
            return Err(ArdError::invalid(format!(
                "{what} '{shown}': not a term path"
            )));
        }
        // The first segment ends at the first `.` after an IRI's own punctuation.
        let local_start = if key.starts_with("http://") || key.starts_with("https://") {
            key.rfind(['#', '/']).map_or(0, |at| at + 1)
        } else {
            0
        };
        let (head, rest) = match key[local_start..].find('.') {
            Some(at) => key.split_at(local_start + at),
            None => (key, ""),
        };
        let path: Vec<String> = rest.split('.').skip(1).map(str::to_owned).collect();
        if path.iter().any(String::is_empty) {
            return Err(ArdError::invalid(format!(
                "{what} '{shown}': an empty path segment"
            )));
        }
        let Some(iri) = self.expand(head) else {
            let prefix = head.split_once(':').map_or(head, |(p, _)| p);
            return Err(ArdError::invalid(format!(
                "{what} '{shown}': the prefix '{}' is not bound in query.@context",
                crate::domain::truncate(prefix, 60)
            )));
        };
        let Some(local) = iri.strip_prefix(NAMESPACE) else {
            return Err(ArdError::invalid(format!(
                "{what} '{shown}': the term <{}> is not indexed by this registry",
                crate::domain::truncate(&iri, 160)
            )));
        };
        let plain = |term: TermPath| {
            if path.is_empty() {
                Ok(term)
            } else {
                Err(ArdError::invalid(format!(
                    "{what} '{shown}': '{local}' has no members to follow a path into"
                )))
            }
        };
        let nested = |make: fn(Vec<String>) -> TermPath| {
            if path.is_empty() {
                Err(ArdError::invalid(format!(
                    "{what} '{shown}': name a member of '{local}' ('{local}.<member>')"
                )))
            } else {
                Ok(make(path.clone()))
            }
        };
        match local {
            "identifier" => plain(TermPath::Identifier),
            "displayName" => plain(TermPath::DisplayName),
            "type" => plain(TermPath::Type),
            "url" => plain(TermPath::Url),
            "description" => plain(TermPath::Description),
            "tags" => plain(TermPath::Tags),
            "capabilities" => plain(TermPath::Capabilities),
            "version" => plain(TermPath::Version),
            "publisher" => plain(TermPath::Publisher),
            "metadata" => nested(TermPath::Metadata),
            "trustManifest" => nested(TermPath::Trust),
            _ => Err(ArdError::invalid(format!(
                "{what} '{shown}': unknown or unsupported term; filterable are identifier, displayName, type, url, description, tags, capabilities, version, publisher, metadata.<member>, trustManifest.<path>"
            ))),
        }
    }
}

/// A parsed `query`: its text and its filter, compiled.
#[derive(Debug, Default)]
pub struct Query {
    pub text: String,
    pub context: Context,
    pub filter: Vec<(TermPath, Vec<Value>)>,
}

impl Query {
    /// Reads `body.query` (absent: an empty query). `text_required`: Search needs text.
    pub fn parse(query: Option<&Value>, text_required: bool) -> Result<Self, ArdError> {
        let object = match query {
            None | Some(Value::Null) if !text_required => return Ok(Self::default()),
            None | Some(Value::Null) => {
                return Err(ArdError::invalid("query: required, an object with `text`"));
            }
            Some(Value::Object(object)) => object,
            Some(_) => return Err(ArdError::invalid("query: must be an object")),
        };
        if let Some(unknown) = object
            .keys()
            .find(|key| !matches!(key.as_str(), "@context" | "text" | "filter"))
        {
            return Err(ArdError::invalid(format!(
                "query.{}: unknown member (expected @context, text, filter)",
                crate::domain::truncate(unknown, 60)
            )));
        }
        let text = match object.get("text") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(text)) => text.clone(),
            Some(_) => return Err(ArdError::invalid("query.text: must be a string")),
        };
        if text.contains('\0') {
            return Err(ArdError::invalid("query.text: must not contain NUL"));
        }
        if text.chars().count() > MAX_TEXT_CHARS {
            return Err(ArdError::invalid(format!(
                "query.text: at most {MAX_TEXT_CHARS} characters"
            )));
        }
        if text_required && text.trim().is_empty() {
            return Err(ArdError::invalid(
                "query.text: required, a non-empty string",
            ));
        }
        let context = Context::parse(object.get("@context"))?;
        let filter = match object.get("filter") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Object(filter)) => parse_filter(filter, &context)?,
            Some(_) => return Err(ArdError::invalid("query.filter: must be an object")),
        };
        Ok(Self {
            text,
            context,
            filter,
        })
    }

    /// The filter as a test on listings, `None` without one.
    pub fn listing_filter(&self, base: &Arc<str>) -> Option<ListingFilter> {
        if self.filter.is_empty() {
            return None;
        }
        let filter = self.filter.clone();
        let base = Arc::clone(base);
        Some(ListingFilter(Arc::new(move |listing: &Listing| {
            filter
                .iter()
                .all(|(path, wanted)| path.matches(listing, &base, wanted))
        })))
    }
}

fn parse_filter(
    filter: &Map<String, Value>,
    context: &Context,
) -> Result<Vec<(TermPath, Vec<Value>)>, ArdError> {
    if filter.len() > MAX_FILTER_KEYS {
        return Err(ArdError::invalid(format!(
            "query.filter: at most {MAX_FILTER_KEYS} keys"
        )));
    }
    let mut parsed = Vec::with_capacity(filter.len());
    for (key, value) in filter {
        let path = context.resolve(key, "query.filter key")?;
        let shown = crate::domain::truncate(key, 120);
        let values = match value {
            Value::Array(values) => values.clone(),
            scalar => vec![scalar.clone()],
        };
        if values.is_empty() {
            return Err(ArdError::invalid(format!(
                "query.filter.{shown}: list at least one value"
            )));
        }
        if values.len() > MAX_FILTER_VALUES {
            return Err(ArdError::invalid(format!(
                "query.filter.{shown}: at most {MAX_FILTER_VALUES} values"
            )));
        }
        for value in &values {
            match value {
                Value::String(text)
                    if text.chars().count() > MAX_TERM_CHARS || text.contains('\0') =>
                {
                    return Err(ArdError::invalid(format!(
                        "query.filter.{shown}: a value longer than {MAX_TERM_CHARS} characters or holding NUL"
                    )));
                }
                Value::String(_) | Value::Number(_) | Value::Bool(_) => {}
                _ => {
                    return Err(ArdError::invalid(format!(
                        "query.filter.{shown}: values must be strings, numbers or booleans"
                    )));
                }
            }
        }
        parsed.push((path, values));
    }
    Ok(parsed)
}
