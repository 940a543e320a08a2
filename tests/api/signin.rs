//! Sign-in for people over loopback HTTP: GitHub's web flow (a local fake) ending in a session
//! cookie, what the session may do (publish under the namespaces GitHub grants, mint its own
//! tokens, writes only with the CSRF token, sign out), every refusal of the callback, the
//! CLI's device flow, and the code flow against a real OpenID provider (npm `oidc-provider`,
//! started from tests/oidc).

use std::collections::HashMap;

use agent_registry::config::{Config, NamespacePolicy, OidcProviderSpec};
use axum::http::StatusCode;
use reqwest::header::{COOKIE, LOCATION, SET_COOKIE};
use serde_json::{Value, json};

use crate::github::{Account, CLIENT_ID, CLIENT_SECRET, FakeGithub};
use crate::helpers::{TestApp, agent_body};

/// A browser, as far as these flows need one: a cookie jar per host, no automatic redirects.
struct Browser {
    client: reqwest::Client,
    cookies: HashMap<String, HashMap<String, String>>,
}

/// A response as the browser saw it.
struct Seen {
    status: StatusCode,
    location: Option<String>,
    set_cookies: Vec<String>,
    text: String,
}

impl Browser {
    fn new() -> Self {
        Self {
            client: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .expect("client"),
            cookies: HashMap::new(),
        }
    }

    async fn send(&mut self, request: reqwest::RequestBuilder, host: &str) -> Seen {
        let mut request = request;
        if let Some(jar) = self.cookies.get(host).filter(|jar| !jar.is_empty()) {
            let header: Vec<String> = jar.iter().map(|(k, v)| format!("{k}={v}")).collect();
            request = request.header(COOKIE, header.join("; "));
        }
        let response = request.send().await.expect("the server answers");
        let status = StatusCode::from_u16(response.status().as_u16()).expect("status");
        let location = response
            .headers()
            .get(LOCATION)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        let set_cookies: Vec<String> = response
            .headers()
            .get_all(SET_COOKIE)
            .iter()
            .filter_map(|value| value.to_str().ok().map(str::to_owned))
            .collect();
        let jar = self.cookies.entry(host.to_owned()).or_default();
        for cookie in &set_cookies {
            let pair = cookie.split(';').next().unwrap_or_default();
            if let Some((name, value)) = pair.split_once('=') {
                let expired = cookie.to_ascii_lowercase().contains("max-age=0");
                if value.is_empty() || expired {
                    jar.remove(name.trim());
                } else {
                    jar.insert(name.trim().to_owned(), value.to_owned());
                }
            }
        }
        Seen {
            status,
            location,
            set_cookies,
            text: response.text().await.unwrap_or_default(),
        }
    }

    async fn get(&mut self, url: &str) -> Seen {
        let host = host_of(url);
        let request = self.client.get(url);
        self.send(request, &host).await
    }

    async fn post_form(&mut self, url: &str, form: &[(&str, &str)]) -> Seen {
        let host = host_of(url);
        let request = self.client.post(url).form(form);
        self.send(request, &host).await
    }

    /// `GET path` on `app`, with the browser's cookies.
    async fn read(&mut self, app: &TestApp, path: &str) -> (StatusCode, Value) {
        self.api(reqwest::Method::GET, &on_app(app, path), None, None)
            .await
    }

    /// `method path` on `app`, with the cookies, the CSRF token when given, and a JSON body.
    async fn call(
        &mut self,
        app: &TestApp,
        method: reqwest::Method,
        path: &str,
        csrf: Option<&str>,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        self.api(method, &on_app(app, path), csrf, body).await
    }

    /// A JSON call to the registry with its cookies, and the CSRF token when given.
    async fn api(
        &mut self,
        method: reqwest::Method,
        url: &str,
        csrf: Option<&str>,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let host = host_of(url);
        let mut request = self.client.request(method, url);
        if let Some(csrf) = csrf {
            request = request.header("X-CSRF-Token", csrf);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let seen = self.send(request, &host).await;
        (
            seen.status,
            serde_json::from_str(&seen.text).unwrap_or(Value::Null),
        )
    }
}

fn host_of(url: &str) -> String {
    url::Url::parse(url)
        .ok()
        .and_then(|url| {
            url.host_str()
                .map(|host| format!("{host}:{}", url.port_or_known_default().unwrap_or(0)))
        })
        .unwrap_or_default()
}

/// The registry's own address for a URL it redirected to (`http://registry.test/auth/…`).
fn on_app(app: &TestApp, url: &str) -> String {
    let base = app.http.as_deref().expect("served");
    match url.strip_prefix("http://registry.test") {
        Some(path) => format!("{base}{path}"),
        None if url.starts_with('/') => format!("{base}{url}"),
        None => url.to_owned(),
    }
}

/// A served app whose GitHub is `github`, under `policy`.
async fn app_with_github(github: &FakeGithub, policy: NamespacePolicy) -> TestApp {
    let (web, api) = (github.url(), github.api_url());
    TestApp::spawn_with(move |config: &mut Config| {
        config.signin.github_client_id = Some(CLIENT_ID.to_owned());
        config.signin.github_client_secret = Some(CLIENT_SECRET.to_owned());
        config.signin.github_url = web.parse().expect("url");
        config.signin.github_api_url = api.parse().expect("url");
        config.publishing.namespace_policy = policy;
    })
    .await
    .served()
    .await
}

/// Start a GitHub sign-in in `browser`: the callback URL (on the app) GitHub sent it to.
async fn github_round_trip(app: &TestApp, browser: &mut Browser, return_to: &str) -> String {
    let start = browser
        .get(&on_app(
            app,
            &format!("/auth/login?provider=github&return_to={return_to}"),
        ))
        .await;
    assert_eq!(start.status, StatusCode::SEE_OTHER, "{}", start.text);
    let signin_cookie = start
        .set_cookies
        .iter()
        .find(|cookie| cookie.starts_with("ar_signin="))
        .expect("a sign-in cookie");
    for attribute in ["HttpOnly", "SameSite=Lax", "Path=/auth"] {
        assert!(signin_cookie.contains(attribute), "{signin_cookie}");
    }
    let to_github = start.location.expect("a redirect to GitHub");
    assert!(to_github.contains("code_challenge="), "{to_github}");
    assert!(
        to_github.contains("code_challenge_method=S256"),
        "{to_github}"
    );
    assert!(!to_github.contains("client_secret"), "{to_github}");
    let approved = browser.get(&to_github).await;
    assert_eq!(approved.status, StatusCode::FOUND, "{}", approved.text);
    let callback = approved.location.expect("back to the registry");
    assert!(
        callback.starts_with("http://registry.test/auth/callback?"),
        "{callback}"
    );
    on_app(app, &callback)
}

/// Sign in with GitHub as `account`: the browser, holding its session cookie.
async fn signed_in(app: &TestApp, github: &FakeGithub, account: Account) -> Browser {
    github.sign_in_as(account);
    let mut browser = Browser::new();
    let callback = github_round_trip(app, &mut browser, "/console").await;
    let done = browser.get(&callback).await;
    assert_eq!(done.status, StatusCode::SEE_OTHER, "{}", done.text);
    assert_eq!(done.location.as_deref(), Some("/console"));
    browser
}

async fn whoami(app: &TestApp, browser: &mut Browser) -> (StatusCode, Value) {
    browser.read(app, "/api/me").await
}

fn octocat() -> Account {
    Account::new(
        "Octocat",
        583231,
        &[("Acme", 9001, "active"), ("Pending-Org", 9002, "pending")],
    )
}

#[tokio::test]
async fn a_github_sign_in_grants_the_login_and_active_organisations_and_the_session_publishes() {
    let github = FakeGithub::start().await;
    let app = app_with_github(&github, NamespacePolicy::Owned).await;
    github.sign_in_as(octocat());
    let mut browser = Browser::new();
    let callback = github_round_trip(&app, &mut browser, "/agents/x").await;
    let done = browser.get(&callback).await;
    assert_eq!(done.status, StatusCode::SEE_OTHER, "{}", done.text);
    assert_eq!(done.location.as_deref(), Some("/agents/x"));
    let session_cookie = done
        .set_cookies
        .iter()
        .find(|cookie| cookie.starts_with("ar_session="))
        .expect("a session cookie");
    for attribute in ["HttpOnly", "SameSite=Lax", "Path=/", "Max-Age="] {
        assert!(session_cookie.contains(attribute), "{session_cookie}");
    }
    // http://registry.test is not https: no Secure attribute.
    assert!(!session_cookie.contains("Secure"), "{session_cookie}");

    let (status, me) = whoami(&app, &mut browser).await;
    assert_eq!(status, StatusCode::OK, "{me}");
    assert_eq!(me["kind"], "session");
    assert_eq!(me["owner"], "io.github.octocat");
    assert_eq!(
        me["granted_namespaces"],
        json!(["io.github.acme", "io.github.octocat"])
    );
    assert_eq!(me["namespaces"], Value::Null);
    assert_eq!(me["issuer"]["login"], "octocat");
    assert_eq!(me["issuer"]["id"], "583231");
    let csrf = me["csrf_token"].as_str().expect("a CSRF token").to_owned();

    // A write without the CSRF token is refused; with it, the session publishes.
    let publish = "/api/agents/publish";
    let body = agent_body("io.github.acme.weather");
    let (status, refused) = browser
        .call(
            &app,
            reqwest::Method::POST,
            publish,
            None,
            Some(body.clone()),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
    assert!(
        refused["detail"]
            .as_str()
            .unwrap_or("")
            .contains("X-CSRF-Token"),
        "{refused}"
    );
    let (status, wrong) = browser
        .call(
            &app,
            reqwest::Method::POST,
            publish,
            Some("not-the-token"),
            Some(body.clone()),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{wrong}");
    let (status, agent) = browser
        .call(
            &app,
            reqwest::Method::POST,
            publish,
            Some(&csrf),
            Some(body),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{agent}");
    // An organisation's agent belongs to the organisation's namespace.
    assert_eq!(agent["owner"], "io.github.acme");
    let (status, own) = browser
        .call(
            &app,
            reqwest::Method::POST,
            publish,
            Some(&csrf),
            Some(agent_body("io.github.octocat.notes")),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{own}");
    assert_eq!(own["owner"], "io.github.octocat");
    // The console's list holds both: the person's and the organisation's.
    let (status, mine) = browser.read(&app, "/api/agents").await;
    assert_eq!(status, StatusCode::OK, "{mine}");
    let mut listed: Vec<&str> = mine["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .filter_map(|agent| agent["package_name"].as_str())
        .collect();
    listed.sort_unstable();
    assert_eq!(
        listed,
        ["io.github.acme.weather", "io.github.octocat.notes"]
    );
    // A pending membership grants nothing, and neither does a domain not proven.
    for package in ["io.github.pending-org.x", "com.example.x"] {
        let (status, refused) = browser
            .call(
                &app,
                reqwest::Method::POST,
                publish,
                Some(&csrf),
                Some(agent_body(package)),
            )
            .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{package}: {refused}");
        assert_eq!(refused["code"], "namespace_not_owned", "{refused}");
    }
    // The session manages the organisation's agent (go live), reads without CSRF.
    let id = agent["id"].as_str().expect("id");
    let (status, live) = browser
        .call(
            &app,
            reqwest::Method::POST,
            &format!("/api/agents/{id}/go-live"),
            Some(&csrf),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{live}");

    // A token minted by the session is the person's, carries the grants, and publishes.
    let (status, minted) = browser
        .call(
            &app,
            reqwest::Method::POST,
            "/api/tokens",
            Some(&csrf),
            Some(json!({"expires_in_days": 7})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{minted}");
    assert_eq!(minted["owner"], "io.github.octocat");
    let token = minted["token"].as_str().expect("secret");
    let token_me = app.get_as("/api/me", token).await;
    assert_eq!(token_me.body["kind"], "token");
    assert_eq!(token_me.body["namespaces"], Value::Null);
    assert_eq!(
        token_me.body["granted_namespaces"],
        json!(["io.github.acme", "io.github.octocat"])
    );
    let by_token = app
        .try_publish(token, agent_body("io.github.acme.tides"))
        .await;
    assert_eq!(by_token.status, StatusCode::CREATED, "{}", by_token.text);
    // The session may not mint another owner's token, nor an operator's scope.
    for body in [
        json!({"owner": "someone-else"}),
        json!({"scopes": ["mirrors:read"]}),
    ] {
        let (status, refused) = browser
            .call(
                &app,
                reqwest::Method::POST,
                "/api/tokens",
                Some(&csrf),
                Some(body.clone()),
            )
            .await;
        assert_eq!(
            status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{body}: {refused}"
        );
    }
    let (status, listed) = browser.read(&app, "/api/tokens").await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    assert_eq!(
        listed["tokens"].as_array().map(Vec::len),
        Some(1),
        "{listed}"
    );

    // Signing out needs the CSRF token, ends the session and clears the cookie.
    let logout = "/auth/logout";
    let (status, _) = browser
        .call(&app, reqwest::Method::POST, logout, None, None)
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _) = browser
        .call(&app, reqwest::Method::POST, logout, Some(&csrf), None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, after) = whoami(&app, &mut browser).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{after}");
    // The minted token outlives the session.
    assert_eq!(app.get_as("/api/me", token).await.status, StatusCode::OK);
}

#[tokio::test]
async fn a_session_cookie_that_was_signed_out_or_made_up_is_refused() {
    let github = FakeGithub::start().await;
    let app = app_with_github(&github, NamespacePolicy::Open).await;
    let mut browser = signed_in(&app, &github, octocat()).await;
    let secret = browser.cookies[&host_of(&on_app(&app, "/"))]["ar_session"].clone();
    let (_, me_before) = whoami(&app, &mut browser).await;
    let csrf = me_before["csrf_token"].as_str().expect("csrf").to_owned();
    let (status, _) = browser
        .call(
            &app,
            reqwest::Method::POST,
            "/auth/logout",
            Some(&csrf),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    for cookie in [secret.as_str(), "ars_made_up", "ars_%00"] {
        let response = reqwest::Client::new()
            .get(on_app(&app, "/api/me"))
            .header(COOKIE, format!("ar_session={cookie}"))
            .send()
            .await
            .expect("answer");
        assert_eq!(response.status().as_u16(), 401, "{cookie:?}");
    }
    // A bearer token wins over a cookie: the master key is the master key.
    let response = reqwest::Client::new()
        .get(on_app(&app, "/api/me"))
        .header(COOKIE, "ar_session=ars_made_up")
        .bearer_auth(crate::helpers::MASTER_KEY)
        .send()
        .await
        .expect("answer");
    assert_eq!(response.status().as_u16(), 200);
}

/// The console URL a refused callback redirects to, and its reason.
fn refusal(seen: &Seen) -> String {
    assert_eq!(seen.status, StatusCode::SEE_OTHER, "{}", seen.text);
    assert!(
        !seen
            .set_cookies
            .iter()
            .any(|c| c.starts_with("ar_session=") && !c.contains("Max-Age=0")),
        "no session on a refusal: {:?}",
        seen.set_cookies
    );
    let location = seen.location.clone().expect("a redirect");
    let query = location
        .strip_prefix("/console?")
        .unwrap_or_else(|| panic!("back to the console: {location}"));
    let pairs: HashMap<String, String> = serde_urlencoded::from_str(query).expect("query");
    pairs.get("signin_error").cloned().expect("a reason")
}

#[tokio::test]
async fn the_callback_refuses_a_wrong_state_a_missing_cookie_a_replay_and_a_refused_code() {
    let github = FakeGithub::start().await;
    let app = app_with_github(&github, NamespacePolicy::Open).await;
    github.sign_in_as(octocat());

    // The state GitHub sends back must be the one this browser's sign-in made.
    let mut browser = Browser::new();
    let callback = github_round_trip(&app, &mut browser, "/console").await;
    let holder = browser.cookies.clone();
    let forged = callback.replace("state=", "state=x");
    let why = refusal(&browser.get(&forged).await);
    assert!(why.contains("state mismatch"), "{why}");
    // The sign-in was taken by that attempt: even with its cookie, the real answer is refused.
    let mut again = Browser::new();
    again.cookies = holder;
    let why = refusal(&again.get(&callback).await);
    assert!(why.contains("unknown or was already used"), "{why}");

    // Another browser (no sign-in cookie) cannot finish this browser's sign-in.
    let mut browser = Browser::new();
    let callback = github_round_trip(&app, &mut browser, "/console").await;
    let why = refusal(&Browser::new().get(&callback).await);
    assert!(why.contains("no sign-in under way"), "{why}");

    // A replayed callback after success is refused, and the code is not reused.
    let mut browser = Browser::new();
    let callback = github_round_trip(&app, &mut browser, "/console").await;
    let cookie_jar = browser.cookies.clone();
    assert_eq!(browser.get(&callback).await.status, StatusCode::SEE_OTHER);
    let mut replay = Browser::new();
    replay.cookies = cookie_jar;
    let why = refusal(&replay.get(&callback).await);
    assert!(why.contains("unknown or was already used"), "{why}");

    // A code GitHub does not accept (here: used once already by a sign-in this test made
    // by hand) is a refusal that says so, without the code.
    let mut browser = Browser::new();
    let callback = github_round_trip(&app, &mut browser, "/console").await;
    let code = url::Url::parse(&callback)
        .expect("url")
        .query_pairs()
        .find(|(k, _)| k == "code")
        .map(|(_, v)| v.into_owned())
        .expect("code");
    let spent = reqwest::Client::new()
        .post(format!("{}login/oauth/access_token", github.url()))
        .form(&[
            ("client_id", CLIENT_ID),
            ("client_secret", CLIENT_SECRET),
            ("code", &code),
        ])
        .send()
        .await
        .expect("answer");
    assert!(spent.status().is_success());
    let why = refusal(&browser.get(&callback).await);
    assert!(why.contains("refused the code"), "{why}");
    assert!(!why.contains(&code), "{why}");

    // The provider's own refusal (the person said no) comes back as such.
    let why = refusal(
        &Browser::new()
            .get(&on_app(
                &app,
                "/auth/callback?error=access_denied&error_description=The+user+said+no",
            ))
            .await,
    );
    assert!(why.contains("access_denied"), "{why}");
    // No code and no state at all.
    let why = refusal(&Browser::new().get(&on_app(&app, "/auth/callback")).await);
    assert!(why.contains("no code"), "{why}");
}

#[tokio::test]
async fn return_to_never_leaves_the_site_and_unknown_providers_are_refused() {
    let github = FakeGithub::start().await;
    let app = app_with_github(&github, NamespacePolicy::Open).await;
    github.sign_in_as(octocat());
    for hostile in [
        "//evil.example/x",
        "https://evil.example/",
        "/\\evil.example",
        "javascript:alert(1)",
    ] {
        let mut browser = Browser::new();
        let encoded: String = url::form_urlencoded::byte_serialize(hostile.as_bytes()).collect();
        let callback = github_round_trip(&app, &mut browser, &encoded).await;
        let done = browser.get(&callback).await;
        assert_eq!(
            done.status,
            StatusCode::SEE_OTHER,
            "{hostile}: {}",
            done.text
        );
        assert_eq!(done.location.as_deref(), Some("/console"), "{hostile}");
    }
    let unknown = app.get("/auth/login?provider=nope").await;
    unknown.assert_problem(404, "not_found");
    let none = app.get("/auth/login").await;
    none.assert_problem(400, "invalid_parameter");
    app.get("/auth/login?provider=")
        .await
        .assert_problem(404, "not_found");
    let providers = app.get("/api/auth/providers").await;
    assert_eq!(providers.status, StatusCode::OK);
    assert_eq!(providers.body["providers"][0]["name"], "github");
    assert_eq!(providers.body["providers"][0]["client_id"], CLIENT_ID);
}

#[tokio::test]
async fn a_reused_github_login_does_not_inherit_the_first_accounts_owner_name() {
    let github = FakeGithub::start().await;
    let app = app_with_github(&github, NamespacePolicy::Open).await;
    let mut first = signed_in(&app, &github, Account::new("octocat", 1, &[])).await;
    assert_eq!(
        whoami(&app, &mut first).await.1["owner"],
        "io.github.octocat"
    );
    // The first account renamed itself: it keeps its owner name under the new login.
    let mut renamed = signed_in(&app, &github, Account::new("octo-renamed", 1, &[])).await;
    let (_, renamed_me) = whoami(&app, &mut renamed).await;
    assert_eq!(renamed_me["owner"], "io.github.octocat");
    assert_eq!(
        renamed_me["granted_namespaces"],
        json!(["io.github.octo-renamed"])
    );
    // A new account that took the old login is refused rather than handed the owner name.
    github.sign_in_as(Account::new("octocat", 2, &[]));
    let mut browser = Browser::new();
    let callback = github_round_trip(&app, &mut browser, "/console").await;
    let why = refusal(&browser.get(&callback).await);
    assert!(why.contains("belongs to another GitHub account"), "{why}");
}

#[tokio::test]
async fn a_github_access_token_is_exchanged_for_a_person_token_and_bad_ones_are_refused() {
    let github = FakeGithub::start().await;
    let app = app_with_github(&github, NamespacePolicy::Owned).await;
    let access = github.token_for(octocat());
    let minted = app
        .post("/api/auth/github", None, json!({"access_token": access}))
        .await;
    assert_eq!(minted.status, StatusCode::CREATED, "{}", minted.text);
    assert_eq!(minted.body["owner"], "io.github.octocat");
    assert_eq!(
        minted.body["namespaces"],
        json!(["io.github.acme", "io.github.octocat"])
    );
    let token = minted.body["token"].as_str().expect("token");
    let published = app.try_publish(token, agent_body("io.github.acme.x")).await;
    assert_eq!(published.status, StatusCode::CREATED, "{}", published.text);

    let refused = app
        .post(
            "/api/auth/github",
            None,
            json!({"access_token": "gho_not_a_token"}),
        )
        .await;
    refused.assert_problem(401, "unauthorized");
    assert!(
        refused
            .header("www-authenticate")
            .is_some_and(|h| h.contains("invalid_token"))
    );
    for body in [
        json!({}),
        json!({"access_token": 7}),
        json!([]),
        json!({"access_token": " "}),
    ] {
        let bad = app.post("/api/auth/github", None, body.clone()).await;
        bad.assert_problem(422, "validation_failed");
    }
    // Not configured: nothing to exchange with.
    let plain = TestApp::spawn().await;
    let off = plain
        .post("/api/auth/github", None, json!({"access_token": access}))
        .await;
    off.assert_problem(404, "not_found");
    assert_eq!(
        plain.get("/api/auth/providers").await.body["providers"],
        json!([])
    );
}

#[tokio::test]
async fn the_cli_signs_in_with_the_github_device_flow_and_stores_the_token() {
    let github = FakeGithub::start().await;
    let app = app_with_github(&github, NamespacePolicy::Owned).await;
    github.sign_in_as(octocat());
    let home = tempfile::tempdir().expect("home");
    let registry = app.http.clone().expect("served");
    let login = crate::publishing::cli(home.path())
        .args(["login", "--github", "--registry", &registry])
        .output()
        .await
        .expect("run");
    let stderr = String::from_utf8_lossy(&login.stderr);
    let stdout = String::from_utf8_lossy(&login.stdout);
    assert!(login.status.success(), "{stdout}{stderr}");
    assert!(stderr.contains("enter the code WDJB-MJHT"), "{stderr}");
    assert!(stdout.contains("as io.github.octocat"), "{stdout}");
    let whoami = crate::publishing::cli(home.path())
        .args(["whoami", "--registry", &registry])
        .output()
        .await
        .expect("run");
    let me: Value = serde_json::from_slice(&whoami.stdout).expect("JSON");
    assert_eq!(me["owner"], "io.github.octocat");
    assert_eq!(
        me["granted_namespaces"],
        json!(["io.github.acme", "io.github.octocat"])
    );
}

/// A running `oidc-provider` (tests/oidc/provider.mjs), stopped when dropped.
struct OidcProvider {
    child: tokio::process::Child,
    issuer: String,
}

impl Drop for OidcProvider {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// Start the provider, or `None` when its package is not installed and the run does not
/// require it (`scripts/test.sh` installs it and sets `REGISTRY_TEST_OIDC_PROVIDER=required`).
async fn oidc_provider(redirect_uri: &str) -> Option<OidcProvider> {
    use tokio::io::AsyncBufReadExt;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oidc");
    if !dir.join("node_modules/oidc-provider").exists() {
        assert!(
            std::env::var("REGISTRY_TEST_OIDC_PROVIDER").as_deref() != Ok("required"),
            "tests/oidc has no node_modules: run `npm ci --prefix tests/oidc` (scripts/test.sh does)"
        );
        eprintln!("skipped: oidc-provider is not installed (npm ci --prefix tests/oidc)");
        return None;
    }
    let mut child = tokio::process::Command::new("node")
        .arg(dir.join("provider.mjs"))
        .arg(redirect_uri)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("node runs");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let issuer = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(issuer) = line.strip_prefix("ready ") {
                return issuer.to_owned();
            }
        }
        panic!("the provider exited before it was ready")
    })
    .await
    .expect("the provider starts within 30 s");
    // It logs to standard output as it runs: keep reading, or its next line kills it (EPIPE).
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Some(OidcProvider { child, issuer })
}

/// Walk `oidc-provider`'s development login and consent pages as `login`, from the
/// authorization URL to the redirect back to the registry.
async fn through_the_provider(browser: &mut Browser, authorize: &str, login: &str) -> String {
    let mut url = authorize.to_owned();
    for _ in 0..12 {
        let seen = browser.get(&url).await;
        if let Some(location) = seen.location {
            if location.starts_with("http://registry.test/") {
                return location;
            }
            url = url::Url::parse(&url)
                .expect("url")
                .join(&location)
                .expect("join")
                .to_string();
            continue;
        }
        assert_eq!(seen.status, StatusCode::OK, "{}", seen.text);
        let action = seen
            .text
            .split("action=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .unwrap_or_else(|| panic!("a form: {}", seen.text))
            .to_owned();
        let prompt = if seen.text.contains("name=\"login\"") {
            "login"
        } else {
            "consent"
        };
        let target = url::Url::parse(&url)
            .expect("url")
            .join(&action)
            .expect("join")
            .to_string();
        let posted = browser
            .post_form(
                &target,
                &[("prompt", prompt), ("login", login), ("password", "any")],
            )
            .await;
        url = url::Url::parse(&target)
            .expect("url")
            .join(
                &posted
                    .location
                    .unwrap_or_else(|| panic!("a redirect: {}", posted.text)),
            )
            .expect("join")
            .to_string();
    }
    panic!("the provider never sent the browser back")
}

#[tokio::test]
async fn a_person_signs_in_through_a_real_openid_provider_with_the_code_flow() {
    let Some(provider) = oidc_provider("http://registry.test/auth/callback").await else {
        return;
    };
    let spec = OidcProviderSpec {
        client_id: Some("registry".to_owned()),
        client_secret: Some("registry-secret".to_owned()),
        ..OidcProviderSpec::parse(&format!("corp={}", provider.issuer)).expect("spec")
    };
    let app = TestApp::spawn_with(move |config: &mut Config| {
        config.signin.oidc_providers = vec![spec];
    })
    .await
    .served()
    .await;
    let providers = app.get("/api/auth/providers").await;
    assert_eq!(providers.body["providers"][0]["name"], "corp");
    assert_eq!(providers.body["providers"][0]["kind"], "oidc");

    let mut browser = Browser::new();
    let start = browser
        .get(&on_app(
            &app,
            "/auth/login?provider=corp&return_to=/console",
        ))
        .await;
    assert_eq!(start.status, StatusCode::SEE_OTHER, "{}", start.text);
    let authorize = start.location.expect("to the provider");
    assert!(authorize.starts_with(&provider.issuer), "{authorize}");
    for param in ["nonce=", "code_challenge=", "state=", "scope=openid"] {
        assert!(authorize.contains(param), "{param}: {authorize}");
    }
    let callback = through_the_provider(&mut browser, &authorize, "Alice").await;
    let done = browser.get(&on_app(&app, &callback)).await;
    assert_eq!(done.status, StatusCode::SEE_OTHER, "{}", done.text);
    assert_eq!(
        done.location.as_deref(),
        Some("/console"),
        "{:?}",
        done.location
    );
    let (status, me) = whoami(&app, &mut browser).await;
    assert_eq!(status, StatusCode::OK, "{me}");
    assert_eq!(me["kind"], "session");
    assert_eq!(me["owner"], "alice@corp");
    assert_eq!(me["issuer"]["kind"], "oidc");
    assert_eq!(me["issuer"]["sub"], "Alice");
    assert_eq!(me["issuer"]["email"], "Alice@corp.example");
    let csrf = me["csrf_token"].as_str().expect("csrf").to_owned();
    let (status, agent) = browser
        .call(
            &app,
            reqwest::Method::POST,
            "/api/agents/publish",
            Some(&csrf),
            Some(agent_body("com.example.corp-agent")),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{agent}");
    assert_eq!(agent["owner"], "alice@corp");

    // A second person whose username folds to the same owner name gets the next one.
    let mut other = Browser::new();
    let start = other.get(&on_app(&app, "/auth/login?provider=corp")).await;
    let callback = through_the_provider(
        &mut other,
        &start.location.expect("to the provider"),
        "alice",
    )
    .await;
    assert_eq!(
        other.get(&on_app(&app, &callback)).await.status,
        StatusCode::SEE_OTHER
    );
    assert_eq!(whoami(&app, &mut other).await.1["owner"], "alice-2@corp");

    // An answer whose state does not match is refused before any code is exchanged.
    let mut third = Browser::new();
    let start = third.get(&on_app(&app, "/auth/login?provider=corp")).await;
    let callback =
        through_the_provider(&mut third, &start.location.expect("to the provider"), "bob").await;
    let forged = callback.replace("state=", "state=x");
    let why = refusal(&third.get(&on_app(&app, &forged)).await);
    assert!(why.contains("state mismatch"), "{why}");
}

#[tokio::test]
async fn sign_ins_from_one_address_are_rate_limited() {
    let github = FakeGithub::start().await;
    let (web, api) = (github.url(), github.api_url());
    let app = TestApp::spawn_with(move |config: &mut Config| {
        config.signin.github_client_id = Some(CLIENT_ID.to_owned());
        config.signin.github_url = web.parse().expect("url");
        config.signin.github_api_url = api.parse().expect("url");
        // This test's client is loopback: count it like any other address.
        config.rate_limit_exempt_loopback = false;
    })
    .await
    .served()
    .await;
    let mut statuses = Vec::new();
    let mut browser = Browser::new();
    for _ in 0..12 {
        let seen = browser
            .get(&on_app(&app, "/auth/login?provider=github"))
            .await;
        statuses.push(seen.status.as_u16());
    }
    assert_eq!(&statuses[..10], &[303; 10], "{statuses:?}");
    assert_eq!(statuses[11], 429, "{statuses:?}");
    let limited = app.get("/auth/login?provider=github").await;
    limited.assert_problem(429, "rate_limited");
    assert!(limited.header("retry-after").is_some());
    // The providers list is not a sign-in: it stays readable.
    assert_eq!(app.get("/api/auth/providers").await.status, StatusCode::OK);
}

#[tokio::test]
async fn cookies_are_secure_when_the_public_url_is_https() {
    let github = FakeGithub::start().await;
    let (web, api) = (github.url(), github.api_url());
    let app = TestApp::spawn_with(move |config: &mut Config| {
        config.signin.github_client_id = Some(CLIENT_ID.to_owned());
        config.signin.github_url = web.parse().expect("url");
        config.signin.github_api_url = api.parse().expect("url");
        config.public_url = Some("https://registry.test".parse().expect("url"));
    })
    .await
    .served()
    .await;
    let start = Browser::new()
        .get(&on_app(&app, "/auth/login?provider=github"))
        .await;
    let cookie = start
        .set_cookies
        .iter()
        .find(|cookie| cookie.starts_with("ar_signin="))
        .expect("a sign-in cookie");
    assert!(cookie.contains("Secure"), "{cookie}");
    let to_github = start.location.expect("to GitHub");
    assert!(
        to_github.contains("redirect_uri=https%3A%2F%2Fregistry.test%2Fauth%2Fcallback"),
        "{to_github}"
    );
}

/// A person token minted from a GitHub access token for `account`.
async fn github_token(app: &TestApp, github: &FakeGithub, account: Account) -> String {
    let access = github.token_for(account);
    let minted = app
        .post("/api/auth/github", None, json!({"access_token": access}))
        .await;
    assert_eq!(minted.status, StatusCode::CREATED, "{}", minted.text);
    minted.body["token"].as_str().expect("token").to_owned()
}

#[tokio::test]
async fn a_github_organisation_linked_to_an_organisation_makes_its_members_members() {
    let github = FakeGithub::start().await;
    let app = app_with_github(&github, NamespacePolicy::Open).await;
    let octocat = github_token(&app, &github, octocat()).await;
    let hubot = github_token(
        &app,
        &github,
        Account::new("Hubot", 583232, &[("Acme", 9001, "active")]),
    )
    .await;
    let stranger = github_token(
        &app,
        &github,
        Account::new("Stranger", 583233, &[("Elsewhere", 9003, "active")]),
    )
    .await;
    let alice = app.token("alice", &[]).await;

    let created = app
        .post("/api/orgs", Some(&octocat), json!({"name": "acme"}))
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    // Hubot is in GitHub's Acme but not yet in the registry's.
    assert_eq!(
        app.get_as("/api/orgs/acme", &hubot).await.status,
        StatusCode::NOT_FOUND
    );
    let linked = app
        .put(
            "/api/orgs/acme/github",
            &octocat,
            json!({"github_org": "acme", "role": "publisher"}),
        )
        .await;
    assert_eq!(linked.status, StatusCode::OK, "{}", linked.text);
    assert_eq!(
        linked.body["github"],
        json!({"org": "acme", "role": "publisher"})
    );

    // Now Hubot is a publisher of it: listed, and publishing for it.
    let mine = app.get_as("/api/orgs", &hubot).await;
    assert_eq!(mine.body["orgs"][0]["name"], "acme", "{}", mine.text);
    assert_eq!(mine.body["orgs"][0]["role"], "publisher");
    let mut private = agent_body("com.example.acmetides");
    private["org"] = json!("acme");
    private["visibility"] = json!("private");
    let published = app.try_publish(&hubot, private).await;
    assert_eq!(published.status, StatusCode::CREATED, "{}", published.text);
    let id = published.body["id"].as_str().expect("id").to_owned();
    assert!(
        app.post_empty(&format!("/api/agents/{id}/go-live"), &hubot)
            .await
            .status
            .is_success()
    );
    // The organisation's private agent: seen by its GitHub members, not by anyone else.
    let seen = |token: String| {
        let app = &app;
        async move {
            app.get_as("/public/agents/com.example.acmetides", &token)
                .await
                .status
        }
    };
    assert_eq!(seen(octocat.clone()).await, StatusCode::OK);
    assert_eq!(seen(hubot.clone()).await, StatusCode::OK);
    assert_eq!(seen(stranger.clone()).await, StatusCode::NOT_FOUND);
    assert_eq!(
        app.get_as("/api/orgs/acme", &stranger).await.status,
        StatusCode::NOT_FOUND
    );
    // A linked member is no admin.
    let refused = app
        .put(
            "/api/orgs/acme/members/alice",
            &hubot,
            json!({"role": "viewer"}),
        )
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.text);

    // Only someone GitHub shows in the GitHub organisation may link it; one link per GitHub
    // organisation.
    let other = app
        .post("/api/orgs", Some(&alice), json!({"name": "other"}))
        .await;
    assert_eq!(other.status, StatusCode::CREATED, "{}", other.text);
    let not_theirs = app
        .put(
            "/api/orgs/other/github",
            &alice,
            json!({"github_org": "acme"}),
        )
        .await;
    not_theirs.assert_problem(403, "forbidden");
    let taken = app
        .put(
            "/api/orgs/other/github",
            crate::helpers::MASTER_KEY,
            json!({"github_org": "acme"}),
        )
        .await;
    taken.assert_problem(409, "conflict");
    for body in [
        json!({}),
        json!({"github_org": "Acme Inc"}),
        json!({"github_org": "acme", "role": "admin"}),
    ] {
        let bad = app
            .put("/api/orgs/acme/github", &octocat, body.clone())
            .await;
        bad.assert_problem(422, "validation_failed");
    }

    // Unlinked: Hubot is no member any more, and the organisation's private agent is gone
    // for Hubot.
    let unlinked = app.delete("/api/orgs/acme/github", &octocat).await;
    assert_eq!(unlinked.status, StatusCode::NO_CONTENT, "{}", unlinked.text);
    assert_eq!(
        app.get_as("/api/orgs/acme", &hubot).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(seen(hubot.clone()).await, StatusCode::NOT_FOUND);
    // The link and the unlink are in the audit log.
    let audit = app
        .get_as("/api/audit?org=acme", crate::helpers::MASTER_KEY)
        .await;
    for action in ["org.github_linked", "org.github_unlinked"] {
        assert!(audit.text.contains(action), "{action}: {}", audit.text);
    }
}
