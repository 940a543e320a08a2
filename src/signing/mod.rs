//! Signed agent cards (A2A v1.0, "Agent Card Signing"): the registry signs every card it serves
//! with a JSON Web Signature over the card's canonical form, publishes its public keys as a JWK
//! set, and checks the signatures publishers put on their own cards.
//!
//! The signed payload is the card without `signatures`, with empty strings, arrays and objects
//! removed and an extension's `required: false` dropped (the A2A rule that unset and default
//! fields are absent, as the official SDK applies it), in the JSON Canonicalization Scheme
//! (`jcs`). The JWS is detached: a card carries
//! `signatures: [{protected, signature}]` and the verifier rebuilds the payload from the card.
//! The registry serves the cards it signs in exactly that form, so a verifier that
//! canonicalises the card as served, without dropping anything, checks the same bytes.

pub mod jcs;
pub mod keys;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Map, Value, json};

pub use keys::{Jwk, SigningKey};

/// The card as its signatures cover it, and as the registry serves it signed: without
/// `signatures`, without empty strings, arrays, objects and nulls, and without an extension's
/// `required: false`. Serving this form makes both readings of the signing rule verify: a
/// verifier that drops the empty and default members first (the official SDK) and one that
/// canonicalises the card exactly as served (RFC 8785 read literally).
pub fn signed_form(card: &Value) -> Value {
    let mut card = card.clone();
    if let Value::Object(members) = &mut card {
        members.remove("signatures");
    }
    // The one plain (not `optional`) scalar of an AgentCard that has a default: an extension's
    // `required`. At its default (false) it is absent from the canonical form.
    if let Some(extensions) = card
        .pointer_mut("/capabilities/extensions")
        .and_then(Value::as_array_mut)
    {
        for extension in extensions.iter_mut().filter_map(Value::as_object_mut) {
            if extension.get("required") == Some(&Value::Bool(false)) {
                extension.remove("required");
            }
        }
    }
    without_empty(card).unwrap_or(Value::Object(Map::new()))
}

/// The payload a card's signatures cover, in canonical form.
pub fn card_payload(card: &Value) -> Result<String, jcs::JcsError> {
    jcs::canonicalize(&signed_form(card))
}

/// `value` without empty strings, arrays and objects (recursively); `None` when nothing is left.
fn without_empty(value: Value) -> Option<Value> {
    match value {
        Value::String(text) if text.is_empty() => None,
        Value::Array(items) => {
            let kept: Vec<Value> = items.into_iter().filter_map(without_empty).collect();
            (!kept.is_empty()).then_some(Value::Array(kept))
        }
        Value::Object(members) => {
            let kept: Map<String, Value> = members
                .into_iter()
                .filter_map(|(name, member)| without_empty(member).map(|member| (name, member)))
                .collect();
            (!kept.is_empty()).then_some(Value::Object(kept))
        }
        Value::Null => None,
        other => Some(other),
    }
}

/// The signing key's file in the data directory when none is configured.
pub const DEFAULT_KEY_FILE: &str = "card-signing-key.pem";

/// Signs the cards the registry serves and publishes the keys that check them.
pub struct CardSigner {
    current: SigningKey,
    /// Public keys of earlier signing keys, still published until they are retired, so cards
    /// signed with them (cached by clients) keep verifying.
    previous: Vec<Jwk>,
    /// Where the key set is published (`jku`).
    jwks_url: String,
}

impl CardSigner {
    /// The signer `config` names (making the default key in `data_dir` when it is absent),
    /// publishing its keys at `jwks_url`.
    pub fn from_config(
        config: &crate::config::SigningConfig,
        data_dir: &std::path::Path,
        jwks_url: String,
    ) -> anyhow::Result<Self> {
        let current = match &config.card_signing_key {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|err| {
                    anyhow::anyhow!(
                        "cannot read the card-signing key {} (--card-signing-key): {err}",
                        path.display()
                    )
                })?;
                SigningKey::from_pem(&text)
                    .map_err(|err| anyhow::anyhow!("{}: {err}", path.display()))?
            }
            None => SigningKey::load_or_create(&data_dir.join(DEFAULT_KEY_FILE))?,
        };
        let mut previous = Vec::new();
        for path in &config.card_signing_previous_keys {
            let text = std::fs::read_to_string(path).map_err(|err| {
                anyhow::anyhow!(
                    "cannot read the previous card-signing key {} \
                     (--card-signing-previous-keys): {err}",
                    path.display()
                )
            })?;
            let key = SigningKey::from_pem(&text)
                .map_err(|err| anyhow::anyhow!("{}: {err}", path.display()))?;
            if key.kid() != current.kid() {
                previous.push(Jwk::parse(key.public_jwk()).map_err(anyhow::Error::msg)?);
            }
        }
        Ok(Self::new(current, previous, jwks_url))
    }

    pub fn new(current: SigningKey, previous: Vec<Jwk>, jwks_url: String) -> Self {
        Self {
            current,
            previous,
            jwks_url,
        }
    }

    /// The id of the key that signs now.
    pub fn kid(&self) -> &str {
        self.current.kid()
    }

    /// `card` in its signed form (`signed_form`) with the registry's signature as its only
    /// entry in `signatures` (a publisher's own signatures would not cover the card as served).
    /// A card without a canonical form (nesting deeper than JCS reads) is served unsigned, as
    /// given.
    pub fn sign(&self, card: &Value) -> Value {
        let form = signed_form(card);
        let Ok(payload) = jcs::canonicalize(&form) else {
            return card.clone();
        };
        let header = json!({
            "alg": self.current.algorithm(),
            "typ": "JOSE",
            "kid": self.current.kid(),
            "jku": self.jwks_url,
        });
        let protected = URL_SAFE_NO_PAD.encode(header.to_string());
        let input = format!("{protected}.{}", URL_SAFE_NO_PAD.encode(payload));
        let signature = URL_SAFE_NO_PAD.encode(self.current.sign(input.as_bytes()));
        let mut signed = form;
        if let Value::Object(members) = &mut signed {
            members.insert(
                "signatures".to_owned(),
                json!([{"protected": protected, "signature": signature}]),
            );
        }
        signed
    }

    /// The public key set (`/.well-known/jwks.json`): the current key first.
    pub fn jwks(&self) -> Value {
        let keys: Vec<&Value> = std::iter::once(self.current.public_jwk())
            .chain(self.previous.iter().map(Jwk::as_json))
            .collect();
        json!({ "keys": keys })
    }

    /// The key with id `kid` among the published ones.
    pub fn published_key(&self, kid: &str) -> Option<Jwk> {
        if kid == self.current.kid() {
            return Jwk::parse(self.current.public_jwk()).ok();
        }
        self.previous
            .iter()
            .find(|key| key.kid() == Some(kid))
            .cloned()
    }
}

/// What checking a card's signatures found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verification {
    /// The card carries no signatures.
    Unsigned,
    /// A signature verified with the key of this id.
    Verified { kid: String },
    /// A key was had and no signature verified with its key (or none is a well-formed JWS).
    Invalid { kid: Option<String>, reason: String },
    /// No key could be had for any signature.
    Unverifiable { kid: Option<String>, reason: String },
}

/// One signature of a card, as found in its `signatures`.
#[derive(Debug, Clone)]
pub struct CardSignature {
    pub protected: String,
    pub signature: String,
    /// From the protected header.
    pub alg: String,
    pub kid: Option<String>,
    pub jku: Option<String>,
}

/// The signatures of `card` (malformed entries are skipped: they verify nothing).
pub fn signatures_of(card: &Value) -> Vec<CardSignature> {
    let Some(entries) = card.get("signatures").and_then(Value::as_array) else {
        return Vec::new();
    };
    entries
        .iter()
        .take(MAX_SIGNATURES)
        .filter_map(|entry| {
            let protected = entry.get("protected")?.as_str()?.to_owned();
            let signature = entry.get("signature")?.as_str()?.to_owned();
            let header: Value = serde_json::from_slice(
                &URL_SAFE_NO_PAD
                    .decode(protected.trim_end_matches('='))
                    .ok()?,
            )
            .ok()?;
            Some(CardSignature {
                alg: header.get("alg")?.as_str()?.to_owned(),
                kid: header.get("kid").and_then(Value::as_str).map(str::to_owned),
                jku: header.get("jku").and_then(Value::as_str).map(str::to_owned),
                protected,
                signature,
            })
        })
        .collect()
}

/// Signatures of one card that are checked; more are ignored.
pub const MAX_SIGNATURES: usize = 8;

/// Check `card`'s signatures with the keys `key_for` finds for each (by `kid`, from the set at
/// `jku`; an `Err` says why there is none): verified when one signature checks out, invalid
/// when a key was had and its signature does not, unverifiable when no key was had.
pub fn verify_card(
    card: &Value,
    mut key_for: impl FnMut(&CardSignature) -> Result<Jwk, String>,
) -> Verification {
    let signatures = signatures_of(card);
    if signatures.is_empty() {
        let listed = card
            .get("signatures")
            .and_then(Value::as_array)
            .is_some_and(|entries| !entries.is_empty());
        return if listed {
            Verification::Invalid {
                kid: None,
                reason: "no signature is a well-formed JWS".to_owned(),
            }
        } else {
            Verification::Unsigned
        };
    }
    let payload = match card_payload(card) {
        Ok(payload) => URL_SAFE_NO_PAD.encode(payload),
        Err(err) => {
            return Verification::Invalid {
                kid: None,
                reason: format!("the card has no canonical form: {err}"),
            };
        }
    };
    let mut invalid = None;
    let mut unverifiable = None;
    for signature in signatures {
        let key = match key_for(&signature) {
            Ok(key) => key,
            Err(reason) => {
                unverifiable.get_or_insert((signature.kid.clone(), reason));
                continue;
            }
        };
        let input = format!("{}.{payload}", signature.protected);
        let checked = URL_SAFE_NO_PAD
            .decode(signature.signature.trim_end_matches('='))
            .map_err(|_| "the signature is not base64url".to_owned())
            .and_then(|bytes| key.verify(&signature.alg, input.as_bytes(), &bytes));
        match checked {
            Ok(()) => {
                return Verification::Verified {
                    kid: signature.kid.unwrap_or_default(),
                };
            }
            Err(reason) => {
                invalid.get_or_insert((signature.kid.clone(), reason));
            }
        }
    }
    match (invalid, unverifiable) {
        (Some((kid, reason)), _) => Verification::Invalid { kid, reason },
        (None, Some((kid, reason))) => Verification::Unverifiable { kid, reason },
        (None, None) => Verification::Unverifiable {
            kid: None,
            reason: "no signature was checked".to_owned(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signer() -> CardSigner {
        CardSigner::new(
            SigningKey::generate_ed25519().expect("key"),
            Vec::new(),
            "https://registry.test/.well-known/jwks.json".to_owned(),
        )
    }

    fn card() -> Value {
        json!({
            "name": "Tide tables",
            "description": "Tides for any harbour, in €.",
            "version": "1.0.0",
            "supportedInterfaces": [{"url": "https://tides.test/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
            "capabilities": {"streaming": false, "extensions": []},
            "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["application/json"],
            "skills": [{"id": "tides", "name": "tides", "description": "", "tags": ["sea"]}],
        })
    }

    fn own_key(signer: &CardSigner) -> impl FnMut(&CardSignature) -> Result<Jwk, String> + '_ {
        |signature| {
            signature
                .kid
                .as_deref()
                .and_then(|kid| signer.published_key(kid))
                .ok_or_else(|| "unknown key".to_owned())
        }
    }

    #[test]
    fn a_signed_card_verifies_with_the_published_key() {
        for key in [
            SigningKey::generate_ed25519().expect("key"),
            SigningKey::generate_es256().expect("key"),
        ] {
            let signer = CardSigner::new(key, Vec::new(), "https://r.test/jwks".to_owned());
            let signed = signer.sign(&card());
            assert_eq!(
                verify_card(&signed, own_key(&signer)),
                Verification::Verified {
                    kid: signer.kid().to_owned()
                }
            );
        }
    }

    #[test]
    fn a_signed_card_is_served_as_its_signature_covers_it() {
        let signer = signer();
        let card = json!({
            "name": "A", "description": "", "tags": [], "provider": {"url": null},
            "capabilities": {"extensions": [{"uri": "u", "required": false}]},
        });
        let signed = signer.sign(&card);
        // What a verifier that drops nothing canonicalises: the card as served, minus
        // `signatures`, is exactly the signed payload.
        let mut served = signed.clone();
        served.as_object_mut().expect("object").remove("signatures");
        assert_eq!(
            jcs::canonicalize(&served).expect("canonical"),
            card_payload(&card).expect("payload")
        );
        assert_eq!(
            served,
            json!({"name": "A", "capabilities": {"extensions": [{"uri": "u"}]}})
        );
    }

    #[test]
    fn a_tampered_card_fails() {
        let signer = signer();
        let mut signed = signer.sign(&card());
        signed["description"] = json!("Tides for any harbour, in $.");
        assert!(matches!(
            verify_card(&signed, own_key(&signer)),
            Verification::Invalid { .. }
        ));
        let mut resigned = signer.sign(&card());
        resigned["signatures"][0]["signature"] = json!("AAAA");
        assert!(matches!(
            verify_card(&resigned, own_key(&signer)),
            Verification::Invalid { .. }
        ));
    }

    #[test]
    fn empty_members_and_old_signatures_are_outside_the_payload() {
        let signer = signer();
        let signed = signer.sign(&card());
        let mut reordered: Value =
            serde_json::from_str(&serde_json::to_string_pretty(&signed).expect("json"))
                .expect("json");
        // Empty members may come and go without breaking the signature.
        reordered["capabilities"]
            .as_object_mut()
            .expect("object")
            .remove("extensions");
        reordered["iconUrl"] = json!("");
        assert!(matches!(
            verify_card(&reordered, own_key(&signer)),
            Verification::Verified { .. }
        ));
        assert_eq!(
            card_payload(&json!({"a": "", "b": [], "c": {}, "d": [[]], "signatures": [1]})),
            Ok("{}".to_owned())
        );
        assert_eq!(
            card_payload(&json!({"capabilities": {"extensions": [
                {"uri": "u", "required": false}, {"uri": "v", "required": true}
            ]}})),
            Ok(
                r#"{"capabilities":{"extensions":[{"uri":"u"},{"required":true,"uri":"v"}]}}"#
                    .to_owned()
            )
        );
    }

    #[test]
    fn an_unsigned_card_is_unsigned_and_garbage_is_invalid() {
        let signer = signer();
        assert_eq!(
            verify_card(&card(), own_key(&signer)),
            Verification::Unsigned
        );
        let mut garbage = card();
        garbage["signatures"] = json!([{"protected": "%%%", "signature": "x"}]);
        assert!(matches!(
            verify_card(&garbage, own_key(&signer)),
            Verification::Invalid { .. }
        ));
    }

    #[test]
    fn a_previous_key_still_verifies_what_it_signed() {
        let old = SigningKey::generate_ed25519().expect("key");
        let old_public = Jwk::parse(old.public_jwk()).expect("jwk");
        let before = CardSigner::new(old, Vec::new(), "https://r.test/jwks".to_owned());
        let signed_before = before.sign(&card());
        let after = CardSigner::new(
            SigningKey::generate_ed25519().expect("key"),
            vec![old_public],
            "https://r.test/jwks".to_owned(),
        );
        assert_eq!(after.jwks()["keys"].as_array().map(Vec::len), Some(2));
        assert!(matches!(
            verify_card(&signed_before, own_key(&after)),
            Verification::Verified { .. }
        ));
    }
}
