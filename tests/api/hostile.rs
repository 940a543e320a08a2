//! Hostile clients at the request level: lists too long to read, forged forwarding headers,
//! JSON-RPC batches as amplifiers, and one token sending too much.

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::Request;
use serde_json::{Value, json};
use std::net::SocketAddr;

use crate::helpers::{MASTER_KEY, TestApp, TestResponse, agent_body};

#[tokio::test]
async fn a_hundred_thousand_tags_are_refused_with_one_error_before_any_is_read() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let tags: Vec<String> = (0..100_000).map(|i| format!("t{i}")).collect();
    let mut body = agent_body("com.example.tags");
    body["tags"] = json!(tags);

    let publish = app
        .post("/api/agents/publish", Some(&alice), body.clone())
        .await;
    publish.assert_problem(422, "validation_failed");
    assert_eq!(
        publish.body["errors"],
        json!([{"field": "tags", "message": "at most 128 items (got 100000)"}]),
        "one error for the list, none per item"
    );

    let record = app.publish(&alice, agent_body("com.example.tags")).await;
    let id = record["id"].as_str().expect("id");
    let update = app.put(&format!("/api/agents/{id}"), &alice, body).await;
    update.assert_problem(422, "validation_failed");
    assert_eq!(update.body["errors"].as_array().map(Vec::len), Some(1));
}

#[tokio::test]
async fn lists_of_capabilities_rails_and_filter_values_are_bounded_before_they_are_read() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let capabilities: Vec<Value> = (0..10_000)
        .map(|i| json!({"name": format!("c{i}"), "description": "x"}))
        .collect();
    let mut body = agent_body("com.example.many");
    body["capabilities"] = json!(capabilities);
    let response = app.post("/api/agents/publish", Some(&alice), body).await;
    response.assert_problem(422, "validation_failed");
    assert_eq!(response.body["errors"].as_array().map(Vec::len), Some(1));

    let mut body = agent_body("com.example.rails");
    body["payment"] = json!({"model": "paid", "rails": vec!["base:usdc"; 10_000]});
    let response = app.post("/api/agents/publish", Some(&alice), body).await;
    response.assert_problem(422, "validation_failed");
    assert_eq!(response.body["errors"].as_array().map(Vec::len), Some(1));

    let many: Vec<String> = (0..1_000).map(|i| format!("t{i}")).collect();
    let tags = many.join(",");
    app.get(&format!("/public/agents?tags={tags}"))
        .await
        .assert_problem(400, "invalid_parameter");
    let search = app
        .post(
            "/public/agents/search",
            None,
            json!({"query": "x", "filters": {"tags": many}}),
        )
        .await;
    search.assert_problem(400, "invalid_parameter");

    let pairs = (0..100)
        .map(|i| format!("k{i}=v"))
        .collect::<Vec<_>>()
        .join("&");
    app.get(&format!("/public/agents?{pairs}"))
        .await
        .assert_problem(400, "invalid_parameter");
}

/// `GET path` from the connection peer `peer`, with an `X-Forwarded-For` header.
async fn get_forwarded(app: &TestApp, peer: [u8; 4], forwarded: &str, path: &str) -> TestResponse {
    let mut request = Request::builder()
        .uri(path)
        .header("x-forwarded-for", forwarded)
        .body(Body::empty())
        .expect("request");
    request
        .extensions_mut()
        .insert(ConnectInfo(SocketAddr::from((peer, 40_000))));
    app.send(request).await
}

#[tokio::test]
async fn the_client_ip_is_what_the_trusted_proxy_saw_not_what_the_client_wrote() {
    let app = TestApp::spawn_with(|config| {
        config.rate_limit_per_minute = 1;
        config.rate_limit_burst = 1;
        config.trusted_proxy_hops = 1;
    })
    .await;
    // The proxy runs on the same host: every connection comes from loopback.
    let proxy = [127, 0, 0, 1];

    let first = get_forwarded(&app, proxy, "10.1.1.1, 203.0.113.9", "/public/agents").await;
    assert_eq!(first.status, 200, "{}", first.text);
    // A new forged leftmost entry per request changes nothing: the proxy's entry is the client.
    let forged = get_forwarded(&app, proxy, "10.2.2.2, 203.0.113.9", "/public/agents").await;
    forged.assert_problem(429, "rate_limited");
    // Claiming loopback in the header earns no exemption.
    let claimed = get_forwarded(&app, proxy, "127.0.0.1, 203.0.113.9", "/public/agents").await;
    claimed.assert_problem(429, "rate_limited");
    let spoofed_last = get_forwarded(&app, proxy, "127.0.0.1", "/public/agents").await;
    assert_eq!(
        spoofed_last.status, 200,
        "a different client: 127.0.0.1 as the proxy saw it"
    );
    let again = get_forwarded(&app, proxy, "127.0.0.1", "/public/agents").await;
    again.assert_problem(429, "rate_limited");
    // Another client behind the same proxy has its own budget.
    let other = get_forwarded(&app, proxy, "198.51.100.4", "/public/agents").await;
    assert_eq!(other.status, 200);
}

fn send_message(id: usize) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "SendMessage",
           "params": {"message": {"messageId": format!("m{id}"), "role": "ROLE_USER",
                                  "parts": [{"text": "weather"}]}}})
}

#[tokio::test]
async fn a_json_rpc_batch_over_the_limit_is_refused_whole() {
    let app = TestApp::spawn().await;
    let within: Vec<Value> = (0..20).map(send_message).collect();
    let response = app.post("/a2a/v1", Some(MASTER_KEY), json!(within)).await;
    assert_eq!(
        response.body.as_array().map(Vec::len),
        Some(20),
        "{}",
        response.text
    );

    // As many calls as fit in the 1 MiB body limit.
    let over: Vec<Value> = (0..4_000).map(send_message).collect();
    let response = app.post("/a2a/v1", Some(MASTER_KEY), json!(over)).await;
    assert_eq!(response.status, 200);
    assert_eq!(response.body["error"]["code"], -32600, "{}", response.text);
    assert_eq!(
        response.body["error"]["data"][0]["metadata"]["maxBatch"],
        "20"
    );
    assert!(
        response.text.len() < 1_000,
        "one small error, not 4,000 answers"
    );
}

#[tokio::test]
async fn one_token_sending_too_much_is_rate_limited_on_rest_and_json_rpc() {
    let app = TestApp::spawn_with(|config| {
        config.token_rate_limit_per_minute = 1;
        config.token_rate_limit_burst = 2;
    })
    .await;
    let alice = app.token("alice", &[]).await;
    let bob = app.token("bob", &[]).await;

    for _ in 0..2 {
        assert_eq!(app.get_as("/api/agents", &alice).await.status, 200);
    }
    let limited = app.get_as("/api/agents", &alice).await;
    limited.assert_problem(429, "rate_limited");
    assert!(limited.header("retry-after").is_some());

    let rpc = app.post("/a2a/v1", Some(&alice), send_message(1)).await;
    assert_eq!(rpc.status, 429, "{}", rpc.text);
    assert_eq!(rpc.body["error"]["code"], -32000);
    assert_eq!(rpc.body["error"]["data"][0]["reason"], "RATE_LIMITED");
    assert!(rpc.header("retry-after").is_some());

    assert_eq!(
        app.get_as("/api/agents", &bob).await.status,
        200,
        "per token"
    );
    for _ in 0..5 {
        assert_eq!(
            app.get_as("/api/agents", MASTER_KEY).await.status,
            200,
            "the master key is not limited"
        );
    }
}
