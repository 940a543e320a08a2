//! Thin REST handlers, one file per resource: extract → authorise → call the domain → respond.

pub mod agents;
pub mod changes;
pub mod ops;
pub mod playground;
pub mod public;
pub mod tokens;
pub mod wire;

use crate::error::{ApiError, ErrorCode};
use crate::search::SearchError;

impl From<SearchError> for ApiError {
    fn from(err: SearchError) -> Self {
        match err {
            SearchError::InvalidParameter { parameter, message } => {
                ApiError::invalid_parameter(format!("{parameter}: {message}"))
            }
            SearchError::InvalidCursor => ApiError::new(
                ErrorCode::InvalidParameter,
                "cursor: malformed, or from a different query; start again without it",
            ),
            SearchError::InvalidSort(_) => ApiError::invalid_parameter(format!("sort: {err}")),
        }
    }
}
