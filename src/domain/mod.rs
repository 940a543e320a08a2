//! Domain types built by parsing: once a value exists, it is valid, so inner code never re-checks it.

pub mod access;
pub mod agent;
pub mod agent_card;
pub mod binding;
pub mod card_signature;
pub mod deprecation;
pub mod health;
pub mod json;
pub mod mirror_source;
pub mod namespace;
pub mod org;
pub mod package_name;
pub mod payment;
pub mod rails;
pub mod reach;
pub mod scan;
pub mod server_json;
pub mod surface;
pub mod trusted_issuer;
pub mod urn;
pub mod version;
pub mod x402;

pub use access::Scope;
pub use agent::{AgentDraft, Capability};
pub use agent_card::A2aCard;
pub use card_signature::{CardSignatureCheck, SignatureStatus};
pub use health::{Health, HealthStatus};
pub use namespace::Namespace;
pub use package_name::PackageName;
pub use payment::{Payment, PaymentFilter, Price, Rail};
pub use reach::Reach;
pub use urn::AirUrn;
pub use version::DEFAULT_VERSION;

/// One invalid field of a request body, reported with all others at once.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct FieldError {
    /// Path of the offending field, e.g. `package_name` or `payment.rails[2].asset`.
    pub field: String,
    /// What is wrong with it, in lowercase prose.
    pub message: String,
}

impl FieldError {
    /// Builds an error for `field` saying `message`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// A list that may repeat items (repeats collapse) is still refused whole, before any item is
/// read, when it is longer than this many times its limit: the work per request stays bounded.
pub const LIST_SLACK: usize = 4;

/// `items`, unless there are more than `max` of them: then one error for `field` and `None`,
/// so that no per-item work (or per-item error) follows.
pub fn bounded_items<'a>(
    field: &str,
    items: &'a [serde_json::Value],
    max: usize,
    errors: &mut Vec<FieldError>,
) -> Option<&'a [serde_json::Value]> {
    if items.len() > max {
        errors.push(FieldError::new(
            field,
            format!("at most {max} items (got {})", items.len()),
        ));
        return None;
    }
    Some(items)
}

/// `s` cut to `max_chars` characters, with `…` when anything was cut: for echoing user input in
/// error messages.
pub fn truncate(s: &str, max_chars: usize) -> String {
    match s.char_indices().nth(max_chars) {
        Some((idx, _)) => format!("{}…", &s[..idx]),
        None => s.to_owned(),
    }
}
