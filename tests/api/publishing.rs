//! Trusted publishing and the caller model, over real loopback HTTP: a fake CI token issuer
//! (`issuer.rs`) signs ID tokens, the registry fetches its keys, exchanges the tokens for
//! registry tokens restricted to the namespace the identity grants, and `GET /api/me` says
//! who each caller is.

use agent_registry::config::{Config, NamespacePolicy};
use agent_registry::domain::trusted_issuer::TrustedIssuer;
use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{MASTER_KEY, TestApp, TestResponse, agent_body};
use crate::issuer::{AUDIENCE, FakeIssuer, REQUEST_TOKEN, SigningKey, hmac_signed, now, unsigned};

/// A served app trusting `issuers` (`KIND=URL` each).
async fn app_trusting(issuers: &[String]) -> TestApp {
    app_trusting_under(issuers, NamespacePolicy::Open).await
}

/// `app_trusting`, with a namespace policy.
async fn app_trusting_under(issuers: &[String], policy: NamespacePolicy) -> TestApp {
    let issuers: Vec<TrustedIssuer> = issuers
        .iter()
        .map(|issuer| TrustedIssuer::parse(issuer).expect("issuer"))
        .collect();
    TestApp::spawn_with(move |config: &mut Config| {
        config.publishing.trusted_issuers = issuers;
        config.publishing.namespace_policy = policy;
    })
    .await
    .served()
    .await
}

async fn exchange(app: &TestApp, id_token: &str) -> TestResponse {
    app.post("/api/auth/oidc", None, json!({"token": id_token}))
        .await
}

/// Exchange `id_token`, asserting 201; the minted token's body.
async fn minted(app: &TestApp, id_token: &str) -> Value {
    let response = exchange(app, id_token).await;
    assert_eq!(response.status, StatusCode::CREATED, "{}", response.text);
    response.body
}

/// A 401 whose detail and `WWW-Authenticate` description both contain `reason`.
#[track_caller]
fn assert_refused(response: &TestResponse, reason: &str) {
    response.assert_problem(401, "unauthorized");
    let detail = response.body["detail"].as_str().unwrap_or_default();
    assert!(detail.contains(reason), "{reason:?} not in {detail:?}");
    let challenge = response.header("www-authenticate").unwrap_or_default();
    assert!(
        challenge.starts_with("Bearer error=\"invalid_token\", error_description=\""),
        "{challenge}"
    );
    assert!(
        challenge.contains(&reason.replace('"', "'")),
        "{reason:?} not in {challenge}"
    );
}

fn seconds_until(timestamp: &str) -> i64 {
    let at = time::OffsetDateTime::parse(timestamp, &time::format_description::well_known::Rfc3339)
        .expect("an RFC 3339 timestamp");
    at.unix_timestamp() - now()
}

#[tokio::test]
async fn a_ci_token_publishes_in_its_namespace_and_nowhere_else() {
    let key = SigningKey::ec("ec-1");
    let issuer = FakeIssuer::start(&[&key]).await;
    let app = app_trusting(&[format!("github={}", issuer.url())]).await;

    let body = minted(&app, &key.sign(&issuer.github_claims("acme"))).await;
    let token = body["token"].as_str().expect("token");
    assert!(token.starts_with("ar_"), "{body}");
    assert_eq!(body["namespaces"], json!(["io.github.acme"]));
    assert_eq!(body["owner"], "io.github.acme");
    assert_eq!(body["scopes"], json!(["agents:write"]));
    let left = seconds_until(body["expires_at"].as_str().expect("expires_at"));
    assert!((14 * 60..=15 * 60).contains(&left), "{left} s");

    let published = app
        .publish(token, agent_body("io.github.acme.weather"))
        .await;
    assert_eq!(published["owner"], "io.github.acme");
    let id = published["id"].as_str().expect("id").to_owned();
    let live = app
        .post_empty(&format!("/api/agents/{id}/go-live"), token)
        .await;
    assert_eq!(live.status, StatusCode::OK, "{}", live.text);
    // The namespace itself is a package name it may use.
    app.publish(token, agent_body("io.github.acme")).await;

    let outside = app
        .try_publish(token, agent_body("io.github.other.x"))
        .await;
    outside.assert_problem(403, "namespace_not_granted");
    let detail = outside.body["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("io.github.other.x") && detail.contains("io.github.acme"),
        "{detail}"
    );
    // A prefix of a label is not the namespace.
    app.try_publish(token, agent_body("io.github.acmecorp.x"))
        .await
        .assert_problem(403, "namespace_not_granted");

    // An agent of the same owner outside the namespace (published with an operator's token):
    // every write the minted token tries on it is refused.
    let operator = app.token("io.github.acme", &["agents:write"]).await;
    let elsewhere = app
        .publish(&operator, agent_body("com.example.acme-tools"))
        .await;
    let path = format!("/api/agents/{}", elsewhere["id"].as_str().expect("id"));
    let mut update = agent_body("com.example.acme-tools");
    update["description"] = json!("Changed from CI");
    let refused = [
        app.put(&path, token, update).await,
        app.post_empty(&format!("{path}/go-live"), token).await,
        app.post_empty(&format!("{path}/unpublish"), token).await,
        app.post_empty(&format!("{path}/verify"), token).await,
        app.delete(&path, token).await,
    ];
    for response in &refused {
        response.assert_problem(403, "namespace_not_granted");
    }
    // Its own agent: update, unpublish and delete work.
    let own = format!("/api/agents/{id}");
    let mut update = agent_body("io.github.acme.weather");
    update["description"] = json!("Forecasts, from CI");
    assert_eq!(app.put(&own, token, update).await.status, StatusCode::OK);
    let unpublished = app.post_empty(&format!("{own}/unpublish"), token).await;
    assert_eq!(unpublished.status, StatusCode::OK, "{}", unpublished.text);
    assert_eq!(app.delete(&own, token).await.status, StatusCode::NO_CONTENT);
    // Only agents:write: the other scopes' paths are closed to it.
    let playground = app
        .post("/api/playground/session", Some(token), json!({}))
        .await;
    playground.assert_problem(403, "forbidden");
}

#[tokio::test]
async fn a_ci_identity_is_a_namespace_it_owns_under_the_owned_policy() {
    let key = SigningKey::ec("ec-1");
    let issuer = FakeIssuer::start(&[&key]).await;
    let app = app_trusting_under(
        &[format!("github={}", issuer.url())],
        NamespacePolicy::Owned,
    )
    .await;
    let body = minted(&app, &key.sign(&issuer.github_claims("Acme"))).await;
    let token = body["token"].as_str().expect("token");

    // No claim and no proof: the identity is the proof of io.github.acme.
    app.publish(token, agent_body("io.github.acme.weather"))
        .await;
    // An owner with a plain token and no namespace is refused.
    let alice = app.token("alice", &["agents:write"]).await;
    app.try_publish(&alice, agent_body("io.github.alice.weather"))
        .await
        .assert_problem(403, "namespace_not_owned");
    let me = app.get_as("/api/me", token).await;
    assert_eq!(me.body["namespace_policy"], "owned");
    assert_eq!(me.body["namespaces"], json!(["io.github.acme"]));
}

#[tokio::test]
async fn me_says_who_the_caller_is() {
    let key = SigningKey::ec("ec-1");
    let issuer = FakeIssuer::start(&[&key]).await;
    let app = app_trusting(&[format!("github={}", issuer.url())]).await;

    let master = app.get_as("/api/me", MASTER_KEY).await;
    assert_eq!(master.status, StatusCode::OK, "{}", master.text);
    assert_eq!(
        master.body,
        json!({"kind": "master", "owner": "admin", "namespaces": null,
            "scopes": ["a2a", "agents:write", "mirrors:read", "playground"],
            "namespace_policy": "open", "owned_namespaces": [], "granted_namespaces": []})
    );

    let operator = app.token("alice", &["agents:write", "a2a"]).await;
    let alice = app.get_as("/api/me", &operator).await;
    assert_eq!(alice.body["kind"], "token");
    assert_eq!(alice.body["owner"], "alice");
    assert_eq!(alice.body["scopes"], json!(["a2a", "agents:write"]));
    assert_eq!(alice.body["namespaces"], Value::Null);
    assert!(
        alice
            .body
            .as_object()
            .expect("object")
            .contains_key("namespaces")
    );
    assert!(
        alice.body["token_id"]
            .as_str()
            .is_some_and(|id| id.starts_with("tok_")),
        "{}",
        alice.text
    );
    assert!(alice.body.get("issuer").is_none(), "{}", alice.text);

    let body = minted(&app, &key.sign(&issuer.github_claims("acme"))).await;
    let ci = app
        .get_as("/api/me", body["token"].as_str().expect("token"))
        .await;
    assert_eq!(ci.status, StatusCode::OK, "{}", ci.text);
    assert_eq!(ci.body["kind"], "token");
    assert_eq!(ci.body["owner"], "io.github.acme");
    assert_eq!(ci.body["token_id"], body["token_id"]);
    assert_eq!(ci.body["scopes"], json!(["agents:write"]));
    assert_eq!(ci.body["namespaces"], json!(["io.github.acme"]));
    assert_eq!(ci.body["expires_at"], body["expires_at"]);
    let identity = &ci.body["issuer"];
    assert_eq!(identity["kind"], "github");
    assert_eq!(identity["repository"], "acme/weather");
    assert_eq!(identity["repository_owner"], "acme");
    assert_eq!(identity["repository_owner_id"], "123");

    let nobody = app.get("/api/me").await;
    nobody.assert_problem(401, "unauthorized");
    let wrong = app.get_as("/api/me", "ar_nope").await;
    wrong.assert_problem(401, "unauthorized");
}

#[tokio::test]
async fn bad_id_tokens_are_refused_each_with_its_reason() {
    let key = SigningKey::ec("ec-1");
    let rsa = SigningKey::rsa("rsa-1");
    let stranger = SigningKey::ec("ec-1");
    let issuer = FakeIssuer::start(&[&key, &rsa]).await;
    let foreign = FakeIssuer::start(&[&stranger]).await;
    let app = app_trusting(&[format!("github={}", issuer.url())]).await;
    let good = issuer.github_claims("acme");
    let with = |changes: Value| {
        let mut claims = good.clone();
        for (name, value) in changes.as_object().expect("changes") {
            claims[name] = value.clone();
        }
        claims
    };
    let now = now();

    // Both algorithms verify.
    minted(&app, &key.sign(&good)).await;
    minted(&app, &rsa.sign(&good)).await;

    let cases: Vec<(&str, String, &str)> = vec![
        ("garbled", "not-a-jwt".to_owned(), "not a JWT"),
        ("garbled base64", "a.b.c".to_owned(), "not a JWT"),
        (
            "expired",
            key.sign(&with(
                json!({"iat": now - 4000, "nbf": now - 4000, "exp": now - 3600}),
            )),
            "expired",
        ),
        (
            "not yet valid",
            key.sign(&with(json!({"nbf": now + 3600, "exp": now + 7200}))),
            "not valid yet",
        ),
        (
            "issued in the future",
            key.sign(&with(json!({"iat": now + 3600, "exp": now + 7200}))),
            "issued in the future",
        ),
        (
            "wrong audience",
            key.sign(&with(json!({"aud": "https://elsewhere.example"}))),
            "audience",
        ),
        (
            "one audience among others",
            key.sign(&with(
                json!({"aud": [AUDIENCE, "https://elsewhere.example"]}),
            )),
            "audience",
        ),
        ("no audience", key.sign(&with(json!({"aud": null}))), "aud"),
        (
            "foreign issuer",
            stranger.sign(&foreign.github_claims("acme")),
            "is not trusted",
        ),
        (
            "unknown issuer named by a trusted key",
            key.sign(&with(
                json!({"iss": "https://token.actions.githubusercontent.com"}),
            )),
            "is not trusted",
        ),
        (
            "alg none",
            unsigned(&json!({"alg": "none", "kid": "ec-1"}), &good),
            "alg none",
        ),
        (
            "HMAC",
            hmac_signed("ec-1", b"the registry does not share secrets", &good),
            "HMAC",
        ),
        (
            "badly signed",
            stranger.sign(&good),
            "signature does not verify",
        ),
        (
            "a key whose type is not the algorithm's",
            rsa.sign_as("ec-1", &good),
            "is an EC key",
        ),
        (
            "no key named",
            unsigned(&json!({"alg": "ES256"}), &good),
            "no key (kid)",
        ),
        (
            "no owner claim",
            key.sign(&with(json!({"repository_owner": null}))),
            "repository_owner",
        ),
        (
            "an owner that is no namespace label",
            key.sign(&with(json!({"repository_owner": "ac.me"}))),
            "repository_owner",
        ),
    ];
    for (case, token, reason) in &cases {
        let response = exchange(&app, token).await;
        assert_eq!(
            response.status,
            StatusCode::UNAUTHORIZED,
            "{case}: {}",
            response.text
        );
        assert_refused(&response, reason);
    }

    // The body must hold a token.
    for body in [
        json!({}),
        json!({"token": 7}),
        json!({"token": "  "}),
        json!([]),
    ] {
        app.post("/api/auth/oidc", None, body)
            .await
            .assert_problem(422, "validation_failed");
    }
}

#[tokio::test]
async fn a_registry_trusting_no_issuer_refuses_every_id_token() {
    let key = SigningKey::ec("ec-1");
    let issuer = FakeIssuer::start(&[&key]).await;
    let app = app_trusting(&[]).await;
    let response = exchange(&app, &key.sign(&issuer.github_claims("acme"))).await;
    assert_refused(&response, "trusts no OIDC issuer");
    assert_eq!(issuer.jwks_hits(), 0);
}

#[tokio::test]
async fn a_rotated_key_verifies_after_one_refetch_and_unknown_keys_do_not_storm_the_issuer() {
    let old = SigningKey::ec("key-2025");
    let new = SigningKey::ec("key-2026");
    let issuer = FakeIssuer::start(&[&old]).await;
    let app = app_trusting(&[format!("github={}", issuer.url())]).await;
    let claims = issuer.github_claims("acme");

    minted(&app, &old.sign(&claims)).await;
    minted(&app, &old.sign(&claims)).await;
    assert_eq!(issuer.jwks_hits(), 1, "the keys are cached");

    issuer.publish(&[&new]);
    minted(&app, &new.sign(&claims)).await;
    assert_eq!(issuer.jwks_hits(), 2, "one fetch for the new key");

    // Made-up key ids, many at once: within 30 s of the last fetch none fetches again.
    let storm: Vec<_> = (0..20)
        .map(|i| {
            let token = new.sign_as(&format!("made-up-{i}"), &claims);
            let app = &app;
            async move { exchange(app, &token).await }
        })
        .collect();
    for response in futures::future::join_all(storm).await {
        assert_refused(&response, "has no key 'made-up-");
    }
    // The retired key is gone from the set fetched for the new one.
    assert_refused(
        &exchange(&app, &old.sign(&claims)).await,
        "has no key 'key-2025'",
    );
    assert_eq!(issuer.jwks_hits(), 2, "no fetch more than once per 30 s");
    minted(&app, &new.sign(&claims)).await;
}

#[tokio::test]
async fn owners_are_lowercased_and_gitlab_paths_become_namespaces() {
    let github_key = SigningKey::ec("gh");
    let gitlab_key = SigningKey::rsa("gl");
    let github = FakeIssuer::start(&[&github_key]).await;
    let gitlab = FakeIssuer::start(&[&gitlab_key]).await;
    let app = app_trusting(&[
        format!("github={}", github.url()),
        format!("gitlab={}", gitlab.url()),
    ])
    .await;

    let body = minted(&app, &github_key.sign(&github.github_claims("Acme"))).await;
    assert_eq!(body["namespaces"], json!(["io.github.acme"]));
    assert_eq!(body["owner"], "io.github.acme");
    let token = body["token"].as_str().expect("token");
    app.publish(token, agent_body("io.github.acme.weather"))
        .await;
    let me = app.get_as("/api/me", token).await;
    assert_eq!(me.body["issuer"]["repository_owner"], "Acme");

    let now = now();
    let gitlab_claims = json!({
        "iss": gitlab.url(), "aud": AUDIENCE, "sub": "project_path:Acme/Tools/weather:ref_type:branch:ref:main",
        "namespace_path": "Acme/Tools", "namespace_id": "77", "project_path": "Acme/Tools/weather",
        "iat": now, "nbf": now, "exp": now + 300,
    });
    let body = minted(&app, &gitlab_key.sign(&gitlab_claims)).await;
    assert_eq!(body["namespaces"], json!(["com.gitlab.acme.tools"]));
    assert_eq!(body["owner"], "com.gitlab.acme.tools");
    let token = body["token"].as_str().expect("token");
    app.publish(token, agent_body("com.gitlab.acme.tools.weather"))
        .await;
    app.try_publish(token, agent_body("io.github.acme.other"))
        .await
        .assert_problem(403, "namespace_not_granted");

    // A GitLab token does not verify as GitHub's, nor the other way round.
    let mut crossed = github.github_claims("acme");
    crossed["iss"] = json!(gitlab.url());
    assert_refused(
        &exchange(&app, &github_key.sign_as("gl", &crossed)).await,
        "is an RSA key",
    );
}

#[tokio::test]
async fn one_namespace_mints_a_bounded_number_of_tokens_a_minute() {
    let key = SigningKey::ec("ec-1");
    let issuer = FakeIssuer::start(&[&key]).await;
    let app = app_trusting(&[format!("github={}", issuer.url())]).await;
    let token = key.sign(&issuer.github_claims("acme"));
    for _ in 0..agent_registry::oidc::EXCHANGES_PER_MINUTE {
        minted(&app, &token).await;
    }
    let limited = exchange(&app, &token).await;
    limited.assert_problem(429, "rate_limited");
    assert!(limited.header("retry-after").is_some());
    // Another namespace is not affected.
    minted(&app, &key.sign(&issuer.github_claims("other"))).await;
}

#[tokio::test]
async fn an_issuer_whose_keys_cannot_be_fetched_is_a_502_not_a_500() {
    let key = SigningKey::ec("ec-1");
    let issuer = FakeIssuer::start(&[&key]).await;
    // Nothing listens on port 9 of loopback.
    let app = app_trusting(&["github=http://127.0.0.1:9".to_owned()]).await;
    let mut claims = issuer.github_claims("acme");
    claims["iss"] = json!("http://127.0.0.1:9");
    let response = exchange(&app, &key.sign(&claims)).await;
    response.assert_problem(502, "upstream_error");

    // A key set with keys this registry cannot read still serves the ones it can.
    issuer.publish_raw(vec![
        json!({"kty": "OKP", "crv": "X448", "kid": "odd", "x": "AAAA"}),
        json!({"kty": "EC", "crv": "P-256", "kid": "broken"}),
        key.jwk(),
    ]);
    let app = app_trusting(&[format!("github={}", issuer.url())]).await;
    minted(&app, &key.sign(&issuer.github_claims("acme"))).await;
}

#[tokio::test]
async fn a_ci_token_manages_only_itself_among_its_owners_tokens() {
    let key = SigningKey::ec("ec-1");
    let issuer = FakeIssuer::start(&[&key]).await;
    let app = app_trusting(&[format!("github={}", issuer.url())]).await;
    let operators = app.token("io.github.acme", &[]).await;
    let body = minted(&app, &key.sign(&issuer.github_claims("acme"))).await;
    let token = body["token"].as_str().expect("token");

    let listed = app.get_as("/api/tokens", token).await;
    assert_eq!(listed.status, 200, "{}", listed.text);
    let ids: Vec<&str> = listed.body["tokens"]
        .as_array()
        .expect("tokens")
        .iter()
        .filter_map(|t| t["id"].as_str())
        .collect();
    assert_eq!(ids.len(), 1, "only itself: {ids:?}");
    let own_id = ids[0].to_owned();
    let all = app.get_as("/api/tokens", &operators).await;
    let other = all.body["tokens"]
        .as_array()
        .expect("tokens")
        .iter()
        .filter_map(|t| t["id"].as_str())
        .find(|id| *id != own_id)
        .expect("the operator's token")
        .to_owned();

    app.delete(&format!("/api/tokens/{other}"), token)
        .await
        .assert_problem(404, "token_not_found");
    assert_eq!(app.get_as("/api/tokens", &operators).await.status, 200);
    let revoked = app.delete(&format!("/api/tokens/{own_id}"), token).await;
    assert_eq!(revoked.status, 204, "{}", revoked.text);
    assert_eq!(app.get_as("/api/me", token).await.status, 401);
}

/// A served app trusting `issuer` under the owned policy, its public URL its real address (the
/// audience the CLI asks the job's ID tokens for).
async fn app_at_its_own_address(issuer: &FakeIssuer) -> (TestApp, String) {
    let listener = tokio::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("address"));
    let issuers = vec![TrustedIssuer::parse(&format!("github={}", issuer.url())).expect("issuer")];
    let public = url.clone();
    let app = TestApp::spawn_with(move |config: &mut Config| {
        config.publishing.trusted_issuers = issuers;
        config.publishing.namespace_policy = NamespacePolicy::Owned;
        config.public_url = Some(public.parse().expect("url"));
    })
    .await
    .served_on(listener);
    (app, url)
}

/// The CLI, with a home of its own and no token in its environment.
pub fn cli(home: &std::path::Path) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_agent-registry"));
    command
        .env("HOME", home)
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("REGISTRY_TOKEN")
        .env_remove("REGISTRY_URL")
        .env_remove("ACTIONS_ID_TOKEN_REQUEST_URL")
        .env_remove("ACTIONS_ID_TOKEN_REQUEST_TOKEN")
        .stdin(std::process::Stdio::piped());
    command
}

#[tokio::test]
async fn the_cli_publishes_from_an_actions_job_with_its_oidc_identity() {
    let key = SigningKey::ec("ec-1");
    let issuer = FakeIssuer::start(&[&key]).await;
    let (app, url) = app_at_its_own_address(&issuer).await;
    let home = tempfile::tempdir().expect("home");
    let write = |name: &str, body: Value| {
        let path = home.path().join(name);
        std::fs::write(&path, body.to_string()).expect("write");
        path
    };
    let agent = write("agent.json", agent_body("io.github.acme.weather"));
    let request_url = issuer.run_job(&key, "acme");
    let publish = |file: &std::path::Path| {
        let mut command = cli(home.path());
        command
            .arg("publish")
            .arg(file)
            .args(["--registry", &url, "--oidc", "--go-live"])
            .env("ACTIONS_ID_TOKEN_REQUEST_URL", &request_url)
            .env("ACTIONS_ID_TOKEN_REQUEST_TOKEN", REQUEST_TOKEN);
        command
    };

    let first = publish(&agent).output().await.expect("run");
    let stdout = String::from_utf8_lossy(&first.stdout);
    assert!(
        first.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&first.stderr)
    );
    assert!(stdout.contains("io.github.acme.weather ACTIVE"), "{stdout}");
    let live = app.get("/public/agents/io.github.acme.weather").await;
    assert_eq!(live.status, StatusCode::OK, "{}", live.text);
    assert_eq!(live.body["owner"], "io.github.acme");

    // Run again with a changed body: the agent is updated, not refused.
    let mut changed = agent_body("io.github.acme.weather");
    changed["description"] = json!("Forecasts, published again from CI");
    let again = publish(&write("changed.json", changed))
        .output()
        .await
        .expect("run");
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    let updated = app.get("/public/agents/io.github.acme.weather").await;
    assert_eq!(
        updated.body["description"],
        "Forecasts, published again from CI"
    );

    // Outside the identity's namespace: refused, saying why.
    let foreign = publish(&write(
        "foreign.json",
        agent_body("io.github.other.weather"),
    ))
    .output()
    .await
    .expect("run");
    assert!(!foreign.status.success());
    let stderr = String::from_utf8_lossy(&foreign.stderr);
    assert!(stderr.contains("namespace_not_granted"), "{stderr}");

    // Outside a job (no request token): refused before anything is sent.
    let outside = cli(home.path())
        .arg("publish")
        .arg(&agent)
        .args(["--registry", &url, "--oidc"])
        .output()
        .await
        .expect("run");
    assert!(!outside.status.success());
    let stderr = String::from_utf8_lossy(&outside.stderr);
    assert!(stderr.contains("ACTIONS_ID_TOKEN_REQUEST_URL"), "{stderr}");
}

#[tokio::test]
async fn the_cli_checks_a_body_whole_logs_in_and_says_who_it_is() {
    let key = SigningKey::ec("ec-1");
    let issuer = FakeIssuer::start(&[&key]).await;
    let (app, url) = app_at_its_own_address(&issuer).await;
    let home = tempfile::tempdir().expect("home");
    let bad = home.path().join("bad.json");
    std::fs::write(&bad, r#"{"package_name": "Not A Name", "tags": 7}"#).expect("write");

    // Every problem at once, and nothing sent (the registry named does not exist).
    let checked = cli(home.path())
        .arg("publish")
        .arg(&bad)
        .args(["--registry", "http://127.0.0.1:9", "--dry-run"])
        .output()
        .await
        .expect("run");
    assert!(!checked.status.success());
    let stderr = String::from_utf8_lossy(&checked.stderr);
    for field in ["package_name", "name", "tags"] {
        assert!(stderr.contains(&format!("  {field}:")), "{field}: {stderr}");
    }
    assert!(stderr.contains("nothing was sent"), "{stderr}");

    // login reads the token from standard input, checks it, and stores it for whoami.
    let alice = app.token("alice", &["agents:write"]).await;
    let mut login = cli(home.path())
        .args(["login", "--registry", &url])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run");
    {
        use tokio::io::AsyncWriteExt;
        let mut stdin = login.stdin.take().expect("stdin");
        stdin
            .write_all(format!("{alice}\n").as_bytes())
            .await
            .expect("paste");
    }
    let logged_in = login.wait_with_output().await.expect("run");
    assert!(
        logged_in.status.success(),
        "{}",
        String::from_utf8_lossy(&logged_in.stderr)
    );
    let stored = home.path().join(".config/agent-registry/credentials.json");
    let credentials = std::fs::read_to_string(&stored).expect("stored");
    assert!(credentials.contains(&alice), "{credentials}");
    let whoami = cli(home.path())
        .args(["whoami", "--registry", &url])
        .output()
        .await
        .expect("run");
    assert!(whoami.status.success());
    let me: Value = serde_json::from_slice(&whoami.stdout).expect("JSON");
    assert_eq!(me["owner"], "alice");
    assert_eq!(me["namespace_policy"], "owned");

    // A wrong token is not stored.
    let refused = cli(home.path())
        .args(["login", "--registry", &url, "--token", "ar_wrong"])
        .output()
        .await
        .expect("run");
    assert!(!refused.status.success());
    assert_eq!(
        std::fs::read_to_string(&stored).expect("stored"),
        credentials
    );
}

async fn bind(app: &TestApp, token: &str, body: Value) -> TestResponse {
    app.post("/api/bindings", Some(token), body).await
}

#[tokio::test]
async fn a_binding_lets_only_its_repository_and_workflow_publish_what_it_covers() {
    let key = SigningKey::ec("ec-1");
    let issuer = FakeIssuer::start(&[&key]).await;
    let app = app_trusting(&[format!("github={}", issuer.url())]).await;

    // The master key binds one package of io.github.acme to acme/weather's publish workflow.
    let made = bind(
        &app,
        MASTER_KEY,
        json!({"scope": "io.github.acme.weather", "kind": "github",
            "repository": "acme/weather", "workflow": ".github/workflows/publish.yml"}),
    )
    .await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.text);
    assert!(
        made.body["id"]
            .as_str()
            .is_some_and(|id| id.starts_with("bnd_"))
    );

    let from = |repository: &str, workflow: &str| {
        let mut claims = issuer.github_claims("acme");
        claims["repository"] = json!(repository);
        claims["workflow_ref"] = json!(format!("{repository}/{workflow}@refs/heads/main"));
        key.sign(&claims)
    };
    let publish_with = |id_token: String, package: &'static str| {
        let app = &app;
        async move {
            let minted = minted(app, &id_token).await;
            let token = minted["token"].as_str().expect("token").to_owned();
            app.try_publish(&token, agent_body(package)).await
        }
    };

    // The bound workflow publishes the bound package.
    let bound = publish_with(
        from("acme/weather", ".github/workflows/publish.yml"),
        "io.github.acme.weather",
    )
    .await;
    assert_eq!(bound.status, StatusCode::CREATED, "{}", bound.text);
    // Another workflow of that repository, or another repository of the owner, may not write it.
    let other_workflow = from("acme/weather", ".github/workflows/test.yml");
    let minted_other = minted(&app, &other_workflow).await;
    let other_token = minted_other["token"].as_str().expect("token");
    let refused = app
        .put(
            "/api/agents/io.github.acme.weather",
            other_token,
            agent_body("io.github.acme.weather"),
        )
        .await;
    refused.assert_problem(403, "binding_mismatch");
    assert!(refused.text.contains("acme/weather"), "{}", refused.text);
    publish_with(
        from("acme/tools", ".github/workflows/publish.yml"),
        "io.github.acme.weather",
    )
    .await
    .assert_problem(403, "binding_mismatch");
    // What no binding covers stays open to the namespace's identities.
    let unbound = publish_with(
        from("acme/tools", ".github/workflows/publish.yml"),
        "io.github.acme.tools",
    )
    .await;
    assert_eq!(unbound.status, StatusCode::CREATED, "{}", unbound.text);

    // Bindings are made by who holds the namespace, never by a CI token.
    let alice = app.token("alice", &["agents:write"]).await;
    bind(
        &app,
        &alice,
        json!({"scope": "io.github.acme", "kind": "github", "repository": "alice/x"}),
    )
    .await
    .assert_problem(403, "namespace_not_owned");
    bind(
        &app,
        other_token,
        json!({"scope": "io.github.acme", "kind": "github", "repository": "acme/tools"}),
    )
    .await
    .assert_problem(403, "forbidden");
    let bad = bind(
        &app,
        &alice,
        json!({"scope": "io.github", "kind": "bitbucket", "repository": "",
            "workflow": 3}),
    )
    .await;
    bad.assert_problem(422, "validation_failed");
    assert_eq!(
        crate::helpers::error_fields(&bad),
        ["kind", "repository", "scope", "workflow"]
    );
    bind(
        &app,
        MASTER_KEY,
        json!({"scope": "io.github.acme.weather", "kind": "github",
            "repository": "acme/weather", "workflow": ".github/workflows/publish.yml"}),
    )
    .await
    .assert_problem(409, "conflict");

    // Deleted, the binding no longer holds the other workflow back.
    let id = made.body["id"].as_str().expect("id");
    let listed = app.get_as("/api/bindings", MASTER_KEY).await;
    assert_eq!(listed.body["bindings"][0]["id"], id);
    assert_eq!(
        app.delete(&format!("/api/bindings/{id}"), MASTER_KEY)
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    app.delete(&format!("/api/bindings/{id}"), MASTER_KEY)
        .await
        .assert_problem(404, "binding_not_found");
    let now_open = app
        .put(
            "/api/agents/io.github.acme.weather",
            other_token,
            agent_body("io.github.acme.weather"),
        )
        .await;
    assert_eq!(now_open.status, StatusCode::OK, "{}", now_open.text);
}
