//! Thin REST handlers, one file per resource: extract → authorise → call the domain → respond.

pub mod agents;
pub mod ard;
pub mod audit;
pub mod bazaar;
pub mod bindings;
pub mod catalog;
pub mod changes;
pub mod identity;
pub mod mcp_registry;
pub mod mirrors;
pub mod namespaces;
pub mod ops;
pub mod orgs;
pub mod public;
pub mod signin;
pub mod tokens;

use serde_json::Value;

use crate::domain::FieldError;
use crate::error::ApiError;

/// A string member of a JSON object body: `None` when absent or null; 422 when the body is not
/// an object or the member is not a string.
pub(crate) fn string_field<'a>(body: &'a Value, name: &str) -> Result<Option<&'a str>, ApiError> {
    let Some(object) = body.as_object() else {
        return Err(ApiError::validation(vec![FieldError::new(
            "body",
            "must be a JSON object",
        )]));
    };
    match object.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.as_str())),
        Some(_) => Err(ApiError::validation(vec![FieldError::new(
            name,
            "must be a string",
        )])),
    }
}
