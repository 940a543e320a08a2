//! Outbound fetching refuses private targets when they are not allowed (the default): through
//! the reader, card fetching on publish, and domain verification. Nothing here connects anywhere:
//! every target is refused before a connection is attempted. Redirects to private addresses and
//! names resolving to them are covered against a local server in `src/outbound/tests.rs`.

use serde_json::json;

use crate::fakes::Fake;
use crate::helpers::{MASTER_KEY, TestApp, agent_body, error_fields};

/// Every literal form of a private, loopback, link-local or metadata address, and loopback names.
const PRIVATE_TARGETS: [&str; 17] = [
    "http://127.0.0.1/",
    "http://127.0.0.1:8080/admin",
    "http://localhost/",
    "http://localhost:9000/status",
    "http://[::1]/",
    "http://169.254.169.254/latest/meta-data/",
    "http://10.0.0.1/",
    "http://10.20.30.40:8443/",
    "http://192.168.1.1/",
    "http://172.16.0.10/",
    "http://0.0.0.0/",
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:a9fe:a9fe]/",
    "http://2130706433/",
    "http://0177.0.0.1/",
    "http://0x7f.0.0.1/",
    "http://[fd00:ec2::254]/",
];

#[tokio::test]
async fn the_reader_refuses_private_loopback_link_local_and_metadata_targets() {
    let app = TestApp::spawn().await;

    for target in PRIVATE_TARGETS {
        let response = app
            .post(
                "/a2a/utility/reader",
                Some(MASTER_KEY),
                json!({"input": {"url": target}}),
            )
            .await;

        response.assert_problem(400, "invalid_parameter");
        let detail = response.body["detail"].as_str().expect("detail");
        assert!(detail.contains("refused"), "{target}: {detail}");
    }
}

#[tokio::test]
async fn the_reader_refuses_credentials_in_urls() {
    let app = TestApp::spawn().await;

    let response = app
        .post(
            "/a2a/utility/reader",
            Some(MASTER_KEY),
            json!({"input": {"url": "http://user:pass@example.com/"}}),
        )
        .await;

    response.assert_problem(400, "invalid_parameter");
    assert!(
        response.body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("credentials"))
    );
}

#[tokio::test]
async fn the_reader_reaches_loopback_only_when_the_configuration_allows_it() {
    let fake = Fake::start().await;
    let strict = TestApp::spawn_with(|config| {
        fake.configure(config);
        config.upstreams.outbound_allow_private = false;
    })
    .await;
    let allowed = TestApp::spawn_with(|config| fake.configure(config)).await;
    let body = json!({"input": {"url": fake.url("/pages/engine")}});

    let refused = strict
        .post("/a2a/utility/reader", Some(MASTER_KEY), body.clone())
        .await;
    let read = allowed
        .post("/a2a/utility/reader", Some(MASTER_KEY), body)
        .await;

    refused.assert_problem(400, "invalid_parameter");
    assert_eq!(read.status, 200, "{}", read.text);
}

#[tokio::test]
async fn configured_api_origins_are_reached_even_when_private_targets_are_refused() {
    let fake = Fake::start().await;
    let app = TestApp::spawn_with(|config| {
        fake.configure(config);
        config.upstreams.outbound_allow_private = false;
    })
    .await;

    let response = app
        .post(
            "/a2a/utility/finance",
            Some(MASTER_KEY),
            json!({"input": {"symbol": "BTC"}}),
        )
        .await;

    assert_eq!(response.status, 200, "{}", response.text);
}

#[tokio::test]
async fn publishing_from_a_private_manifest_url_is_refused() {
    let app = TestApp::spawn().await;
    let token = app.token("alice", &["agents:write"]).await;

    for target in [
        "http://169.254.169.254/latest/meta-data/",
        "http://localhost/card.json",
    ] {
        let response = app
            .try_publish(
                &token,
                json!({"package_name": "com.example.sneaky", "manifest_url": target}),
            )
            .await;

        response.assert_problem(422, "validation_failed");
        assert_eq!(error_fields(&response), ["manifest_url"]);
        let message = response.body["errors"][0]["message"]
            .as_str()
            .expect("message");
        assert!(message.contains("refused"), "{message}");
    }
}

#[tokio::test]
async fn domain_verification_refuses_a_private_verification_url() {
    let app = TestApp::spawn_with(|config| {
        config.upstreams.verify_url_template =
            "http://127.0.0.1:9/{domain}/agent-registry-verify.txt".to_owned();
        config.upstreams.verify_dns = false;
    })
    .await;
    let token = app.token("alice", &["agents:write"]).await;
    app.publish(&token, agent_body("com.example.weather")).await;

    let response = app
        .post_empty("/api/agents/com.example.weather/verify", &token)
        .await;

    response.assert_problem(422, "verification_failed");
    assert!(
        response.body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("refused"))
    );
}
