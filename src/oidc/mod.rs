//! Trusted publishing: verify an OIDC ID token from a CI system the operator trusts (GitHub
//! Actions, GitLab CI, another issuer) against that issuer's published keys.
//!
//! The rules: the token is a JWT signed with RS256 or ES256 (`none`, HMAC and every other
//! algorithm are refused, and so is a key whose type does not match the algorithm); its `iss`
//! is exactly a configured issuer; its `aud` is exactly the registry's public URL; `exp`, `nbf`
//! and `iat` hold with at most 60 s of leeway. The issuer's keys come from the `jwks_uri` of
//! its `/.well-known/openid-configuration`, fetched through the outbound client with the policy
//! of the operator's configured APIs, and cached: refreshed after an hour, and fetched again
//! when a token names a key the cache does not hold (at most once per 30 s per issuer), so a
//! rotated key verifies without a restart while a storm of made-up key ids costs nothing.
//!
//! Every refusal is an [`ApiError::invalid_token`] (401 with the reason in the body and in
//! `WWW-Authenticate`), except an issuer whose keys cannot be fetched (502). Tokens are never
//! logged.

use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm};
use jsonwebtoken::{Algorithm, DecodingKey, Validation, errors::ErrorKind};
use serde_json::{Map, Value};
use url::Url;

use crate::domain::trusted_issuer::{IssuerKind, TrustedIssuer};
use crate::error::{ApiError, ErrorCode};
use crate::outbound::{Fetch, JSON, Outbound};

/// Clock skew tolerated on `exp`, `nbf` and `iat`.
pub const LEEWAY_SECS: u64 = 60;
/// Longest ID token read (GitHub's are about 1.5 KB).
const MAX_TOKEN_BYTES: usize = 16 * 1024;
/// Largest discovery document and key set read.
const MAX_DISCOVERY_BYTES: usize = 64 * 1024;
const MAX_JWKS_BYTES: usize = 256 * 1024;
/// Keys are fetched again after this long even when every token finds its key.
const KEYS_MAX_AGE: Duration = Duration::from_secs(3600);
/// Fetches beyond the first and the hourly refresh (a token naming an unknown key, a failed
/// fetch retried): at most one per issuer this often.
pub const REFETCH_INTERVAL: Duration = Duration::from_secs(30);

/// A verified ID token: the issuer it came from and its claims.
#[derive(Debug)]
pub struct Verified<'a> {
    pub issuer: &'a TrustedIssuer,
    pub claims: Map<String, Value>,
}

/// The configured issuers with their cached keys, and the audience tokens must name.
pub struct TrustedPublishing {
    issuers: Vec<Issuer>,
    audience: String,
    outbound: Arc<Outbound>,
}

struct Issuer {
    trusted: TrustedIssuer,
    keys: tokio::sync::Mutex<Keys>,
}

/// An issuer's key cache.
#[derive(Default)]
struct Keys {
    set: Option<Vec<Jwk>>,
    /// When `set` was last fetched successfully.
    fetched_at: Option<Instant>,
    /// When a fetch that counts against `REFETCH_INTERVAL` last started.
    refetched_at: Option<Instant>,
}

impl Keys {
    fn find(&self, kid: &str) -> Option<&Jwk> {
        self.set
            .as_deref()?
            .iter()
            .find(|jwk| jwk.common.key_id.as_deref() == Some(kid))
    }

    fn may_refetch(&self, now: Instant) -> bool {
        self.refetched_at
            .is_none_or(|at| now.duration_since(at) >= REFETCH_INTERVAL)
    }
}

impl TrustedPublishing {
    /// `audience`: the registry's public URL (`Config::base_url`). `outbound`: a client with the
    /// configured APIs' address policy (the operator chose these issuers).
    ///
    /// At most one issuer of each kind but `generic`: two GitHub (or GitLab) issuers would
    /// grant the same namespaces (`io.github.acme`) to different identities.
    pub fn new(
        issuers: &[TrustedIssuer],
        audience: &str,
        outbound: Arc<Outbound>,
    ) -> anyhow::Result<Self> {
        for (i, issuer) in issuers.iter().enumerate() {
            if issuer.kind != IssuerKind::Generic
                && issuers[..i].iter().any(|other| other.kind == issuer.kind)
            {
                anyhow::bail!(
                    "--trusted-issuer: more than one '{}' issuer; their namespaces would be the same",
                    issuer.kind.as_str()
                );
            }
            if issuers[..i]
                .iter()
                .any(|other| other.issuer == issuer.issuer)
            {
                anyhow::bail!("--trusted-issuer: '{}' is listed twice", issuer.issuer);
            }
        }
        Ok(Self {
            issuers: issuers
                .iter()
                .map(|trusted| Issuer {
                    trusted: trusted.clone(),
                    keys: tokio::sync::Mutex::new(Keys::default()),
                })
                .collect(),
            audience: audience.to_owned(),
            outbound,
        })
    }

    /// Whether any issuer is trusted.
    pub fn is_enabled(&self) -> bool {
        !self.issuers.is_empty()
    }

    /// The audience ID tokens must name.
    pub fn audience(&self) -> &str {
        &self.audience
    }

    /// Verify `token`; every refusal says why.
    pub async fn verify(&self, token: &str) -> Result<Verified<'_>, ApiError> {
        let token = token.trim();
        if token.is_empty() || token.len() > MAX_TOKEN_BYTES {
            return Err(ApiError::invalid_token(format!(
                "the ID token must be 1 to {MAX_TOKEN_BYTES} bytes"
            )));
        }
        let (header, payload) = peek(token)?;
        let algorithm = algorithm(&header)?;
        let iss = match payload.get("iss") {
            Some(Value::String(iss)) => iss.as_str(),
            _ => {
                return Err(ApiError::invalid_token(
                    "the ID token names no issuer (iss)",
                ));
            }
        };
        let issuer = self
            .issuers
            .iter()
            .find(|issuer| issuer.trusted.issuer == iss)
            .ok_or_else(|| {
                ApiError::invalid_token(format!(
                    "the issuer '{}' is not trusted by this registry",
                    crate::domain::truncate(iss, 100)
                ))
            })?;
        let kid = match header.get("kid") {
            Some(Value::String(kid)) if !kid.is_empty() => kid.as_str(),
            _ => return Err(ApiError::invalid_token("the ID token names no key (kid)")),
        };
        let jwk = self.key(issuer, kid).await?;
        let key = decoding_key(&jwk, algorithm, kid)?;

        let mut validation = Validation::new(algorithm);
        validation.leeway = LEEWAY_SECS;
        validation.validate_exp = true;
        validation.validate_nbf = true;
        validation.set_issuer(&[issuer.trusted.issuer.as_str()]);
        validation.set_audience(&[self.audience.as_str()]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        let claims = jsonwebtoken::decode::<Map<String, Value>>(token, &key, &validation)
            .map_err(|err| refusal(err.kind(), &self.audience))?
            .claims;
        // Exactly this audience: one string, or a list of just it.
        let audience_alone = match claims.get("aud") {
            Some(Value::String(aud)) => aud == &self.audience,
            Some(Value::Array(all)) => all.len() == 1 && all[0] == self.audience.as_str(),
            _ => false,
        };
        if !audience_alone {
            return Err(ApiError::invalid_token(format!(
                "the ID token's audience (aud) must be exactly '{}'",
                self.audience
            )));
        }
        check_issued_at(&claims)?;
        Ok(Verified {
            issuer: &issuer.trusted,
            claims,
        })
    }

    /// Key `kid` of `issuer`, from the cache or fetched (see the module's rules).
    async fn key(&self, issuer: &Issuer, kid: &str) -> Result<Jwk, ApiError> {
        let mut keys = issuer.keys.lock().await;
        let now = Instant::now();
        let mut fetched = false;
        let stale = keys
            .fetched_at
            .is_none_or(|at| now.duration_since(at) >= KEYS_MAX_AGE);
        // The first fetch is free; a refresh or a retry after a failure counts.
        let first = keys.set.is_none() && keys.refetched_at.is_none();
        if stale && (first || keys.may_refetch(now)) {
            if !first {
                keys.refetched_at = Some(now);
            }
            fetched = true;
            match self.fetch_keys(&issuer.trusted).await {
                Ok(set) => {
                    keys.set = Some(set);
                    keys.fetched_at = Some(now);
                }
                Err(err) => {
                    keys.refetched_at = Some(now);
                    if keys.set.is_none() {
                        return Err(err);
                    }
                    tracing::warn!(issuer = %issuer.trusted.issuer, error = %err,
                        "cannot refresh a trusted issuer's keys; keeping the ones it had");
                }
            }
        }
        if keys.set.is_none() {
            return Err(unavailable(
                &issuer.trusted,
                "its keys could not be fetched; retry shortly",
            ));
        }
        if let Some(jwk) = keys.find(kid) {
            return Ok(jwk.clone());
        }
        if !fetched && keys.may_refetch(now) {
            keys.refetched_at = Some(now);
            match self.fetch_keys(&issuer.trusted).await {
                Ok(set) => {
                    keys.set = Some(set);
                    keys.fetched_at = Some(now);
                    if let Some(jwk) = keys.find(kid) {
                        tracing::info!(issuer = %issuer.trusted.issuer, kid,
                            "a trusted issuer's keys were fetched again for a new key");
                        return Ok(jwk.clone());
                    }
                }
                Err(err) => {
                    tracing::warn!(issuer = %issuer.trusted.issuer, error = %err,
                        "cannot fetch a trusted issuer's keys again");
                }
            }
        }
        Err(ApiError::invalid_token(format!(
            "the issuer '{}' has no key '{}'",
            issuer.trusted.issuer,
            crate::domain::truncate(kid, 100)
        )))
    }

    /// The issuer's keys: its discovery document's `jwks_uri`, read key by key (a key of a kind
    /// this registry does not read is skipped, not fatal to the others).
    async fn fetch_keys(&self, issuer: &TrustedIssuer) -> Result<Vec<Jwk>, ApiError> {
        let discovery_url = Url::parse(&issuer.discovery_url())
            .map_err(|err| unavailable(issuer, &format!("bad discovery URL: {err}")))?;
        let discovery = self
            .get_json(issuer, discovery_url, MAX_DISCOVERY_BYTES)
            .await?;
        if discovery.get("issuer").and_then(Value::as_str) != Some(issuer.issuer.as_str()) {
            return Err(unavailable(
                issuer,
                "its discovery document names another issuer",
            ));
        }
        let jwks_uri = discovery
            .get("jwks_uri")
            .and_then(Value::as_str)
            .and_then(|uri| Url::parse(uri).ok())
            .ok_or_else(|| unavailable(issuer, "its discovery document has no jwks_uri"))?;
        let issuer_is_https = issuer.issuer.starts_with("https:");
        if jwks_uri.scheme() != "https" && (issuer_is_https || jwks_uri.scheme() != "http") {
            return Err(unavailable(issuer, "its jwks_uri is not an https URL"));
        }
        let set = self.get_json(issuer, jwks_uri, MAX_JWKS_BYTES).await?;
        let Some(listed) = set.get("keys").and_then(Value::as_array) else {
            return Err(unavailable(issuer, "its key set has no keys array"));
        };
        let keys: Vec<Jwk> = listed
            .iter()
            .filter_map(|key| serde_json::from_value(key.clone()).ok())
            .collect();
        tracing::info!(issuer = %issuer.issuer, keys = keys.len(), "fetched a trusted issuer's keys");
        Ok(keys)
    }

    async fn get_json(
        &self,
        issuer: &TrustedIssuer,
        url: Url,
        max_bytes: usize,
    ) -> Result<Value, ApiError> {
        let fetched = self
            .outbound
            .get(&Fetch::get(url.clone(), JSON, max_bytes))
            .await
            .map_err(|err| unavailable(issuer, &err.to_string()))?;
        if !fetched.status.is_success() {
            return Err(unavailable(
                issuer,
                &format!("{url} answered {}", fetched.status.as_u16()),
            ));
        }
        fetched
            .json::<Value>()
            .ok()
            .filter(Value::is_object)
            .ok_or_else(|| unavailable(issuer, &format!("{url} did not send a JSON object")))
    }
}

/// 502 `upstream_error`: the issuer's keys cannot be had (not the token's fault).
fn unavailable(issuer: &TrustedIssuer, why: &str) -> ApiError {
    ApiError::new(
        ErrorCode::UpstreamError,
        format!(
            "cannot verify tokens of issuer '{}': {}",
            issuer.issuer,
            crate::domain::truncate(why, 300)
        ),
    )
}

/// A JSON object: a token's header or claims.
type Claims = Map<String, Value>;

/// The header and payload of a compact JWS, read without verifying anything: only to pick the
/// issuer and key that will verify it.
fn peek(token: &str) -> Result<(Claims, Claims), ApiError> {
    let garbled = || {
        ApiError::invalid_token("the ID token is not a JWT (three base64url parts, JSON inside)")
    };
    let mut parts = token.split('.');
    let (Some(header), Some(payload), Some(_signature), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(garbled());
    };
    let json = |part: &str| -> Option<Map<String, Value>> {
        let bytes = URL_SAFE_NO_PAD.decode(part).ok()?;
        match serde_json::from_slice(&bytes).ok()? {
            Value::Object(object) => Some(object),
            _ => None,
        }
    };
    Ok((
        json(header).ok_or_else(garbled)?,
        json(payload).ok_or_else(garbled)?,
    ))
}

/// RS256 or ES256, from the header's `alg`; anything else is refused, saying what it was.
fn algorithm(header: &Map<String, Value>) -> Result<Algorithm, ApiError> {
    let alg = header.get("alg").and_then(Value::as_str).unwrap_or("");
    match alg {
        "RS256" => Ok(Algorithm::RS256),
        "ES256" => Ok(Algorithm::ES256),
        "" => Err(ApiError::invalid_token(
            "the ID token names no algorithm (alg)",
        )),
        _ if alg.eq_ignore_ascii_case("none") => Err(ApiError::invalid_token(
            "unsigned ID tokens (alg none) are not accepted; RS256 or ES256 only",
        )),
        _ if alg.to_ascii_uppercase().starts_with("HS") => Err(ApiError::invalid_token(format!(
            "HMAC-signed ID tokens ({}) are not accepted; RS256 or ES256 only",
            crate::domain::truncate(alg, 20)
        ))),
        _ => Err(ApiError::invalid_token(format!(
            "the algorithm '{}' is not accepted; RS256 or ES256 only",
            crate::domain::truncate(alg, 20)
        ))),
    }
}

/// The key to verify with, when `jwk` is one for `algorithm`: RSA for RS256, P-256 for ES256,
/// and, when the key names an algorithm or a use, that one and `sig`.
fn decoding_key(jwk: &Jwk, algorithm: Algorithm, kid: &str) -> Result<DecodingKey, ApiError> {
    let mismatch = |what: &str| {
        ApiError::invalid_token(format!(
            "the issuer's key '{}' is {what}, not a key for {algorithm:?}",
            crate::domain::truncate(kid, 100)
        ))
    };
    match (&jwk.algorithm, algorithm) {
        (AlgorithmParameters::RSA(_), Algorithm::RS256) => {}
        (AlgorithmParameters::EllipticCurve(ec), Algorithm::ES256)
            if ec.curve == EllipticCurve::P256 => {}
        (AlgorithmParameters::EllipticCurve(_), _) => return Err(mismatch("an EC key")),
        (AlgorithmParameters::RSA(_), _) => return Err(mismatch("an RSA key")),
        _ => return Err(mismatch("of another type")),
    }
    let named = match jwk.common.key_algorithm {
        None => None,
        Some(KeyAlgorithm::RS256) => Some(Algorithm::RS256),
        Some(KeyAlgorithm::ES256) => Some(Algorithm::ES256),
        Some(_) => return Err(mismatch("for another algorithm")),
    };
    if named.is_some_and(|named| named != algorithm) {
        return Err(mismatch("for another algorithm"));
    }
    if jwk
        .common
        .public_key_use
        .as_ref()
        .is_some_and(|usage| *usage != jsonwebtoken::jwk::PublicKeyUse::Signature)
    {
        return Err(mismatch("not a signing key"));
    }
    DecodingKey::from_jwk(jwk).map_err(|_| mismatch("unreadable"))
}

/// Why `jsonwebtoken` refused a token, for its caller.
fn refusal(kind: &ErrorKind, audience: &str) -> ApiError {
    let reason = match kind {
        ErrorKind::ExpiredSignature => "the ID token has expired (exp)".to_owned(),
        ErrorKind::ImmatureSignature => "the ID token is not valid yet (nbf)".to_owned(),
        ErrorKind::InvalidIssuer => "the ID token's issuer (iss) is not trusted".to_owned(),
        ErrorKind::InvalidAudience => {
            format!("the ID token's audience (aud) must be exactly '{audience}'")
        }
        ErrorKind::InvalidSignature => "the ID token's signature does not verify".to_owned(),
        ErrorKind::InvalidAlgorithm => {
            "the ID token's algorithm does not match its issuer's key".to_owned()
        }
        ErrorKind::MissingRequiredClaim(claim) => {
            format!("the ID token has no '{claim}' claim")
        }
        _ => "the ID token is malformed".to_owned(),
    };
    ApiError::invalid_token(reason)
}

/// `iat` is required, and not in the future beyond the leeway.
fn check_issued_at(claims: &Map<String, Value>) -> Result<(), ApiError> {
    let Some(iat) = claims.get("iat").and_then(Value::as_f64) else {
        return Err(ApiError::invalid_token(
            "the ID token has no issue time (iat)",
        ));
    };
    let now = crate::timestamp::Timestamp::now().micros() as f64 / 1e6;
    if iat > now + LEEWAY_SECS as f64 {
        return Err(ApiError::invalid_token(
            "the ID token was issued in the future (iat)",
        ));
    }
    Ok(())
}

/// At most `EXCHANGES_PER_MINUTE` tokens minted per namespace, so a looping job cannot fill the
/// token table.
pub struct ExchangeLimit {
    limiter: governor::DefaultKeyedRateLimiter<String>,
}

/// Exchanges one namespace may make per minute (and in a burst).
pub const EXCHANGES_PER_MINUTE: u32 = 30;

impl Default for ExchangeLimit {
    fn default() -> Self {
        let quota = governor::Quota::per_minute(
            std::num::NonZeroU32::new(EXCHANGES_PER_MINUTE).unwrap_or(std::num::NonZeroU32::MIN),
        );
        Self {
            limiter: governor::RateLimiter::keyed(quota),
        }
    }
}

impl ExchangeLimit {
    /// 429 `rate_limited` with the seconds to wait when `namespace` is over its limit.
    pub fn check(&self, namespace: &str) -> Result<(), ApiError> {
        use governor::clock::{Clock, DefaultClock};
        self.limiter
            .check_key(&namespace.to_owned())
            .map_err(|not_until| {
                let wait = not_until
                    .wait_time_from(DefaultClock::default().now())
                    .as_secs()
                    .max(1);
                let mut error = ApiError::new(
                    ErrorCode::RateLimited,
                    format!(
                        "too many tokens minted for '{namespace}'; at most {EXCHANGES_PER_MINUTE} a minute; retry in {wait} s"
                    ),
                );
                error.retry_after_secs = Some(wait);
                error
            })
    }

    /// Forget namespaces whose buckets are full again, every minute while the limit lives.
    pub fn prune_periodically(limit: &Arc<Self>) {
        crate::middleware::prune_every_minute(limit, |limit| Some(&limit.limiter));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn encoded(value: Value) -> String {
        URL_SAFE_NO_PAD.encode(value.to_string())
    }

    #[test]
    fn only_rs256_and_es256_are_accepted() {
        let alg = |name: &str| {
            let header = json!({"alg": name})
                .as_object()
                .cloned()
                .unwrap_or_default();
            algorithm(&header).map_err(|err| err.detail)
        };
        assert_eq!(alg("RS256").ok(), Some(Algorithm::RS256));
        assert_eq!(alg("ES256").ok(), Some(Algorithm::ES256));
        assert!(alg("none").expect_err("refused").contains("alg none"));
        assert!(alg("HS256").expect_err("refused").contains("HMAC"));
        assert!(alg("RS512").expect_err("refused").contains("not accepted"));
        assert!(alg("").expect_err("refused").contains("no algorithm"));
    }

    #[test]
    fn two_issuers_of_one_kind_would_share_namespaces_and_are_refused() {
        let outbound = Arc::new(
            Outbound::new(crate::outbound::OutboundSettings::for_configured_apis(
                &crate::config::Config::with_data_dir("data").upstreams,
                "http://registry.test",
            ))
            .expect("outbound"),
        );
        let issuers = |list: &[&str]| -> Vec<TrustedIssuer> {
            list.iter()
                .map(|text| TrustedIssuer::parse(text).expect("issuer"))
                .collect()
        };
        let build = |list: &[&str]| {
            TrustedPublishing::new(
                &issuers(list),
                "http://registry.test",
                Arc::clone(&outbound),
            )
        };
        assert!(build(&["github=https://a.example", "gitlab=https://b.example"]).is_ok());
        assert!(build(&["generic=https://a.example", "generic=https://b.example"]).is_ok());
        assert!(build(&["github=https://a.example", "github=https://b.example"]).is_err());
        assert!(build(&["generic=https://a.example", "gitlab=https://a.example"]).is_err());
        assert!(!build(&[]).expect("none").is_enabled());
    }

    #[test]
    fn a_token_is_three_base64url_parts_of_json() {
        let good = format!(
            "{}.{}.sig",
            encoded(json!({"alg": "ES256"})),
            encoded(json!({"iss": "x"}))
        );
        assert!(peek(&good).is_ok());
        for bad in [
            "abc",
            "a.b",
            "a.b.c.d",
            &format!("{}.notbase64!.x", encoded(json!({}))),
            &format!("{}.{}.x", encoded(json!([1])), encoded(json!({}))),
        ] {
            let err = peek(bad).expect_err(bad);
            assert_eq!(err.code, ErrorCode::Unauthorized);
            assert!(err.invalid_token.is_some());
        }
    }
}
