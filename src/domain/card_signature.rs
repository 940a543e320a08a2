//! What checking the signatures on a publisher's own card found.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::timestamp::Timestamp;

/// The outcome of checking a publisher's signatures on the card they published, when the card
/// carries any. Derived by the registry when the card is published or updated; never written by
/// the owner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CardSignatureCheck {
    /// `valid`: a signature verified with its key; `invalid`: a key was obtained and the
    /// signature does not verify with it; `unverifiable`: no key could be had (no `jku`, the
    /// key set could not be fetched, or no key of that `kid`).
    pub status: SignatureStatus,
    /// The key that verified it (`valid`), or that it named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kid: Option<String>,
    /// When the check ran.
    pub checked_at: Timestamp,
    /// Why it is not `valid`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// See `CardSignatureCheck::status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SignatureStatus {
    Valid,
    Invalid,
    Unverifiable,
}

impl SignatureStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Valid => "valid",
            Self::Invalid => "invalid",
            Self::Unverifiable => "unverifiable",
        }
    }
}
