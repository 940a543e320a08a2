//! Domain verification against a verification file served by a local fake.

use serde_json::json;

use crate::fakes::Fake;
use crate::helpers::{TestApp, agent_body, package_names, str_at};

async fn app_with_fake() -> (TestApp, Fake) {
    let fake = Fake::start().await;
    let app = TestApp::spawn_with(|config| fake.configure(config)).await;
    (app, fake)
}

#[tokio::test]
async fn the_token_in_the_domains_verification_file_verifies_the_agent() {
    let (app, fake) = app_with_fake().await;
    let token = app.token("alice", &["agents:write"]).await;
    let record = app
        .publish_live(&token, agent_body("com.example.weather"))
        .await;
    let secret = str_at(&record, "/verification_token").to_owned();
    assert_eq!(record["verification_level"], "unverified");
    fake.set_verification_file("example.com", &format!("# agent registry\n{secret}\n"));

    let response = app
        .post_empty("/api/agents/com.example.weather/verify", &token)
        .await;

    assert_eq!(response.status, 200, "{}", response.text);
    assert_eq!(response.body["verification_level"], "domain_verified");
    let public = app.get("/public/agents/com.example.weather").await;
    assert_eq!(public.body["verification_level"], "domain_verified");
    let verified = app
        .get("/public/agents?verification_level=domain_verified")
        .await;
    assert!(package_names(&verified).contains(&"com.example.weather".to_owned()));
}

#[tokio::test]
async fn the_txt_record_form_of_the_token_is_accepted_in_the_file() {
    let (app, fake) = app_with_fake().await;
    let token = app.token("alice", &["agents:write"]).await;
    let record = app.publish(&token, agent_body("io.acme.tools")).await;
    let secret = str_at(&record, "/verification_token");
    fake.set_verification_file("acme.io", &format!("agent-registry-verify={secret}"));

    let response = app
        .post_empty("/api/agents/io.acme.tools/verify", &token)
        .await;

    assert_eq!(response.status, 200, "{}", response.text);
    assert_eq!(response.body["verification_level"], "domain_verified");
}

#[tokio::test]
async fn a_missing_or_wrong_file_fails_saying_what_was_checked() {
    let (app, fake) = app_with_fake().await;
    let token = app.token("alice", &["agents:write"]).await;
    app.publish(&token, agent_body("com.example.weather")).await;
    app.publish(&token, agent_body("org.other.agent")).await;
    fake.set_verification_file("other.org", "arv_not_the_right_token\n");

    let missing = app
        .post_empty("/api/agents/com.example.weather/verify", &token)
        .await;
    let wrong = app
        .post_empty("/api/agents/org.other.agent/verify", &token)
        .await;

    missing.assert_problem(422, "verification_failed");
    let detail = missing.body["detail"].as_str().expect("detail");
    assert!(detail.contains("example.com"), "{detail}");
    assert!(
        detail.contains("/verify/example.com/agent-registry-verify.txt"),
        "{detail}"
    );
    assert!(detail.contains("HTTP 404"), "{detail}");
    wrong.assert_problem(422, "verification_failed");
    assert!(
        wrong.body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("does not contain"))
    );
    let record = app.get_as("/api/agents/com.example.weather", &token).await;
    assert_eq!(record.body["verification_level"], "unverified");
}

#[tokio::test]
async fn a_redirecting_or_oversized_verification_file_is_not_accepted() {
    let (app, fake) = app_with_fake().await;
    let token = app.token("alice", &["agents:write"]).await;
    let first = app.publish(&token, agent_body("com.example.weather")).await;
    let second = app.publish(&token, agent_body("net.big.agent")).await;
    let secret = str_at(&first, "/verification_token");
    fake.set_verification_file("elsewhere.com", secret);
    fake.set_verification_file(
        "example.com",
        &format!(
            "redirect:{}",
            fake.url("/verify/elsewhere.com/agent-registry-verify.txt")
        ),
    );
    let padding = "#".repeat(5_000);
    fake.set_verification_file(
        "big.net",
        &format!("{padding}\n{}\n", str_at(&second, "/verification_token")),
    );

    let redirected = app
        .post_empty("/api/agents/com.example.weather/verify", &token)
        .await;
    let oversized = app
        .post_empty("/api/agents/net.big.agent/verify", &token)
        .await;

    redirected.assert_problem(422, "verification_failed");
    assert!(
        redirected.body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("redirect"))
    );
    oversized.assert_problem(422, "verification_failed");
    assert!(
        oversized.body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("4096"))
    );
}

#[tokio::test]
async fn only_the_owner_may_verify_an_agent() {
    let (app, fake) = app_with_fake().await;
    let alice = app.token("alice", &["agents:write"]).await;
    let mallory = app.token("mallory", &["agents:write"]).await;
    let reader = app.token("reader", &["a2a"]).await;
    let record = app.publish(&alice, agent_body("com.example.weather")).await;
    fake.set_verification_file("example.com", str_at(&record, "/verification_token"));

    let anonymous = app
        .post("/api/agents/com.example.weather/verify", None, json!({}))
        .await;
    let other_owner = app
        .post_empty("/api/agents/com.example.weather/verify", &mallory)
        .await;
    let wrong_scope = app
        .post_empty("/api/agents/com.example.weather/verify", &reader)
        .await;
    let unknown = app
        .post_empty("/api/agents/com.example.nope/verify", &alice)
        .await;

    anonymous.assert_problem(401, "unauthorized");
    other_owner.assert_problem(403, "forbidden");
    wrong_scope.assert_problem(403, "forbidden");
    unknown.assert_problem(404, "agent_not_found");
}
