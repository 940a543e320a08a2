//! Signing keys (Ed25519 or ECDSA P-256, PKCS#8 PEM files) and public JSON Web Keys.

use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, Ed25519KeyPair, KeyPair, UnparsedPublicKey};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

enum Pair {
    Ed25519(Ed25519KeyPair),
    Es256(EcdsaKeyPair),
}

/// A private key the registry signs with, and its public JWK.
pub struct SigningKey {
    pair: Pair,
    kid: String,
    public: Value,
    rng: SystemRandom,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey")
            .field("alg", &self.algorithm())
            .field("kid", &self.kid)
            .finish_non_exhaustive()
    }
}

const PEM_BEGIN: &str = "-----BEGIN PRIVATE KEY-----";
const PEM_END: &str = "-----END PRIVATE KEY-----";

impl SigningKey {
    /// A new Ed25519 key.
    pub fn generate_ed25519() -> anyhow::Result<Self> {
        Self::from_pkcs8(&Self::new_ed25519_pkcs8()?)
    }

    /// A new ECDSA P-256 key.
    pub fn generate_es256() -> anyhow::Result<Self> {
        let rng = SystemRandom::new();
        let document =
            EcdsaKeyPair::generate_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
                .map_err(|_| anyhow::anyhow!("cannot generate an ECDSA key"))?;
        Self::from_pkcs8(document.as_ref())
    }

    fn new_ed25519_pkcs8() -> anyhow::Result<Vec<u8>> {
        let document = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new())
            .map_err(|_| anyhow::anyhow!("cannot generate an Ed25519 key"))?;
        Ok(document.as_ref().to_vec())
    }

    /// A key from PKCS#8 DER: Ed25519, or ECDSA on P-256.
    pub fn from_pkcs8(der: &[u8]) -> anyhow::Result<Self> {
        let rng = SystemRandom::new();
        let pair = if let Ok(pair) = Ed25519KeyPair::from_pkcs8_maybe_unchecked(der) {
            Pair::Ed25519(pair)
        } else if let Ok(pair) =
            EcdsaKeyPair::from_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, der, &rng)
        {
            Pair::Es256(pair)
        } else {
            anyhow::bail!("not a PKCS#8 Ed25519 or ECDSA P-256 private key");
        };
        let mut public = match &pair {
            Pair::Ed25519(pair) => json!({
                "kty": "OKP",
                "crv": "Ed25519",
                "x": URL_SAFE_NO_PAD.encode(pair.public_key().as_ref()),
            }),
            Pair::Es256(pair) => {
                // Uncompressed point: 0x04 ‖ x ‖ y.
                let point = pair.public_key().as_ref();
                json!({
                    "kty": "EC",
                    "crv": "P-256",
                    "x": URL_SAFE_NO_PAD.encode(&point[1..33]),
                    "y": URL_SAFE_NO_PAD.encode(&point[33..65]),
                })
            }
        };
        let kid = thumbprint(&public);
        let alg = match pair {
            Pair::Ed25519(_) => "EdDSA",
            Pair::Es256(_) => "ES256",
        };
        if let Value::Object(members) = &mut public {
            members.insert("kid".to_owned(), json!(kid));
            members.insert("alg".to_owned(), json!(alg));
            members.insert("use".to_owned(), json!("sig"));
        }
        Ok(Self {
            pair,
            kid,
            public,
            rng,
        })
    }

    /// A key from a PKCS#8 PEM file (`-----BEGIN PRIVATE KEY-----`).
    pub fn from_pem(text: &str) -> anyhow::Result<Self> {
        let start = text
            .find(PEM_BEGIN)
            .ok_or_else(|| anyhow::anyhow!("no '{PEM_BEGIN}' block"))?;
        let body = &text[start + PEM_BEGIN.len()..];
        let end = body
            .find(PEM_END)
            .ok_or_else(|| anyhow::anyhow!("no '{PEM_END}' line"))?;
        let encoded: String = body[..end].split_whitespace().collect();
        let der = STANDARD
            .decode(encoded)
            .map_err(|_| anyhow::anyhow!("the PEM block is not base64"))?;
        Self::from_pkcs8(&der)
    }

    /// The key in `path`; when there is no such file, a new Ed25519 key written there
    /// (readable by the owner only).
    pub fn load_or_create(path: &Path) -> anyhow::Result<Self> {
        match std::fs::read_to_string(path) {
            Ok(text) => {
                Self::from_pem(&text).map_err(|err| anyhow::anyhow!("{}: {err}", path.display()))
            }
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                let der = Self::new_ed25519_pkcs8()?;
                let key = Self::from_pkcs8(&der)?;
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir)?;
                }
                write_private(path, &pem(&der))
                    .map_err(|err| anyhow::anyhow!("cannot write {}: {err}", path.display()))?;
                tracing::info!(path = %path.display(), kid = %key.kid, "made a card-signing key");
                Ok(key)
            }
            Err(err) => Err(anyhow::anyhow!("cannot read {}: {err}", path.display())),
        }
    }

    /// `EdDSA` or `ES256`.
    pub fn algorithm(&self) -> &'static str {
        match self.pair {
            Pair::Ed25519(_) => "EdDSA",
            Pair::Es256(_) => "ES256",
        }
    }

    /// The key id: the RFC 7638 thumbprint of the public key.
    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// The public key as a JWK with `kid`, `alg` and `use`.
    pub fn public_jwk(&self) -> &Value {
        &self.public
    }

    /// The JWS signature of `input` (for ES256, `r ‖ s`).
    pub fn sign(&self, input: &[u8]) -> Vec<u8> {
        match &self.pair {
            Pair::Ed25519(pair) => pair.sign(input).as_ref().to_vec(),
            // Signing fails only when the system has no randomness, which nothing survives.
            Pair::Es256(pair) => pair
                .sign(&self.rng, input)
                .map(|signature| signature.as_ref().to_vec())
                .unwrap_or_default(),
        }
    }
}

/// PKCS#8 DER as PEM.
fn pem(der: &[u8]) -> String {
    let encoded = STANDARD.encode(der);
    let mut out = format!("{PEM_BEGIN}\n");
    for line in encoded.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).unwrap_or_default());
        out.push('\n');
    }
    out.push_str(PEM_END);
    out.push('\n');
    out
}

#[cfg(unix)]
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()
}

#[cfg(not(unix))]
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    std::fs::write(path, text)
}

/// The RFC 7638 thumbprint of a public JWK: SHA-256 over its required members in order.
fn thumbprint(jwk: &Value) -> String {
    let members: &[&str] = match jwk.get("kty").and_then(Value::as_str) {
        Some("OKP") => &["crv", "kty", "x"],
        Some("EC") => &["crv", "kty", "x", "y"],
        Some("RSA") => &["e", "kty", "n"],
        _ => &[],
    };
    let required: serde_json::Map<String, Value> = members
        .iter()
        .filter_map(|name| Some(((*name).to_owned(), jwk.get(*name)?.clone())))
        .collect();
    let canonical = super::jcs::canonicalize(&Value::Object(required)).unwrap_or_default();
    URL_SAFE_NO_PAD.encode(Sha256::digest(canonical.as_bytes()))
}

/// A public JSON Web Key a card signature can be checked with.
#[derive(Debug, Clone, PartialEq)]
pub struct Jwk {
    json: Value,
    key: PublicKey,
}

#[derive(Debug, Clone, PartialEq)]
enum PublicKey {
    Ed25519(Vec<u8>),
    /// Curve (`P-256` or `P-384`) and the uncompressed point.
    Ec(&'static str, Vec<u8>),
    Rsa {
        n: Vec<u8>,
        e: Vec<u8>,
    },
}

fn member(json: &Value, name: &str) -> Result<Vec<u8>, String> {
    let text = json
        .get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("the key has no '{name}'"))?;
    URL_SAFE_NO_PAD
        .decode(text.trim_end_matches('='))
        .map_err(|_| format!("the key's '{name}' is not base64url"))
}

impl Jwk {
    /// A public key from its JWK form: OKP Ed25519, EC P-256 or P-384, or RSA.
    pub fn parse(json: &Value) -> Result<Self, String> {
        let kty = json.get("kty").and_then(Value::as_str).unwrap_or_default();
        let crv = json.get("crv").and_then(Value::as_str).unwrap_or_default();
        let key = match (kty, crv) {
            ("OKP", "Ed25519") => PublicKey::Ed25519(member(json, "x")?),
            ("EC", "P-256" | "P-384") => {
                let curve = if crv == "P-256" { "P-256" } else { "P-384" };
                let mut point = vec![4u8];
                point.extend(member(json, "x")?);
                point.extend(member(json, "y")?);
                PublicKey::Ec(curve, point)
            }
            ("RSA", _) => PublicKey::Rsa {
                n: member(json, "n")?,
                e: member(json, "e")?,
            },
            _ => return Err(format!("unsupported key type '{kty}' '{crv}'")),
        };
        Ok(Self {
            json: json.clone(),
            key,
        })
    }

    pub fn kid(&self) -> Option<&str> {
        self.json.get("kid").and_then(Value::as_str)
    }

    pub fn as_json(&self) -> &Value {
        &self.json
    }

    /// Check a JWS signature made with algorithm `alg` by this key. The algorithm must fit the
    /// key (and the key's own `alg`, when it names one), so a signature cannot choose a weaker
    /// reading of the key.
    pub fn verify(&self, alg: &str, input: &[u8], signature: &[u8]) -> Result<(), String> {
        if let Some(own) = self.json.get("alg").and_then(Value::as_str) {
            let same = own == alg || (own == "EdDSA" && alg == "Ed25519");
            if !same {
                return Err(format!("the key is for {own}, the signature says {alg}"));
            }
        }
        let verified = match (&self.key, alg) {
            (PublicKey::Ed25519(x), "EdDSA" | "Ed25519") => {
                UnparsedPublicKey::new(&signature::ED25519, x).verify(input, signature)
            }
            (PublicKey::Ec("P-256", point), "ES256") => {
                UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, point)
                    .verify(input, signature)
            }
            (PublicKey::Ec("P-384", point), "ES384") => {
                UnparsedPublicKey::new(&signature::ECDSA_P384_SHA384_FIXED, point)
                    .verify(input, signature)
            }
            (PublicKey::Rsa { n, e }, "RS256") => signature::RsaPublicKeyComponents { n, e }
                .verify(&signature::RSA_PKCS1_2048_8192_SHA256, input, signature),
            (PublicKey::Rsa { n, e }, "PS256") => signature::RsaPublicKeyComponents { n, e }
                .verify(&signature::RSA_PSS_2048_8192_SHA256, input, signature),
            _ => return Err(format!("algorithm '{alg}' does not fit this key")),
        };
        verified.map_err(|_| "the signature does not verify".to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_survives_its_pem_file_and_keeps_its_id() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("keys").join("card-signing-key.pem");
        let made = SigningKey::load_or_create(&path).expect("made");
        let loaded = SigningKey::load_or_create(&path).expect("loaded");
        assert_eq!(made.kid(), loaded.kid());
        assert_eq!(made.algorithm(), "EdDSA");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).expect("file").permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert!(
            SigningKey::from_pem("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----")
                .is_err()
        );
    }

    #[test]
    fn the_key_id_is_the_rfc_7638_thumbprint() {
        // RFC 7638, section 3.1: the example RSA key and its thumbprint.
        let jwk = json!({
            "kty": "RSA",
            "n": "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw",
            "e": "AQAB",
            "alg": "RS256",
            "kid": "2011-04-29"
        });
        assert_eq!(
            thumbprint(&jwk),
            "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"
        );
    }

    #[test]
    fn a_signature_checks_only_under_its_own_algorithm() {
        let key = SigningKey::generate_es256().expect("key");
        let public = Jwk::parse(key.public_jwk()).expect("jwk");
        let signature = key.sign(b"input");
        assert_eq!(public.verify("ES256", b"input", &signature), Ok(()));
        assert!(public.verify("ES256", b"other", &signature).is_err());
        assert!(public.verify("EdDSA", b"input", &signature).is_err());
        assert!(Jwk::parse(&json!({"kty": "oct", "k": "c2VjcmV0"})).is_err());
    }
}
