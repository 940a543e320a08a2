//! `AgentDraft`: the writable fields of an agent, parsed from a publish or update body.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use url::Url;
use utoipa::ToSchema;

use super::{FieldError, PackageName, Payment};

/// URI of the registry's card extension carrying `params.payment`.
pub const REGISTRY_EXTENSION_URI: &str = "https://a2a-registry.org/extensions/registry/v1";
/// URI of the card extension carrying capabilities with their input schemas, losslessly.
pub const CAPABILITIES_EXTENSION_URI: &str = "https://a2a-registry.org/extensions/capabilities/v1";

/// The limits of a publish body, shared with its schema in the OpenAPI document.
pub mod limits {
    pub const MAX_NAME_CHARS: usize = 200;
    pub const MAX_DESCRIPTION_CHARS: usize = 2_000;
    /// Tool descriptions (MCP, OpenAPI operations) run long; this is ours, not the contract's.
    pub const MAX_CAPABILITY_DESCRIPTION_CHARS: usize = 8_000;
    pub const MAX_VERSION_CHARS: usize = 64;
    pub const MAX_URL_CHARS: usize = 2_048;
    pub const MAX_LABEL_CHARS: usize = 100;
    pub const MAX_TAGS: usize = 32;
    pub const MAX_TAG_CHARS: usize = 40;
    pub const MAX_CAPABILITIES: usize = 64;
    pub const MAX_CAPABILITY_NAME_CHARS: usize = 128;
    pub const MAX_CARD_BYTES: usize = 64 * 1024;
    pub const MAX_PROBE_MESSAGE_CHARS: usize = 500;
    /// Representative queries: 2 to 5 when given (ARD's advice), each at most 300 characters.
    pub const MIN_REPRESENTATIVE_QUERIES: usize = 2;
    pub const MAX_REPRESENTATIVE_QUERIES: usize = 5;
    pub const MAX_REPRESENTATIVE_QUERY_CHARS: usize = 300;
}
use limits::*;

/// Something an agent can do, callable by name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Capability {
    /// Unique name within the agent, e.g. `get_forecast`.
    #[schema(example = "get_forecast")]
    pub name: String,
    /// What it does; may be empty.
    #[serde(default)]
    #[schema(example = "Forecast for a city")]
    pub description: String,
    /// JSON Schema of the input object, when the agent gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub input_schema: Option<Value>,
}

/// The writable fields of an agent after validation: what publish and update store.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentDraft {
    /// Unique reverse-domain name.
    pub package_name: PackageName,
    /// Display name, trimmed, 1–200 characters.
    pub name: String,
    /// Description, trimmed, 1–2,000 characters.
    pub description: String,
    /// Agent version, at most 64 characters.
    pub version: Option<String>,
    /// Absolute http(s) URL of the agent's card.
    pub manifest_url: Option<String>,
    /// Absolute http(s) URL of the agent's endpoint.
    pub url: Option<String>,
    /// Audience, e.g. `Business`.
    pub target: Option<String>,
    /// Category, e.g. `Weather`.
    pub category: Option<String>,
    /// Lowercase, distinct tags in first-seen order.
    pub tags: Vec<String>,
    /// Capabilities with distinct names.
    pub capabilities: Vec<Capability>,
    /// Canonical payment terms, when known.
    pub payment: Option<Payment>,
    /// The full A2A card the owner published, kept as given.
    pub card: Option<Value>,
    /// What checking the signatures on `card` found, when it carries any. Not parsed from a
    /// body: the registry sets it after fetching the keys the signatures name.
    pub card_signature: Option<super::CardSignatureCheck>,
    /// How to reach the agent: A2A interfaces (the first is `url`), MCP remotes and packages,
    /// the repository.
    pub reach: super::Reach,
    /// A message the owner chose for the liveness prober to send with `SendMessage` after the
    /// card checks out (opt-in; at most 500 characters).
    pub probe_message: Option<String>,
    /// Requests a user might make that this agent serves, in the user's words (2 to 5 when the
    /// publisher gives them; else up to 5 of the card's skill `examples`).
    pub representative_queries: Vec<String>,
    /// The discovery identifier the publisher chose (`urn:air:…`), when they chose one; the
    /// registry otherwise derives it from the package name at publish (`domain::urn`).
    pub identifier: Option<super::AirUrn>,
    /// Who finds the agent in lists; `None` when the body does not say (a publish is then
    /// public, an update keeps what the agent had).
    pub visibility: Option<Visibility>,
    /// Whether the prober may list the endpoint's tools (an MCP server's `tools/list`) or read
    /// its card's skills to scan them and notice changes; `None` when the body does not say (a
    /// publish then allows it, an update keeps what the agent had).
    pub inspect_tools: Option<bool>,
}

/// Who finds an ACTIVE agent without knowing it already.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Visibility {
    /// Listed everywhere: every list, search, facet, feed, manifest and catalogue.
    #[default]
    Public,
    /// Resolvable by whoever knows its id, package name or identifier (the record, its card,
    /// its versions), and listed nowhere.
    Unlisted,
    /// Seen only by its owner, the members of its owning organisation and the master key, on
    /// every path (lists and searches included); to anyone else it does not exist.
    Private,
}

impl Visibility {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Public => "public",
            Self::Unlisted => "unlisted",
            Self::Private => "private",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "public" => Some(Self::Public),
            "unlisted" => Some(Self::Unlisted),
            "private" => Some(Self::Private),
            _ => None,
        }
    }
}

impl AgentDraft {
    /// Parses a publish or update body, reporting every invalid field at once.
    ///
    /// JSON `null` means absent and unknown fields are ignored. When a `card` object is given,
    /// fields missing from the body are taken from it; errors in
    /// such fields say "(taken from card)".
    pub fn parse(body: &Value) -> Result<Self, Vec<FieldError>> {
        let Some(object) = body.as_object() else {
            return Err(vec![FieldError::new("body", "must be a JSON object")]);
        };
        let mut errors = Vec::new();
        let card = parse_card(present(object, "card"), &mut errors);
        let sources = Sources {
            body: object,
            card: card.as_ref().map(card_fields).unwrap_or_default(),
            skill_examples: card.as_ref().map(skill_examples).unwrap_or_default(),
        };
        let draft = sources.draft(card, &mut errors);
        // `url` is the first interface: one mistake, reported once.
        if errors.iter().any(|error| error.field == "url") {
            errors.retain(|error| error.field != "interfaces[0].url");
        }
        for error in &mut errors {
            if sources.is_from_card(&error.field) {
                error.message.push_str(" (taken from card)");
            }
        }
        match draft {
            Some(draft) if errors.is_empty() => Ok(draft),
            _ => Err(errors),
        }
    }
}

/// The body's fields, with the card's as fallback.
struct Sources<'a> {
    body: &'a Map<String, Value>,
    card: Map<String, Value>,
    /// The examples of the card's skills: representative queries when none are given.
    skill_examples: Vec<String>,
}

impl Sources<'_> {
    /// The body's value for `key` unless absent or null, else the card's.
    fn get(&self, key: &str) -> Option<&Value> {
        present(self.body, key).or_else(|| present(&self.card, key))
    }

    /// Whether the top-level field of an error path came from the card.
    fn is_from_card(&self, field: &str) -> bool {
        let key = field.split(['.', '[']).next().unwrap_or(field);
        present(self.body, key).is_none() && present(&self.card, key).is_some()
    }

    fn draft(&self, card: Option<Value>, errors: &mut Vec<FieldError>) -> Option<AgentDraft> {
        let package_name = parse_package_name(self.get("package_name"), errors);
        let name = required_text("name", self.get("name"), MAX_NAME_CHARS, errors);
        let description = required_text(
            "description",
            self.get("description"),
            MAX_DESCRIPTION_CHARS,
            errors,
        );
        let version = optional_text("version", self.get("version"), MAX_VERSION_CHARS, errors);
        let manifest_url = optional_url("manifest_url", self.get("manifest_url"), errors);
        let mut url = optional_url("url", self.get("url"), errors);
        let mut reach = super::reach::parse(|key| self.get(key), errors);
        match &url {
            Some(url) => reach.lead_with(url),
            None => url = reach.interfaces.first().map(|i| i.url.clone()),
        }
        let target = optional_text("target", self.get("target"), MAX_LABEL_CHARS, errors);
        let category = optional_text("category", self.get("category"), MAX_LABEL_CHARS, errors);
        let tags = parse_tags(self.get("tags"), errors);
        let capabilities = parse_capabilities(self.get("capabilities"), errors);
        let probe_message = optional_text(
            "probe_message",
            present(self.body, "probe_message"),
            MAX_PROBE_MESSAGE_CHARS,
            errors,
        );
        let payment = self.get("payment").and_then(|value| {
            Payment::parse(value)
                .map_err(|payment_errors| errors.extend(payment_errors))
                .ok()
        });
        let visibility = match present(self.body, "visibility") {
            None => None,
            Some(Value::String(text)) => {
                let text = text.trim().to_ascii_lowercase();
                match Visibility::parse(&text) {
                    Some(visibility) => Some(visibility),
                    None => {
                        errors.push(FieldError::new(
                            "visibility",
                            "must be public, unlisted or private",
                        ));
                        None
                    }
                }
            }
            Some(_) => {
                errors.push(FieldError::new("visibility", "must be a string"));
                None
            }
        };
        let inspect_tools = match present(self.body, "inspect_tools") {
            None => None,
            Some(Value::Bool(inspect)) => Some(*inspect),
            Some(_) => {
                errors.push(FieldError::new("inspect_tools", "must be true or false"));
                None
            }
        };
        let representative_queries = self.representative_queries(errors);
        let identifier = parse_identifier(
            either(self.body, "identifier", "identifier"),
            package_name.as_ref(),
            errors,
        );
        Some(AgentDraft {
            package_name: package_name?,
            name: name?,
            description: description?,
            version,
            manifest_url,
            url,
            target,
            category,
            tags,
            capabilities,
            payment,
            card,
            card_signature: None,
            reach,
            probe_message,
            representative_queries,
            identifier,
            visibility,
            inspect_tools,
        })
    }

    /// The body's representative queries, checked; else the ones the card's registry
    /// extension carries (a card this registry built); else up to five of its skills'
    /// `examples`, taken as they come (a card is not the publisher's answer to our limits).
    fn representative_queries(&self, errors: &mut Vec<FieldError>) -> Vec<String> {
        let given = either(self.body, "representative_queries", "representativeQueries")
            .or_else(|| present(&self.card, "representative_queries"));
        match given {
            Some(value) => parse_representative_queries(value, errors),
            None => self.skill_examples.clone(),
        }
    }
}

/// The value of a member spelled in snake_case or camelCase, treating `null` as absent.
fn either<'a>(object: &'a Map<String, Value>, snake: &str, camel: &str) -> Option<&'a Value> {
    present(object, snake).or_else(|| present(object, camel))
}

/// Representative queries as a publisher gives them: 2 to 5 non-blank strings of at most 300
/// characters, repeats dropped. An empty list is none.
fn parse_representative_queries(value: &Value, errors: &mut Vec<FieldError>) -> Vec<String> {
    let field = "representative_queries";
    let Some(items) = value.as_array() else {
        errors.push(FieldError::new(field, "must be an array of strings"));
        return Vec::new();
    };
    let Some(items) = super::bounded_items(field, items, MAX_REPRESENTATIVE_QUERIES, errors) else {
        return Vec::new();
    };
    let mut queries: Vec<String> = Vec::new();
    for (index, item) in items.iter().enumerate() {
        let item_field = format!("{field}[{index}]");
        let Some(query) = text(&item_field, Some(item), errors) else {
            continue;
        };
        if query.is_empty() {
            errors.push(FieldError::new(item_field, "must not be empty"));
            continue;
        }
        let Some(query) = within(&item_field, query, MAX_REPRESENTATIVE_QUERY_CHARS, errors) else {
            continue;
        };
        // A repeat (ignoring ASCII case) adds nothing; it is dropped, as repeated tags are.
        if !queries.iter().any(|seen| seen.eq_ignore_ascii_case(&query)) {
            queries.push(query);
        }
    }
    if !items.is_empty() && items.len() < MIN_REPRESENTATIVE_QUERIES {
        errors.push(FieldError::new(
            field,
            format!(
                "give {MIN_REPRESENTATIVE_QUERIES} to {MAX_REPRESENTATIVE_QUERIES} queries (got {})",
                items.len()
            ),
        ));
    }
    queries
}

/// Up to five distinct examples from the card's skills, trimmed, skipping any that are not
/// strings, blank, too long or carry NUL.
fn skill_examples(card: &Value) -> Vec<String> {
    let examples = card
        .get("skills")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|skill| skill.get("examples")?.as_array())
        .flatten()
        .take(MAX_REPRESENTATIVE_QUERIES * super::LIST_SLACK);
    let mut queries: Vec<String> = Vec::new();
    for example in examples.filter_map(Value::as_str) {
        let example = example.trim();
        let fits = !example.is_empty()
            && !example.contains('\0')
            && example.chars().count() <= MAX_REPRESENTATIVE_QUERY_CHARS;
        if fits
            && !queries
                .iter()
                .any(|seen| seen.eq_ignore_ascii_case(example))
        {
            queries.push(example.to_owned());
        }
        if queries.len() == MAX_REPRESENTATIVE_QUERIES {
            break;
        }
    }
    queries
}

/// A publisher's own `urn:air:` identifier: valid, and published by the package's domain (the
/// domain that verifying the agent proves) or by a host under it that the package's leading
/// labels name (`ai.lifie.hub.tasks` may carry `urn:air:hub.lifie.ai:…`), so that no one names
/// an agent for a host the package does not claim.
fn parse_identifier(
    value: Option<&Value>,
    package_name: Option<&PackageName>,
    errors: &mut Vec<FieldError>,
) -> Option<super::AirUrn> {
    let field = "identifier";
    // Its length counts the characters as sent, as the OpenAPI document's `maxLength` does.
    if let Some(Value::String(sent)) = value {
        within(field, sent.clone(), super::urn::MAX_CHARS, errors)?;
    }
    let raw = text(field, value, errors).filter(|raw| !raw.is_empty())?;
    let urn = super::AirUrn::parse(&raw)
        .map_err(|message| errors.push(FieldError::new(field, message)))
        .ok()?;
    let package_name = package_name?;
    if !urn.is_published_by(package_name) {
        errors.push(FieldError::new(
            field,
            format!(
                "its publisher '{}' must be the package's domain '{}' or a host under it that the package name starts with (reversed)",
                urn.publisher(),
                package_name.domain()
            ),
        ));
        return None;
    }
    Some(urn)
}

/// The value under `key`, treating JSON `null` as absent.
pub(super) fn present<'a>(object: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    object.get(key).filter(|value| !value.is_null())
}

/// A string field, trimmed; pushes an error when it has another JSON type.
pub(super) fn text(
    field: &str,
    value: Option<&Value>,
    errors: &mut Vec<FieldError>,
) -> Option<String> {
    match value? {
        // No database text type takes U+0000 (PostgreSQL refuses it), so no backend stores it.
        Value::String(raw) if raw.contains('\0') => {
            errors.push(FieldError::new(field, "must not contain NUL (U+0000)"));
            None
        }
        Value::String(raw) => Some(raw.trim().to_owned()),
        _ => {
            errors.push(FieldError::new(field, "must be a string"));
            None
        }
    }
}

/// Checks a maximum length in characters (not bytes).
pub(super) fn within(
    field: &str,
    value: String,
    max_chars: usize,
    errors: &mut Vec<FieldError>,
) -> Option<String> {
    let length = value.chars().count();
    if length > max_chars {
        errors.push(FieldError::new(
            field,
            format!("must be at most {max_chars} characters (got {length})"),
        ));
        return None;
    }
    Some(value)
}

/// A required, non-blank string of at most `max_chars` characters.
pub(super) fn required_text(
    field: &str,
    value: Option<&Value>,
    max_chars: usize,
    errors: &mut Vec<FieldError>,
) -> Option<String> {
    if value.is_none() {
        errors.push(FieldError::new(field, "is required"));
        return None;
    }
    let value = text(field, value, errors)?;
    if value.is_empty() {
        errors.push(FieldError::new(field, "must not be empty"));
        return None;
    }
    within(field, value, max_chars, errors)
}

/// An optional string of at most `max_chars` characters; blank means absent.
pub(super) fn optional_text(
    field: &str,
    value: Option<&Value>,
    max_chars: usize,
    errors: &mut Vec<FieldError>,
) -> Option<String> {
    let value = text(field, value, errors).filter(|value| !value.is_empty())?;
    within(field, value, max_chars, errors)
}

fn parse_package_name(value: Option<&Value>, errors: &mut Vec<FieldError>) -> Option<PackageName> {
    let field = "package_name";
    if value.is_none() {
        errors.push(FieldError::new(field, "is required"));
        return None;
    }
    let raw = text(field, value, errors)?;
    PackageName::parse(&raw)
        .map_err(|message| errors.push(FieldError::new(field, message)))
        .ok()
}

/// An optional absolute http(s) URL; blank means absent. Kept as given (trimmed). Its length
/// limit counts the characters as sent, surrounding whitespace included, as the OpenAPI
/// document's `maxLength` does.
pub(super) fn optional_url(
    field: &str,
    value: Option<&Value>,
    errors: &mut Vec<FieldError>,
) -> Option<String> {
    if let Some(Value::String(sent)) = value {
        within(field, sent.clone(), MAX_URL_CHARS, errors)?;
    }
    let raw = optional_text(field, value, MAX_URL_CHARS, errors)?;
    match check_http_url(&raw) {
        Ok(()) => Some(raw),
        Err(message) => {
            errors.push(FieldError::new(field, message));
            None
        }
    }
}

pub(super) fn check_http_url(raw: &str) -> Result<(), String> {
    // URL parsing drops these silently (tabs and line breaks anywhere, control characters in
    // front): what is stored must be what was meant.
    if raw.contains(['\t', '\n', '\r']) || !raw.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return Err(
            "must be an absolute URL without tabs, line breaks or leading control characters"
                .to_owned(),
        );
    }
    let url = Url::parse(raw).map_err(|error| format!("must be an absolute URL ({error})"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "must be an http or https URL, not {}",
            url.scheme()
        ));
    }
    let Some(host) = url.host() else {
        return Err("must name a host".to_owned());
    };
    // The host as written: after `//`, before the port, path, query or fragment.
    let authority = raw
        .split_once("//")
        .map_or("", |(_, rest)| rest)
        .split(['/', '?', '#', '\\'])
        .next()
        .unwrap_or_default();
    if authority.contains('@') {
        return Err("must not carry credentials".to_owned());
    }
    let written = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => authority.split(':').next().unwrap_or_default(),
    };
    let as_written = match host {
        // An address in its usual notation (no octal, hex or shortened IPv4 forms).
        url::Host::Ipv4(ip) => written.parse::<std::net::Ipv4Addr>() == Ok(ip),
        url::Host::Ipv6(ip) => written.parse::<std::net::Ipv6Addr>() == Ok(ip),
        // A DNS name in ASCII (internationalised names in their xn-- form), labels of letters,
        // digits, '-' and '_', none empty but a final one (a trailing dot).
        url::Host::Domain(domain) => {
            let labels: Vec<&str> = domain
                .strip_suffix('.')
                .unwrap_or(domain)
                .split('.')
                .collect();
            written.eq_ignore_ascii_case(domain)
                && labels.iter().all(|label| {
                    !label.is_empty()
                        && label
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
                })
        }
    };
    if !as_written {
        return Err(format!(
            "must name its host as a DNS name of letters, digits, '-' and '_', or an IP address (got '{}')",
            crate::domain::truncate(written, 80)
        ));
    }
    Ok(())
}

/// Tags: trimmed, lowercased, distinct in first-seen order.
fn parse_tags(value: Option<&Value>, errors: &mut Vec<FieldError>) -> Vec<String> {
    let mut tags: Vec<String> = Vec::new();
    let Some(value) = value else {
        return tags;
    };
    let Some(items) = value.as_array() else {
        errors.push(FieldError::new("tags", "must be an array of strings"));
        return tags;
    };
    let Some(items) = super::bounded_items("tags", items, MAX_TAGS * super::LIST_SLACK, errors)
    else {
        return tags;
    };
    let mut seen = HashSet::new();
    for (index, item) in items.iter().enumerate() {
        let field = format!("tags[{index}]");
        let Some(tag) = text(&field, Some(item), errors) else {
            continue;
        };
        if tag.is_empty() {
            errors.push(FieldError::new(field, "must not be empty"));
            continue;
        }
        let Some(tag) = within(&field, tag.to_lowercase(), MAX_TAG_CHARS, errors) else {
            continue;
        };
        if seen.insert(tag.clone()) {
            tags.push(tag);
        }
    }
    if tags.len() > MAX_TAGS {
        errors.push(FieldError::new(
            "tags",
            format!("at most {MAX_TAGS} distinct tags (got {})", tags.len()),
        ));
    }
    tags
}

/// Capabilities: at most 64, names distinct.
fn parse_capabilities(value: Option<&Value>, errors: &mut Vec<FieldError>) -> Vec<Capability> {
    let mut capabilities = Vec::new();
    let Some(value) = value else {
        return capabilities;
    };
    let Some(items) = value.as_array() else {
        errors.push(FieldError::new(
            "capabilities",
            "must be an array of objects",
        ));
        return capabilities;
    };
    if items.len() > MAX_CAPABILITIES {
        errors.push(FieldError::new(
            "capabilities",
            format!(
                "at most {MAX_CAPABILITIES} capabilities (got {})",
                items.len()
            ),
        ));
        return capabilities;
    }
    let mut names = HashSet::new();
    for (index, item) in items.iter().enumerate() {
        let field = format!("capabilities[{index}]");
        let Some(capability) = parse_capability(&field, item, errors) else {
            continue;
        };
        if !names.insert(capability.name.clone()) {
            errors.push(FieldError::new(
                format!("{field}.name"),
                format!("duplicate capability name '{}'", capability.name),
            ));
            continue;
        }
        capabilities.push(capability);
    }
    capabilities
}

fn parse_capability(field: &str, item: &Value, errors: &mut Vec<FieldError>) -> Option<Capability> {
    let Some(object) = item.as_object() else {
        errors.push(FieldError::new(field, "must be an object with a name"));
        return None;
    };
    let name = required_text(
        &format!("{field}.name"),
        present(object, "name"),
        MAX_CAPABILITY_NAME_CHARS,
        errors,
    );
    let description_field = format!("{field}.description");
    let description = text(&description_field, present(object, "description"), errors)
        .and_then(|description| {
            within(
                &description_field,
                description,
                MAX_CAPABILITY_DESCRIPTION_CHARS,
                errors,
            )
        })
        .unwrap_or_default();
    let input_schema = match present(object, "input_schema") {
        Some(schema @ Value::Object(_)) => Some(schema.clone()),
        Some(_) => {
            errors.push(FieldError::new(
                format!("{field}.input_schema"),
                "must be a JSON Schema object",
            ));
            None
        }
        None => None,
    };
    Some(Capability {
        name: name?,
        description,
        input_schema,
    })
}

/// The card, which must be a JSON object of at most 64 KiB serialized.
fn parse_card(value: Option<&Value>, errors: &mut Vec<FieldError>) -> Option<Value> {
    let card = value?;
    if !card.is_object() {
        errors.push(FieldError::new(
            "card",
            "must be a JSON object (an A2A agent card)",
        ));
        return None;
    }
    let size = serde_json::to_vec(card).map_or(usize::MAX, |bytes| bytes.len());
    if size > MAX_CARD_BYTES {
        errors.push(FieldError::new(
            "card",
            format!("must be at most 64 KiB serialized (got {size} bytes)"),
        ));
    }
    Some(card.clone())
}

/// The draft fields a card can supply, under their body names.
fn card_fields(card: &Value) -> Map<String, Value> {
    let mut fields = Map::new();
    let Some(card) = card.as_object() else {
        return fields;
    };
    for key in ["name", "description", "version"] {
        if let Some(value) = present(card, key) {
            fields.insert(key.to_owned(), value.clone());
        }
    }
    if let Some(url) = card_url(card) {
        fields.insert("url".to_owned(), url.clone());
    }
    if let Some(interfaces) = present(card, "supportedInterfaces") {
        fields.insert("interfaces".to_owned(), interfaces.clone());
    }
    if let Some(capabilities) = card_capabilities(card) {
        fields.insert("capabilities".to_owned(), capabilities);
    }
    let registry = card_extension(card, REGISTRY_EXTENSION_URI);
    for key in ["payment", "representative_queries"] {
        if let Some(value) = registry.and_then(|params| present(params, key)) {
            fields.insert(key.to_owned(), value.clone());
        }
    }
    fields
}

/// `supportedInterfaces[0].url` (v1.0), else the top-level `url` of a v0.3 card.
fn card_url(card: &Map<String, Value>) -> Option<&Value> {
    let interface_url = card
        .get("supportedInterfaces")
        .and_then(Value::as_array)
        .and_then(|interfaces| interfaces.first())
        .and_then(|interface| interface.get("url"));
    interface_url
        .or_else(|| card.get("url"))
        .filter(|url| url.is_string())
}

/// The `params` of the card extension with `uri`, if declared.
fn card_extension<'a>(card: &'a Map<String, Value>, uri: &str) -> Option<&'a Map<String, Value>> {
    card.get("capabilities")?
        .get("extensions")?
        .as_array()?
        .iter()
        .find(|extension| extension.get("uri").and_then(Value::as_str) == Some(uri))?
        .get("params")?
        .as_object()
}

/// Capabilities from the lossless capabilities extension, else from `skills`.
fn card_capabilities(card: &Map<String, Value>) -> Option<Value> {
    let lossless = card_extension(card, CAPABILITIES_EXTENSION_URI)
        .and_then(|params| present(params, "capabilities"));
    if let Some(capabilities) = lossless {
        return Some(capabilities.clone());
    }
    let skills = present(card, "skills")?.as_array()?;
    Some(Value::Array(skills.iter().map(skill_capability).collect()))
}

/// A skill `{id, name, description, inputSchema?}` as a capability `{name, description, input_schema?}`.
/// Anything that is not an object is passed on, so that validation reports it.
fn skill_capability(skill: &Value) -> Value {
    let Some(skill) = skill.as_object() else {
        return skill.clone();
    };
    let mut capability = Map::new();
    if let Some(name) = present(skill, "id").or_else(|| present(skill, "name")) {
        capability.insert("name".to_owned(), name.clone());
    }
    if let Some(description) = present(skill, "description") {
        capability.insert("description".to_owned(), description.clone());
    }
    let schema = present(skill, "inputSchema").or_else(|| present(skill, "input_schema"));
    if let Some(schema) = schema {
        capability.insert("input_schema".to_owned(), schema.clone());
    }
    Value::Object(capability)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn minimal() -> Value {
        json!({
            "package_name": "com.example.weather",
            "name": "Weather Agent",
            "description": "Forecasts for any city."
        })
    }

    fn with(changes: Value) -> Value {
        let mut body = minimal();
        for (key, value) in changes.as_object().expect("should succeed") {
            body[key] = value.clone();
        }
        body
    }

    fn draft(body: Value) -> AgentDraft {
        AgentDraft::parse(&body).expect("valid draft")
    }

    fn fields(body: Value) -> Vec<String> {
        AgentDraft::parse(&body)
            .expect_err("invalid draft")
            .into_iter()
            .map(|error| error.field)
            .collect()
    }

    fn errors(body: Value) -> Vec<FieldError> {
        AgentDraft::parse(&body).expect_err("invalid draft")
    }

    #[test]
    fn a_minimal_body_parses_with_empty_optionals() {
        let parsed = draft(minimal());
        assert_eq!(parsed.package_name.as_str(), "com.example.weather");
        assert_eq!(parsed.name, "Weather Agent");
        assert_eq!(parsed.version, None);
        assert_eq!(parsed.url, None);
        assert!(parsed.tags.is_empty());
        assert!(parsed.capabilities.is_empty());
        assert_eq!(parsed.payment, None);
        assert_eq!(parsed.card, None);
    }

    #[test]
    fn a_full_body_parses() {
        let parsed = draft(with(json!({
            "version": "1.2.0",
            "manifest_url": "https://weather.example.com/.well-known/agent-card.json",
            "url": "https://weather.example.com/a2a/v1",
            "target": "Business", "category": "Weather", "tags": ["forecast", "realtime"],
            "capabilities": [{"name": "get_forecast", "description": "Forecast for a city",
                "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}],
            "payment": {"model": "paid", "protocols": ["x402"], "rails": ["base:usdc"]}
        })));
        assert_eq!(parsed.version.as_deref(), Some("1.2.0"));
        assert_eq!(parsed.target.as_deref(), Some("Business"));
        assert_eq!(parsed.tags, ["forecast", "realtime"]);
        assert_eq!(parsed.capabilities[0].name, "get_forecast");
        assert!(parsed.capabilities[0].input_schema.is_some());
        assert_eq!(
            parsed.payment.expect("should succeed").rails[0].network,
            "base"
        );
    }

    #[test]
    fn text_with_a_nul_character_is_refused() {
        assert_eq!(
            fields(with(json!({"name": "We\u{0}ather", "target": "\u{0}"}))),
            ["name", "target"]
        );
    }

    #[test]
    fn a_body_that_is_not_an_object_is_one_body_error() {
        for body in [json!([]), json!("x"), json!(null), json!(1)] {
            assert_eq!(fields(body), ["body"]);
        }
    }

    #[test]
    fn package_name_name_and_description_are_required() {
        assert_eq!(fields(json!({})), ["package_name", "name", "description"]);
        assert_eq!(
            fields(json!({"package_name": null, "name": null, "description": null})),
            ["package_name", "name", "description"]
        );
    }

    #[test]
    fn an_invalid_package_name_is_reported() {
        assert_eq!(
            fields(with(json!({"package_name": "nodots"}))),
            ["package_name"]
        );
        assert_eq!(fields(with(json!({"package_name": 42}))), ["package_name"]);
    }

    #[test]
    fn the_package_name_is_lowercased() {
        let parsed = draft(with(json!({"package_name": "Com.Example.Weather"})));
        assert_eq!(parsed.package_name.as_str(), "com.example.weather");
    }

    #[test]
    fn a_blank_name_or_description_is_rejected() {
        assert_eq!(
            fields(with(json!({"name": "   ", "description": ""}))),
            ["name", "description"]
        );
    }

    #[test]
    fn name_and_description_are_trimmed() {
        let parsed = draft(with(json!({"name": "  Weather  ", "description": " Hi. "})));
        assert_eq!(parsed.name, "Weather");
        assert_eq!(parsed.description, "Hi.");
    }

    #[test]
    fn name_may_have_200_characters_but_not_201() {
        assert!(AgentDraft::parse(&with(json!({"name": "n".repeat(200)}))).is_ok());
        assert_eq!(fields(with(json!({"name": "n".repeat(201)}))), ["name"]);
    }

    #[test]
    fn description_length_counts_characters_not_bytes() {
        let two_thousand_wide = "é".repeat(2_000);
        assert!(AgentDraft::parse(&with(json!({"description": two_thousand_wide}))).is_ok());
        assert_eq!(
            fields(with(json!({"description": "é".repeat(2_001)}))),
            ["description"]
        );
    }

    #[test]
    fn version_is_optional_and_at_most_64_characters() {
        assert!(AgentDraft::parse(&with(json!({"version": "v".repeat(64)}))).is_ok());
        assert_eq!(
            fields(with(json!({"version": "v".repeat(65)}))),
            ["version"]
        );
        assert_eq!(fields(with(json!({"version": 1}))), ["version"]);
    }

    #[test]
    fn urls_must_be_absolute_http_or_https() {
        let parsed = draft(with(
            json!({"url": "http://localhost:9000/a2a", "manifest_url": null}),
        ));
        assert_eq!(parsed.url.as_deref(), Some("http://localhost:9000/a2a"));
        for ok in [
            "https://Example.COM:8443/a2a?x=1#f",
            "http://10.0.0.1/a2a",
            "http://[::1]:9000/",
            "http://host_name.example./x y",
            "http://a.b\\path",
        ] {
            assert_eq!(
                draft(with(json!({"url": ok}))).url.as_deref(),
                Some(ok),
                "{ok}"
            );
        }
        for bad in [
            "/relative",
            "ftp://example.com/x",
            "not a url",
            "mailto:a@example.com",
            "http://107.200.250.250*",
            "http://a..b/",
            "http://exa%6Dple.com/",
            "http://b\u{fc}cher.example/",
            "http://1.2.3/",
            "http://010.0.0.1/",
            "http://user:pass@example.com/",
            "http:example.com",
        ] {
            assert_eq!(
                fields(with(json!({"url": bad, "manifest_url": bad}))),
                ["manifest_url", "url"],
                "{bad}"
            );
        }
    }

    #[test]
    fn urls_may_have_2048_characters_but_not_more() {
        let prefix = "https://example.com/";
        let ok = format!("{prefix}{}", "a".repeat(2_048 - prefix.len()));
        let too_long = format!("{ok}a");
        assert!(AgentDraft::parse(&with(json!({"url": ok}))).is_ok());
        assert_eq!(fields(with(json!({"url": too_long}))), ["url"]);
    }

    #[test]
    fn target_and_category_are_trimmed_and_blank_means_absent() {
        let parsed = draft(with(json!({"target": " Business ", "category": "  "})));
        assert_eq!(parsed.target.as_deref(), Some("Business"));
        assert_eq!(parsed.category, None);
        assert_eq!(
            fields(with(json!({"target": "t".repeat(101), "category": ["x"]}))),
            ["target", "category"]
        );
    }

    #[test]
    fn tags_are_trimmed_lowercased_and_deduplicated_in_first_seen_order() {
        let parsed = draft(with(
            json!({"tags": [" Crypto", "finance", "CRYPTO", "api"]}),
        ));
        assert_eq!(parsed.tags, ["crypto", "finance", "api"]);
    }

    #[test]
    fn each_tag_must_be_a_non_empty_string_of_at_most_40_characters() {
        let found = fields(with(
            json!({"tags": ["ok", "", 3, "t".repeat(41), "t".repeat(40)]}),
        ));
        assert_eq!(found, ["tags[1]", "tags[2]", "tags[3]"]);
        assert_eq!(fields(with(json!({"tags": "a,b"}))), ["tags"]);
    }

    #[test]
    fn at_most_32_distinct_tags_are_allowed() {
        let tags = |n: usize| (0..n).map(|i| format!("t{i}")).collect::<Vec<_>>();
        assert!(AgentDraft::parse(&with(json!({"tags": tags(32)}))).is_ok());
        assert_eq!(fields(with(json!({"tags": tags(33)}))), ["tags"]);
    }

    #[test]
    fn a_capability_needs_a_name_and_may_omit_description_and_schema() {
        let parsed = draft(with(json!({"capabilities": [{"name": " ping "}]})));
        assert_eq!(
            parsed.capabilities,
            [Capability {
                name: "ping".to_owned(),
                description: String::new(),
                input_schema: None
            }]
        );
        assert_eq!(
            fields(with(
                json!({"capabilities": [{"description": "x"}, "ping", {"name": ""}]})
            )),
            [
                "capabilities[0].name",
                "capabilities[1]",
                "capabilities[2].name"
            ]
        );
    }

    #[test]
    fn capability_fields_are_bounded_and_typed() {
        let found = fields(with(json!({"capabilities": [
            {"name": "n".repeat(129)},
            {"name": "a", "description": "d".repeat(8_001)},
            {"name": "b", "input_schema": "object"},
            {"name": "c", "description": 5}
        ]})));
        assert_eq!(
            found,
            [
                "capabilities[0].name",
                "capabilities[1].description",
                "capabilities[2].input_schema",
                "capabilities[3].description"
            ]
        );
    }

    #[test]
    fn capability_names_must_be_unique() {
        let found = fields(with(
            json!({"capabilities": [{"name": "a"}, {"name": "b"}, {"name": " a"}]}),
        ));
        assert_eq!(found, ["capabilities[2].name"]);
    }

    #[test]
    fn at_most_64_capabilities_are_allowed() {
        let capabilities = |n: usize| {
            (0..n)
                .map(|i| json!({"name": format!("c{i}")}))
                .collect::<Vec<_>>()
        };
        assert!(AgentDraft::parse(&with(json!({"capabilities": capabilities(64)}))).is_ok());
        assert_eq!(
            fields(with(json!({"capabilities": capabilities(65)}))),
            ["capabilities"]
        );
        assert_eq!(fields(with(json!({"capabilities": {}}))), ["capabilities"]);
    }

    #[test]
    fn payment_errors_are_merged_with_the_others() {
        let found = fields(with(
            json!({"name": "", "payment": {"model": "paid", "rails": ["base:"]}}),
        ));
        assert_eq!(found, ["name", "payment.rails[0]"]);
        assert_eq!(fields(with(json!({"payment": "free"}))), ["payment"]);
    }

    #[test]
    fn null_optionals_are_absent_and_unknown_fields_are_ignored() {
        let parsed = draft(with(json!({
            "version": null, "url": null, "tags": null, "capabilities": null,
            "payment": null, "card": null, "source": "import.jsonl", "id": "agt_x"
        })));
        assert_eq!(parsed, draft(minimal()));
    }

    #[test]
    fn every_invalid_field_is_reported_at_once() {
        let found = fields(json!({
            "package_name": "bad", "name": 1, "description": "",
            "version": "v".repeat(65), "manifest_url": "nope", "url": "ftp://x",
            "target": 1, "category": "c".repeat(101), "tags": [""],
            "capabilities": [{}], "payment": {"model": "x"}, "card": []
        }));
        assert_eq!(
            found,
            [
                "card",
                "package_name",
                "name",
                "description",
                "version",
                "manifest_url",
                "url",
                "target",
                "category",
                "tags[0]",
                "capabilities[0].name",
                "payment.model"
            ]
        );
    }

    fn card() -> Value {
        json!({
            "name": "Card Weather",
            "description": "From the card.",
            "version": "2.0.0",
            "supportedInterfaces": [
                {"url": "https://weather.example.com/a2a/v1", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
                {"url": "https://weather.example.com/grpc", "protocolBinding": "GRPC", "protocolVersion": "1.0"}
            ],
            "capabilities": {"streaming": false, "extensions": [
                {"uri": "https://example.org/other", "params": {"payment": {"model": "free"}}},
                {"uri": REGISTRY_EXTENSION_URI, "required": false, "params": {"payment": {
                    "model": "paid", "protocols": ["x402"],
                    "rails": [{"network": "eip155:8453", "token": "USDC", "protocol": "x402"}]
                }}}
            ]},
            "skills": [
                {"id": "get_forecast", "name": "Get forecast", "description": "Forecast for a city",
                 "tags": [], "inputSchema": {"type": "object"}},
                {"name": "alerts", "description": "Weather alerts", "tags": []}
            ]
        })
    }

    #[test]
    fn a_card_fills_in_the_fields_missing_from_the_body() {
        let parsed = draft(json!({"package_name": "com.example.weather", "card": card()}));
        assert_eq!(parsed.name, "Card Weather");
        assert_eq!(parsed.description, "From the card.");
        assert_eq!(parsed.version.as_deref(), Some("2.0.0"));
        assert_eq!(
            parsed.url.as_deref(),
            Some("https://weather.example.com/a2a/v1")
        );
        assert_eq!(parsed.card, Some(card()));
    }

    #[test]
    fn card_skills_become_capabilities_named_by_id_else_name() {
        let parsed = draft(json!({"package_name": "com.example.weather", "card": card()}));
        assert_eq!(
            parsed.capabilities,
            [
                Capability {
                    name: "get_forecast".to_owned(),
                    description: "Forecast for a city".to_owned(),
                    input_schema: Some(json!({"type": "object"}))
                },
                Capability {
                    name: "alerts".to_owned(),
                    description: "Weather alerts".to_owned(),
                    input_schema: None
                }
            ]
        );
    }

    #[test]
    fn card_payment_comes_from_the_registry_extension_with_token_as_asset() {
        let parsed = draft(json!({"package_name": "com.example.weather", "card": card()}));
        let payment = parsed.payment.expect("payment from card");
        assert_eq!(payment.protocols, ["x402"]);
        assert_eq!(payment.rails[0].network, "base");
        assert_eq!(payment.rails[0].asset, "usdc");
    }

    #[test]
    fn explicit_body_fields_win_over_the_card() {
        let parsed = draft(with(json!({
            "card": card(), "version": "9.9.9", "url": "https://other.example.com/a2a",
            "capabilities": [], "payment": {"model": "free"}
        })));
        assert_eq!(parsed.name, "Weather Agent");
        assert_eq!(parsed.version.as_deref(), Some("9.9.9"));
        assert_eq!(parsed.url.as_deref(), Some("https://other.example.com/a2a"));
        assert!(parsed.capabilities.is_empty());
        assert_eq!(parsed.payment, Some(Payment::free()));
    }

    #[test]
    fn a_null_body_field_falls_back_to_the_card() {
        let parsed = draft(with(json!({"card": card(), "name": null})));
        assert_eq!(parsed.name, "Card Weather");
    }

    #[test]
    fn a_legacy_card_gives_its_top_level_url() {
        let legacy =
            json!({"name": "Old", "description": "v0.3", "url": "https://old.example.com/rpc"});
        let parsed = draft(json!({"package_name": "com.example.old", "card": legacy}));
        assert_eq!(parsed.url.as_deref(), Some("https://old.example.com/rpc"));
    }

    #[test]
    fn a_card_that_is_not_an_object_is_a_card_error() {
        assert_eq!(fields(with(json!({"card": "{}"}))), ["card"]);
        assert_eq!(fields(with(json!({"card": [1]}))), ["card"]);
    }

    #[test]
    fn a_card_over_64_kib_is_rejected() {
        let big = json!({"name": "Big", "description": "x".repeat(64 * 1024)});
        assert_eq!(fields(with(json!({"card": big}))), ["card"]);
    }

    #[test]
    fn errors_in_fields_taken_from_the_card_say_so() {
        let bad_card = json!({"name": "", "supportedInterfaces": [{"url": "ftp://x"}],
            "skills": [{"description": "no id"}]});
        let found =
            errors(json!({"package_name": "com.example.x", "description": "d", "card": bad_card}));
        let messages: Vec<(&str, &str)> = found
            .iter()
            .map(|error| (error.field.as_str(), error.message.as_str()))
            .collect();
        assert_eq!(messages.len(), 3);
        assert_eq!(messages[0], ("name", "must not be empty (taken from card)"));
        assert_eq!(messages[1].0, "url");
        assert!(messages[1].1.ends_with("(taken from card)"));
        assert_eq!(
            messages[2],
            ("capabilities[0].name", "is required (taken from card)")
        );
    }

    #[test]
    fn a_card_without_the_missing_fields_leaves_them_required() {
        assert_eq!(
            fields(json!({"package_name": "com.example.x", "card": {}})),
            ["name", "description"]
        );
    }

    #[test]
    fn a_capability_serializes_without_a_missing_schema() {
        let capability = Capability {
            name: "ping".to_owned(),
            description: String::new(),
            input_schema: None,
        };
        assert_eq!(
            serde_json::to_value(&capability).expect("should succeed"),
            json!({"name": "ping", "description": ""})
        );
        let read_back: Capability =
            serde_json::from_value(json!({"name": "ping"})).expect("should succeed");
        assert_eq!(read_back, capability);
    }

    #[test]
    fn a_url_limit_counts_the_characters_as_sent() {
        let padded = format!("  https://x.example/{}  ", "a".repeat(MAX_URL_CHARS - 20));
        assert!(
            padded.trim().chars().count() < MAX_URL_CHARS && padded.chars().count() > MAX_URL_CHARS
        );
        let errors = AgentDraft::parse(&with(json!({"url": padded})))
            .map(|_| ())
            .expect_err("over the limit as sent");
        assert_eq!(errors[0].field, "url");
        let fits = format!("https://x.example/{}", "a".repeat(MAX_URL_CHARS - 18));
        assert!(AgentDraft::parse(&with(json!({"url": fits}))).is_ok());
    }

    #[test]
    fn representative_queries_are_trimmed_and_repeats_dropped() {
        let parsed = draft(with(json!({"representative_queries": [
            "  will it rain in Paris tomorrow ", "Will it rain in Paris tomorrow", "weekend forecast"
        ]})));
        assert_eq!(
            parsed.representative_queries,
            ["will it rain in Paris tomorrow", "weekend forecast"]
        );
        let camel = draft(with(
            json!({"representativeQueries": ["a forecast", "a tide table"]}),
        ));
        assert_eq!(camel.representative_queries.len(), 2);
        assert!(
            draft(with(json!({"representative_queries": []})))
                .representative_queries
                .is_empty()
        );
    }

    #[test]
    fn representative_queries_outside_two_to_five_or_malformed_are_refused() {
        for (value, field) in [
            (json!(["only one"]), "representative_queries"),
            (
                json!(["1", "2", "3", "4", "5", "6"]),
                "representative_queries",
            ),
            (json!("a forecast"), "representative_queries"),
            (json!(["a forecast", "   "]), "representative_queries[1]"),
            (json!(["a forecast", 7]), "representative_queries[1]"),
            (
                json!(["a forecast", "x".repeat(301)]),
                "representative_queries[1]",
            ),
        ] {
            assert_eq!(
                fields(with(json!({"representative_queries": value}))),
                [field],
                "{value}"
            );
        }
    }

    #[test]
    fn a_cards_skill_examples_fill_in_representative_queries() {
        let mut with_examples = card();
        with_examples["skills"][0]["examples"] = json!([
            "forecast for Lyon",
            " ",
            42,
            "forecast for Lyon",
            "x".repeat(400)
        ]);
        with_examples["skills"][1]["examples"] = json!(["storm alerts near me"]);
        let parsed = draft(with(json!({"card": with_examples})));
        assert_eq!(
            parsed.representative_queries,
            ["forecast for Lyon", "storm alerts near me"]
        );
        // One example is taken as it comes; the publisher's own list wins over the card's.
        with_examples["skills"] =
            json!([{"name": "x", "description": "x", "examples": ["just one"]}]);
        assert_eq!(
            draft(with(json!({"card": with_examples.clone()}))).representative_queries,
            ["just one"]
        );
        let own = draft(with(
            json!({"card": with_examples, "representative_queries": ["mine", "ours"]}),
        ));
        assert_eq!(own.representative_queries, ["mine", "ours"]);
    }

    #[test]
    fn a_publishers_identifier_must_name_the_packages_domain() {
        let given = draft(with(
            json!({"identifier": " urn:air:Example.com:tools:weather "}),
        ));
        assert_eq!(
            given.identifier.map(|urn| urn.to_string()).as_deref(),
            Some("urn:air:example.com:tools:weather")
        );
        let hosted = draft(json!({
            "package_name": "io.github.alice.search", "name": "S", "description": "S",
            "identifier": "urn:air:alice.github.io:search-v2"
        }));
        assert!(hosted.identifier.is_some());
        let errors = AgentDraft::parse(&with(json!({"identifier": "urn:air:google.com:weather"})))
            .expect_err("another domain");
        assert_eq!(errors[0].field, "identifier");
        assert!(
            errors[0].message.contains("example.com"),
            "{}",
            errors[0].message
        );
        for bad in [json!("weather"), json!("urn:air:example.com"), json!(7)] {
            assert_eq!(fields(with(json!({"identifier": bad}))), ["identifier"]);
        }
        assert!(draft(with(json!({"identifier": ""}))).identifier.is_none());
    }
}
