//! API tokens and scopes.

use agent_registry::auth::{Scope, hash_secret};
use agent_registry::store::TokenRecord;
use agent_registry::timestamp::Timestamp;
use axum::http::Method;
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::helpers::{MASTER_KEY, TestApp, agent_body, error_fields, str_at};

fn parse_time(text: &str) -> OffsetDateTime {
    OffsetDateTime::parse(text, &Rfc3339).unwrap_or_else(|_| panic!("not RFC 3339: {text}"))
}

#[tokio::test]
async fn a_created_token_is_shown_once_with_its_id_owner_scopes_and_expiry() {
    let app = TestApp::spawn().await;

    let response = app
        .post(
            "/api/tokens",
            Some(MASTER_KEY),
            json!({"owner": "alice", "scopes": ["agents:write", "a2a", "playground"],
                   "expires_in_days": 90}),
        )
        .await;

    assert_eq!(response.status, 201, "{}", response.text);
    let body = &response.body;
    assert!(str_at(body, "/token").starts_with("ar_"), "{body}");
    assert!(str_at(body, "/id").starts_with("tok_"), "{body}");
    assert_eq!(body["owner"], "alice");
    let mut scopes: Vec<&str> = body["scopes"]
        .as_array()
        .expect("scopes")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    scopes.sort_unstable();
    assert_eq!(scopes, ["a2a", "agents:write", "playground"]);
    let in_days =
        (parse_time(str_at(body, "/expires_at")) - OffsetDateTime::now_utc()).whole_days();
    assert!((89..=90).contains(&in_days), "expires in {in_days} days");
}

#[tokio::test]
async fn a_token_without_an_expiry_never_expires() {
    let app = TestApp::spawn().await;

    let response = app
        .post("/api/tokens", Some(MASTER_KEY), json!({"owner": "alice"}))
        .await;

    assert_eq!(response.status, 201, "{}", response.text);
    assert_eq!(response.body["expires_at"], Value::Null);
}

#[tokio::test]
async fn a_token_with_no_scopes_listed_gets_all_three() {
    let app = TestApp::spawn().await;

    for body in [
        json!({"owner": "alice"}),
        json!({"owner": "alice", "scopes": []}),
    ] {
        let response = app.post("/api/tokens", Some(MASTER_KEY), body).await;
        let mut scopes: Vec<&str> = response.body["scopes"]
            .as_array()
            .expect("scopes")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        scopes.sort_unstable();
        assert_eq!(scopes, ["a2a", "agents:write", "playground"]);
    }
    let token = app.token("alice", &[]).await;
    app.publish(&token, agent_body("com.example.weather")).await;
}

#[tokio::test]
async fn only_the_master_key_creates_tokens() {
    let (app, alice) = TestApp::spawn_as("alice").await;

    app.post("/api/tokens", Some(&alice), json!({"owner": "alice"}))
        .await
        .assert_problem(403, "forbidden");
    app.post("/api/tokens", None, json!({"owner": "alice"}))
        .await
        .assert_problem(401, "unauthorized");
}

#[tokio::test]
async fn an_invalid_token_request_names_every_bad_field() {
    let app = TestApp::spawn().await;

    let response = app
        .post(
            "/api/tokens",
            Some(MASTER_KEY),
            json!({"owner": "not an owner!", "scopes": ["agents:write", "admin"],
                   "expires_in_days": 0}),
        )
        .await;

    response.assert_problem(422, "validation_failed");
    assert_eq!(
        error_fields(&response),
        ["expires_in_days", "owner", "scopes[1]"]
    );
}

#[tokio::test]
async fn listing_tokens_never_shows_secrets_or_hashes() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let bob = app.token("bob", &["a2a"]).await;

    let all = app.get_as("/api/tokens", MASTER_KEY).await;
    let own = app.get_as("/api/tokens", &alice).await;

    assert_eq!(all.status, 200, "{}", all.text);
    for secret in [&alice, &bob] {
        for listing in [&all, &own] {
            assert!(!listing.text.contains(secret.as_str()));
            assert!(!listing.text.contains(&hash_secret(secret)));
        }
    }
    let tokens = all.body["tokens"].as_array().expect("tokens");
    assert_eq!(tokens.len(), 2);
    for token in tokens {
        assert!(str_at(token, "/id").starts_with("tok_"));
        assert!(token.get("token").is_none() && token.get("secret_hash").is_none());
        assert!(token["owner"].is_string() && token["scopes"].is_array());
    }
    let own_tokens = own.body["tokens"].as_array().expect("tokens");
    assert_eq!(own_tokens.len(), 1);
    assert_eq!(own_tokens[0]["owner"], "alice");
}

#[tokio::test]
async fn a_revoked_token_is_unauthorized_immediately() {
    let app = TestApp::spawn().await;
    let created = app
        .post("/api/tokens", Some(MASTER_KEY), json!({"owner": "alice"}))
        .await;
    let secret = str_at(&created.body, "/token");
    let id = str_at(&created.body, "/id");
    app.publish(secret, agent_body("com.example.weather")).await;

    let revoked = app.delete(&format!("/api/tokens/{id}"), MASTER_KEY).await;

    assert_eq!(revoked.status, 204, "{}", revoked.text);
    let response = app.get_as("/api/agents", secret).await;
    response.assert_problem(401, "unauthorized");
    assert_eq!(response.header("www-authenticate"), Some("Bearer"));
    app.try_publish(secret, agent_body("com.example.other"))
        .await
        .assert_problem(401, "unauthorized");
    let listed = app.get_as("/api/tokens", MASTER_KEY).await;
    assert!(
        listed.body["tokens"][0]["revoked_at"].is_string(),
        "{}",
        listed.text
    );
}

#[tokio::test]
async fn an_owner_revokes_their_own_tokens_only() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let bob = app.token("bob", &[]).await;
    let tokens = app.get_as("/api/tokens", MASTER_KEY).await;
    let id_of = |owner: &str| {
        tokens.body["tokens"]
            .as_array()
            .expect("tokens")
            .iter()
            .find(|token| token["owner"] == owner)
            .and_then(|token| token["id"].as_str())
            .expect("token id")
            .to_owned()
    };

    app.delete(&format!("/api/tokens/{}", id_of("bob")), &alice)
        .await
        .assert_problem(404, "token_not_found");
    let own = app
        .delete(&format!("/api/tokens/{}", id_of("alice")), &alice)
        .await;

    assert_eq!(own.status, 204, "{}", own.text);
    assert_eq!(app.get_as("/api/agents", &bob).await.status, 200);
    app.get_as("/api/agents", &alice)
        .await
        .assert_problem(401, "unauthorized");
}

#[tokio::test]
async fn revoking_an_unknown_or_revoked_token_is_not_found() {
    let app = TestApp::spawn().await;
    let created = app
        .post("/api/tokens", Some(MASTER_KEY), json!({"owner": "alice"}))
        .await;
    let path = format!("/api/tokens/{}", str_at(&created.body, "/id"));
    assert_eq!(app.delete(&path, MASTER_KEY).await.status, 204);

    app.delete(&path, MASTER_KEY)
        .await
        .assert_problem(404, "token_not_found");
    app.delete("/api/tokens/tok_nope", MASTER_KEY)
        .await
        .assert_problem(404, "token_not_found");
}

#[tokio::test]
async fn an_expired_token_is_unauthorized() {
    let app = TestApp::spawn().await;
    let secret = "ar_expired-test-secret";
    let an_hour_ago = Timestamp::from_micros(Timestamp::now().micros() - 3_600_000_000);
    app.state
        .store
        .insert_token(&TokenRecord {
            id: "tok_expired".to_owned(),
            owner: "alice".to_owned(),
            scopes: Scope::ALL.to_vec(),
            secret_hash: hash_secret(secret),
            created_at: Timestamp::from_micros(an_hour_ago.micros() - 3_600_000_000),
            expires_at: Some(an_hour_ago),
            revoked_at: None,
        })
        .await
        .expect("token stored");

    let response = app.get_as("/api/agents", secret).await;

    response.assert_problem(401, "unauthorized");
    assert_eq!(response.header("www-authenticate"), Some("Bearer"));
    app.try_publish(secret, agent_body("com.example.weather"))
        .await
        .assert_problem(401, "unauthorized");
}

#[tokio::test]
async fn missing_malformed_and_unknown_credentials_are_unauthorized() {
    let app = TestApp::spawn().await;
    let basic = axum::http::Request::builder()
        .uri("/api/agents")
        .header("authorization", "Basic YWxpY2U6c2VjcmV0")
        .body(axum::body::Body::empty())
        .expect("request");

    let responses = [
        app.request(Method::GET, "/api/agents", None, None).await,
        app.get_as("/api/agents", "ar_not-a-real-token").await,
        app.get_as("/api/agents", "wrong-master-key").await,
        app.send(basic).await,
    ];

    for response in responses {
        response.assert_problem(401, "unauthorized");
        assert_eq!(response.header("www-authenticate"), Some("Bearer"));
    }
}

#[tokio::test]
async fn a_token_without_agents_write_is_forbidden_on_management() {
    let (app, owner) = TestApp::spawn_as("alice").await;
    let reader = app.token("alice", &["a2a", "playground"]).await;
    let record = app
        .publish_live(&owner, agent_body("com.example.weather"))
        .await;
    let path = format!("/api/agents/{}", str_at(&record, "/id"));

    let responses = [
        app.try_publish(&reader, agent_body("com.example.other"))
            .await,
        app.get_as("/api/agents", &reader).await,
        app.get_as(&path, &reader).await,
        app.put(&path, &reader, agent_body("com.example.weather"))
            .await,
        app.post_empty(&format!("{path}/unpublish"), &reader).await,
        app.post_empty(&format!("{path}/go-live"), &reader).await,
        app.delete(&path, &reader).await,
    ];

    for response in responses {
        response.assert_problem(403, "forbidden");
    }
    assert_eq!(
        app.get(&format!("/public/agents/{}", str_at(&record, "/id")))
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn a_token_with_agents_write_alone_may_manage_agents() {
    let app = TestApp::spawn().await;
    let writer = app.token("alice", &["agents:write"]).await;

    let record = app
        .publish_live(&writer, agent_body("com.example.weather"))
        .await;

    assert_eq!(record["state"], "ACTIVE");
}
