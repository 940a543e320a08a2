//! A publisher's "deprecated, use X instead": an agent (or one of its versions) stays listed
//! and resolvable, with a message and an optional successor, until the publisher undoes it.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::timestamp::Timestamp;

/// Longest deprecation message, in characters.
pub const MAX_MESSAGE_CHARS: usize = 500;

/// Why an agent (or a version) is deprecated, and what to use instead.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Deprecation {
    /// The publisher's message (at most 500 characters).
    pub message: String,
    /// The package name of the agent to use instead, when the publisher named one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub successor: Option<String>,
    /// When it was deprecated.
    pub deprecated_at: Timestamp,
}

impl Deprecation {
    /// A message as the publisher sent it, checked: trimmed, 1 to 500 characters, no control
    /// characters but line breaks and tabs.
    pub fn message(raw: &str) -> Result<String, String> {
        if raw.chars().count() > MAX_MESSAGE_CHARS {
            return Err(format!("must be at most {MAX_MESSAGE_CHARS} characters"));
        }
        if raw
            .chars()
            .any(|c| c.is_control() && !matches!(c, '\n' | '\t'))
        {
            return Err("must not hold control characters (line breaks and tabs aside)".to_owned());
        }
        let message = raw.trim();
        if message.is_empty() {
            return Err("must not be empty".to_owned());
        }
        Ok(message.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_is_trimmed_and_bounded() {
        assert_eq!(Deprecation::message("  use v2 \n").as_deref(), Ok("use v2"));
        assert!(Deprecation::message("   ").is_err());
        assert!(Deprecation::message(&"x".repeat(501)).is_err());
        assert!(Deprecation::message(&"é".repeat(500)).is_ok());
        assert!(Deprecation::message("bad\u{0}byte").is_err());
        assert!(Deprecation::message("two\nlines").is_ok());
    }
}
