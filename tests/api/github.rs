//! A local stand-in for GitHub: the OAuth app's web flow (`/login/oauth/authorize`, approving
//! at once as the person the test names, and `/login/oauth/access_token` checking the client
//! secret, the code, the redirect URI and the PKCE verifier), the device flow
//! (`/login/device/code`, pending for one poll), and the REST API's `/user` and
//! `/user/memberships/orgs`. Failed token requests answer `200 OK` with an `error` field, as
//! GitHub does.
//!
//! Shared by the API suite and the process tests (`#[path]`), so it stands alone.
#![allow(dead_code)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Form, Json, Router};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

pub const CLIENT_ID: &str = "gh-client-id";
pub const CLIENT_SECRET: &str = "gh-client-secret";

/// A GitHub account: login, numeric id, and organisations (`(login, id, state)`).
#[derive(Clone, Debug)]
pub struct Account {
    pub login: String,
    pub id: u64,
    pub orgs: Vec<(String, u64, &'static str)>,
}

impl Account {
    pub fn new(login: &str, id: u64, orgs: &[(&str, u64, &'static str)]) -> Self {
        Self {
            login: login.to_owned(),
            id,
            orgs: orgs
                .iter()
                .map(|(name, id, state)| ((*name).to_owned(), *id, *state))
                .collect(),
        }
    }
}

struct Grant {
    account: Account,
    challenge: String,
    redirect_uri: String,
}

#[derive(Default)]
struct Shared {
    /// Who approves the next authorization or device code.
    signing_in: Mutex<Option<Account>>,
    codes: Mutex<HashMap<String, Grant>>,
    tokens: Mutex<HashMap<String, Account>>,
    /// Device codes and how many polls they stay pending.
    devices: Mutex<HashMap<String, (Account, u32)>>,
    counter: Mutex<u64>,
}

impl Shared {
    fn next(&self, prefix: &str) -> String {
        let mut counter = self.counter.lock().expect("counter");
        *counter += 1;
        format!("{prefix}{counter}")
    }

    fn issue_token(&self, account: Account) -> Value {
        let token = self.next("gho_");
        self.tokens
            .lock()
            .expect("tokens")
            .insert(token.clone(), account);
        json!({"access_token": token, "token_type": "bearer", "scope": "read:org,read:user"})
    }
}

#[derive(Clone)]
pub struct FakeGithub {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
}

impl FakeGithub {
    pub async fn start() -> Self {
        let shared = Arc::new(Shared::default());
        let router = Router::new()
            .route("/login/oauth/authorize", get(authorize))
            .route("/login/oauth/access_token", post(access_token))
            .route("/login/device/code", post(device_code))
            .route("/api/user", get(user))
            .route("/api/user/memberships/orgs", get(memberships))
            .with_state(Arc::clone(&shared));
        let listener = tokio::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))
            .await
            .expect("bind a loopback port");
        let addr = listener.local_addr().expect("address");
        tokio::spawn(async move {
            axum::serve(listener, router).await.expect("serve");
        });
        Self { addr, shared }
    }

    /// The web root (`--github-url`).
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// The API root (`--github-api-url`).
    pub fn api_url(&self) -> String {
        format!("http://{}/api/", self.addr)
    }

    /// From now on `account` approves whatever is asked.
    pub fn sign_in_as(&self, account: Account) {
        *self.shared.signing_in.lock().expect("account") = Some(account);
    }

    /// An access token of `account`, as a finished OAuth flow would give.
    pub fn token_for(&self, account: Account) -> String {
        self.shared.issue_token(account)["access_token"]
            .as_str()
            .expect("token")
            .to_owned()
    }
}

fn oauth_error(error: &str, description: &str) -> Response {
    Json(json!({"error": error, "error_description": description})).into_response()
}

async fn authorize(
    State(shared): State<Arc<Shared>>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let field = |name: &str| query.get(name).cloned().unwrap_or_default();
    if field("client_id") != CLIENT_ID || field("code_challenge_method") != "S256" {
        return (StatusCode::BAD_REQUEST, "bad client or no PKCE").into_response();
    }
    let Some(account) = shared.signing_in.lock().expect("account").clone() else {
        return (StatusCode::FORBIDDEN, "nobody signs in").into_response();
    };
    let code = shared.next("code-");
    shared.codes.lock().expect("codes").insert(
        code.clone(),
        Grant {
            account,
            challenge: field("code_challenge"),
            redirect_uri: field("redirect_uri"),
        },
    );
    let location = format!(
        "{}?{}",
        field("redirect_uri"),
        serde_urlencoded::to_string([("code", code.as_str()), ("state", &field("state"))])
            .expect("query")
    );
    (StatusCode::FOUND, [(header::LOCATION, location)]).into_response()
}

async fn access_token(
    State(shared): State<Arc<Shared>>,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    let field = |name: &str| form.get(name).cloned().unwrap_or_default();
    if field("client_id") != CLIENT_ID {
        return oauth_error("incorrect_client_credentials", "unknown client");
    }
    if field("grant_type") == "urn:ietf:params:oauth:grant-type:device_code" {
        let mut devices = shared.devices.lock().expect("devices");
        let Some((account, pending)) = devices.get_mut(&field("device_code")) else {
            return oauth_error("expired_token", "unknown device code");
        };
        if *pending > 0 {
            *pending -= 1;
            return oauth_error("authorization_pending", "waiting for the person");
        }
        let account = account.clone();
        devices.remove(&field("device_code"));
        return Json(shared.issue_token(account)).into_response();
    }
    if field("client_secret") != CLIENT_SECRET {
        return oauth_error("incorrect_client_credentials", "bad secret");
    }
    let Some(grant) = shared.codes.lock().expect("codes").remove(&field("code")) else {
        return oauth_error(
            "bad_verification_code",
            "The code passed is incorrect or expired.",
        );
    };
    let verifier_hash = URL_SAFE_NO_PAD.encode(Sha256::digest(field("code_verifier").as_bytes()));
    if verifier_hash != grant.challenge {
        return oauth_error("bad_verification_code", "PKCE verification failed");
    }
    if field("redirect_uri") != grant.redirect_uri {
        return oauth_error("redirect_uri_mismatch", "redirect_uri differs");
    }
    Json(shared.issue_token(grant.account)).into_response()
}

async fn device_code(
    State(shared): State<Arc<Shared>>,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    if form.get("client_id").map(String::as_str) != Some(CLIENT_ID) {
        return (StatusCode::UNAUTHORIZED, "unknown client").into_response();
    }
    let Some(account) = shared.signing_in.lock().expect("account").clone() else {
        return (StatusCode::FORBIDDEN, "nobody signs in").into_response();
    };
    let device_code = shared.next("device-");
    shared
        .devices
        .lock()
        .expect("devices")
        .insert(device_code.clone(), (account, 1));
    Json(json!({
        "device_code": device_code,
        "user_code": "WDJB-MJHT",
        "verification_uri": "https://github.com/login/device",
        "expires_in": 900,
        "interval": 1,
    }))
    .into_response()
}

fn account_of(shared: &Shared, headers: &HeaderMap) -> Option<Account> {
    let token = headers
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")?;
    shared.tokens.lock().expect("tokens").get(token).cloned()
}

async fn user(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    match account_of(&shared, &headers) {
        Some(account) => Json(json!({
            "login": account.login,
            "id": account.id,
            "type": "User",
            "name": "The Octocat",
        }))
        .into_response(),
        None => (
            StatusCode::UNAUTHORIZED,
            Json(json!({"message": "Bad credentials", "status": "401"})),
        )
            .into_response(),
    }
}

async fn memberships(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    let Some(account) = account_of(&shared, &headers) else {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({"message": "Bad credentials"})),
        )
            .into_response();
    };
    let all: Vec<Value> = account
        .orgs
        .iter()
        .map(|(login, id, state)| {
            json!({
                "state": state,
                "role": "member",
                "organization": {"login": login, "id": id},
                "user": {"login": account.login, "id": account.id},
            })
        })
        .collect();
    Json(all).into_response()
}
