//! A local stand-in for a CI system's OIDC token issuer (GitHub Actions, GitLab): an HTTP server
//! on 127.0.0.1 serving `/.well-known/openid-configuration` and a key set the test chooses, and
//! signing ID tokens with keys the test makes (ECDSA P-256 with ring; one RSA key made for these
//! tests only), counting how often its keys are fetched.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use serde_json::{Value, json};

/// The audience every test app accepts: its public URL (`TestApp` sets `http://registry.test`).
pub const AUDIENCE: &str = "http://registry.test";

#[derive(Default)]
struct Shared {
    issuer: Mutex<String>,
    keys: Mutex<Vec<Value>>,
    jwks_hits: AtomicUsize,
    job: Mutex<Option<ActionsJob>>,
}

/// A GitHub Actions job whose ID tokens the issuer hands out at `/actions/id-token`.
struct ActionsJob {
    key: SigningKey,
    owner: String,
    request_token: String,
}

/// The request token of the job `FakeIssuer::run_job` starts.
pub const REQUEST_TOKEN: &str = "actions-request-token";

/// A running issuer; dropped with the test's runtime.
#[derive(Clone)]
pub struct FakeIssuer {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
}

impl FakeIssuer {
    /// An issuer at `http://127.0.0.1:port`, publishing `keys`.
    pub async fn start(keys: &[&SigningKey]) -> Self {
        let shared = Arc::new(Shared::default());
        let router = Router::new()
            .route("/.well-known/openid-configuration", get(discovery))
            .route("/.well-known/jwks", get(jwks))
            .route("/actions/id-token", get(actions_id_token))
            .with_state(Arc::clone(&shared));
        let addr = crate::helpers::serve_router(router).await;
        let issuer = Self { addr, shared };
        *issuer.shared.issuer.lock().expect("issuer") = issuer.url();
        issuer.publish(keys);
        issuer
    }

    /// Its issuer identifier, `http://127.0.0.1:port` (what its tokens' `iss` say).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// From now on publish exactly `keys` (a rotation).
    pub fn publish(&self, keys: &[&SigningKey]) {
        *self.shared.keys.lock().expect("keys") = keys.iter().map(|key| key.jwk()).collect();
    }

    /// Publish these JWKs as they are.
    pub fn publish_raw(&self, keys: Vec<Value>) {
        *self.shared.keys.lock().expect("keys") = keys;
    }

    /// Act as the token service of an Actions job of `owner`'s: its ID tokens are signed with
    /// `key`, for the audience asked. The job's `ACTIONS_ID_TOKEN_REQUEST_URL`.
    pub fn run_job(&self, key: &SigningKey, owner: &str) -> String {
        *self.shared.job.lock().expect("job") = Some(ActionsJob {
            key: key.clone(),
            owner: owner.to_owned(),
            request_token: REQUEST_TOKEN.to_owned(),
        });
        format!("{}/actions/id-token?api-version=2.0", self.url())
    }

    /// How many times the key set was fetched.
    pub fn jwks_hits(&self) -> usize {
        self.shared.jwks_hits.load(Ordering::SeqCst)
    }

    /// GitHub Actions claims for a run of `owner`'s repository `weather`, valid now, for the
    /// test registry's audience.
    pub fn github_claims(&self, owner: &str) -> Value {
        github_claims(&self.url(), AUDIENCE, owner)
    }
}

async fn discovery(State(shared): State<Arc<Shared>>) -> Json<Value> {
    let issuer = shared.issuer.lock().expect("issuer").clone();
    Json(json!({
        "issuer": issuer,
        "jwks_uri": format!("{issuer}/.well-known/jwks"),
        "subject_types_supported": ["public", "pairwise"],
        "response_types_supported": ["id_token"],
        "id_token_signing_alg_values_supported": ["RS256"],
    }))
}

/// The Actions token service: with the job's request token, an ID token for `audience`.
async fn actions_id_token(
    State(shared): State<Arc<Shared>>,
    axum::extract::Query(query): axum::extract::Query<std::collections::HashMap<String, String>>,
    headers: axum::http::HeaderMap,
) -> Result<Json<Value>, axum::http::StatusCode> {
    let issuer = shared.issuer.lock().expect("issuer").clone();
    let job = shared.job.lock().expect("job");
    let job = job.as_ref().ok_or(axum::http::StatusCode::NOT_FOUND)?;
    let bearer = format!("Bearer {}", job.request_token);
    if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(bearer.as_str()) {
        return Err(axum::http::StatusCode::UNAUTHORIZED);
    }
    let audience = query
        .get("audience")
        .ok_or(axum::http::StatusCode::BAD_REQUEST)?;
    let claims = github_claims(&issuer, audience, &job.owner);
    Ok(Json(json!({"count": 1, "value": job.key.sign(&claims)})))
}

async fn jwks(State(shared): State<Arc<Shared>>) -> Json<Value> {
    shared.jwks_hits.fetch_add(1, Ordering::SeqCst);
    let keys = shared.keys.lock().expect("keys").clone();
    Json(json!({"keys": keys}))
}

/// GitHub Actions claims from `issuer` for a run of `owner`'s repository `weather`, valid now,
/// for `audience`.
fn github_claims(issuer: &str, audience: &str, owner: &str) -> Value {
    let now = now();
    json!({
        "iss": issuer,
        "aud": audience,
        "sub": format!("repo:{owner}/weather:ref:refs/heads/main"),
        "repository": format!("{owner}/weather"),
        "repository_owner": owner,
        "repository_owner_id": "123",
        "repository_id": "456",
        "workflow_ref": format!("{owner}/weather/.github/workflows/publish.yml@refs/heads/main"),
        "ref": "refs/heads/main",
        "iat": now,
        "nbf": now,
        "exp": now + 300,
    })
}

/// Seconds since the epoch.
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs() as i64
}

/// A key that signs ID tokens, and its public JWK.
#[derive(Clone)]
pub struct SigningKey {
    pub kid: String,
    algorithm: Algorithm,
    der: Vec<u8>,
    jwk: Value,
}

impl SigningKey {
    /// A fresh ECDSA P-256 key (ES256).
    pub fn ec(kid: &str) -> Self {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .expect("generate a P-256 key");
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
            .expect("read the key");
        // An uncompressed point: 0x04, then x and y, 32 bytes each.
        let point = pair.public_key().as_ref();
        Self {
            kid: kid.to_owned(),
            algorithm: Algorithm::ES256,
            der: pkcs8.as_ref().to_vec(),
            jwk: json!({
                "kty": "EC", "crv": "P-256", "use": "sig", "alg": "ES256", "kid": kid,
                "x": URL_SAFE_NO_PAD.encode(&point[1..33]),
                "y": URL_SAFE_NO_PAD.encode(&point[33..65]),
            }),
        }
    }

    /// The RSA key of these tests (RS256): ring makes no RSA keys, so one was made once with
    /// `openssl genrsa 2048` for this file and is used nowhere else.
    pub fn rsa(kid: &str) -> Self {
        Self {
            kid: kid.to_owned(),
            algorithm: Algorithm::RS256,
            der: STANDARD.decode(RSA_PKCS1_DER).expect("the test key"),
            jwk: json!({"kty": "RSA", "use": "sig", "alg": "RS256", "kid": kid, "n": RSA_N, "e": "AQAB"}),
        }
    }

    /// The public JWK.
    pub fn jwk(&self) -> Value {
        self.jwk.clone()
    }

    /// `claims` signed with this key, its `kid` in the header.
    pub fn sign(&self, claims: &Value) -> String {
        self.sign_as(&self.kid, claims)
    }

    /// `claims` signed with this key, naming key `kid`.
    pub fn sign_as(&self, kid: &str, claims: &Value) -> String {
        let mut header = Header::new(self.algorithm);
        header.kid = Some(kid.to_owned());
        let key = match self.algorithm {
            Algorithm::RS256 => EncodingKey::from_rsa_der(&self.der),
            _ => EncodingKey::from_ec_der(&self.der),
        };
        jsonwebtoken::encode(&header, claims, &key).expect("sign")
    }
}

/// `claims` with header `header` and no signature (`alg: none` and the like).
pub fn unsigned(header: &Value, claims: &Value) -> String {
    format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    )
}

/// `claims` signed with HMAC-SHA256 under `secret`, naming key `kid`.
pub fn hmac_signed(kid: &str, secret: &[u8], claims: &Value) -> String {
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some(kid.to_owned());
    jsonwebtoken::encode(&header, claims, &EncodingKey::from_secret(secret)).expect("sign")
}

/// PKCS#1 DER of the tests' RSA key (base64).
const RSA_PKCS1_DER: &str = concat!(
    "MIIEpAIBAAKCAQEAz8KVMUI7pYy1ED5b1eeq3JqzlksmFDrt6kNnUUSmKRD4gIcgtezzDuF8oWyflDrtEMu+d1uH73c5",
    "SZQ57vsJPdMag/sUFxJjLXXO9lsR1a+NtG30dJqHleo5WobeoOWw7ka/1dpfPl4UGUZAzuguTiLX0pm3DKB5Q8uMXQo2",
    "TNVmtZEm5C8O8HE14RhItXCFUA1LPuegpx/I0UvbZwNxY87XEJr5gtqcC2pYbYDM8HZrZA/N9ehX/6ET3qwUTcRxSAgM",
    "0WO2WBZolx880NOPQ0rL+qYvrsTqi1H6XHqsOAVG7dF3gkRv5JT/tzQQDVZWljPGmME7CQHclaOwXqecsQIDAQABAoIB",
    "AAUt9nmWrkPpACskdQfBCNuW0/DkgHR713AlA5bjCpGfb9NM1sJt+hNJwwOHbFOZrKn7H3YTrPaVgqdXW3QG7Jwxp1r8",
    "KiZf1AZVKQ3GzYvjB1FTXs0KTh7Ec52vptEih10aHCrfkOI275Wc0KBa0h/8G2SyfYl2pFxlGWOaauQ7WJaS9HB+O20h",
    "gNg/QdXnTMCungRB/xjJRXADpD0G7mVY1nu82BWyEVKI0qnRhJm33V2ufuyXc3tHubAkguIxEEdnCTPxQ9sUy0oGOHBk",
    "jZfDsWmvl6h3L/FDFfKJnOLV7tl3at1gYP8dnkAuJoOPD1wak3YxaKy9s6wI6x+ViOcCgYEA+Bhkzgcr8YR9GbbRUshf",
    "P6X3O74MxdQWf85JPXv6RyxhT1e7xlyP9+j4Vadtdwd6B1Z3/Uyu/pH1YzvkxyCP45P5Yv0ZZsw2y1OeAybN1zCzBJsu",
    "NN9nBZ9PmQErUabtVj2p7gFO+iaWIRmTgx1Q5YJ2dccpNWKKAfUnEpLfxgcCgYEA1mExM8QSkz2r8Ig+N1SiuLHMXd1l",
    "YQIcqFZulRFKON2XDKnmZkPYZs4pjJcy2yH3oJUwXaYGQHcW0RyIidL8LF9VpzRinTURi6h4xSNC4LmdpBLthFy6GIAM",
    "uzlZmZyRIKKGG6acOEtif6seEQvV1jn5KnBbL3RI2vlymXVUmYcCgYArF1mS6233ghKUf8t1vHXGwVXi24yuY7sQsczI",
    "0BrVd+Di/hMQTg13etB/WBhMP1EzqxImPcZ7UvCzLrj62S4E0jPTvLBHyZqO0FQ2qevAv6WoXCe3aUIkmNojci+K/Bpn",
    "C0jTnQiRrFgRIbccY+AkLPfUVyZSLm5YDrOdp0MUywKBgQDKAh219M24F0X8yrUtuD/5H/k+fc/44F+WtJNRPlCdUxjx",
    "outrdATnot7+Dr+qQ9CubcZ8iGSdvFoww91ZWgmr2k3A2BkQoCAfZKogwYBUeDO2lutfbW0ihw74IStwF1udz+flCFNu",
    "rIJtYRZc47UlP82tkuAp0D6SsLmvJyOH4wKBgQC75CyMqb+pN4NiLySSk5EeHgtwjHMrAZF1iKwQHsZJ+VV7e4x4pCtC",
    "Zq4Up/zBaoS07b5+gR3Os7NqAHD8Y33mc4LRghqhBgpmRb7vzbnUinqHPz7PFVxDleh2n8Od9ekhwUs/pQLqE16AXHt+",
    "dy5JEzdrtK96CiFOLfyZnwx0tg==",
);

/// Its modulus (base64url).
const RSA_N: &str = concat!(
    "z8KVMUI7pYy1ED5b1eeq3JqzlksmFDrt6kNnUUSmKRD4gIcgtezzDuF8oWyflDrtEMu-d1uH73c5SZQ57vsJPdMag_sU",
    "FxJjLXXO9lsR1a-NtG30dJqHleo5WobeoOWw7ka_1dpfPl4UGUZAzuguTiLX0pm3DKB5Q8uMXQo2TNVmtZEm5C8O8HE1",
    "4RhItXCFUA1LPuegpx_I0UvbZwNxY87XEJr5gtqcC2pYbYDM8HZrZA_N9ehX_6ET3qwUTcRxSAgM0WO2WBZolx880NOP",
    "Q0rL-qYvrsTqi1H6XHqsOAVG7dF3gkRv5JT_tzQQDVZWljPGmME7CQHclaOwXqecsQ",
);
