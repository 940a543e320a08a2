//! Several server processes on one database (`TestApp::sibling`): a write through one is
//! visible to searches on the other within 2 s, and token checks always read the database.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::helpers::{TestApp, agent_body, package_names};

/// Within this, a write through one process shows in the other's searches.
const PROPAGATION: Duration = Duration::from_secs(2);

/// Wait until `GET path` on `app` lists exactly `expected`; panics after `PROPAGATION`.
async fn eventually_lists(app: &TestApp, path: &str, expected: &[&str]) -> Duration {
    let started = Instant::now();
    loop {
        let listed = package_names(&app.get(path).await);
        if listed == expected {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < PROPAGATION,
            "{path} still lists {listed:?}, expected {expected:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn writes_through_one_process_reach_the_others_search_within_two_seconds() {
    let writer = TestApp::spawn().await;
    let reader = writer.sibling().await;
    let alice = writer.token("alice", &[]).await;
    let search = "/public/agents?q=quokkatides";

    let mut body = agent_body("com.example.weather");
    body["description"] = json!("Forecasts and quokkatides for any coast.");
    let record = writer.publish(&alice, body).await;
    let id = record["id"].as_str().expect("id");
    assert_eq!(
        reader.get(search).await.body["total"],
        0,
        "STAGE is not public"
    );
    let live = writer
        .post_empty(&format!("/api/agents/{id}/go-live"), &alice)
        .await;
    assert_eq!(live.status, 200);
    eventually_lists(&reader, search, &["com.example.weather"]).await;

    let mut changed = agent_body("com.example.weather");
    changed["description"] = json!("Forecasts for any wombatcity.");
    let updated = writer
        .put("/api/agents/com.example.weather", &alice, changed)
        .await;
    assert_eq!(updated.status, 200, "{}", updated.text);
    eventually_lists(&reader, search, &[]).await;
    eventually_lists(
        &reader,
        "/public/agents?q=wombatcity",
        &["com.example.weather"],
    )
    .await;

    let unpublished = writer
        .post_empty("/api/agents/com.example.weather/unpublish", &alice)
        .await;
    assert_eq!(unpublished.status, 200);
    eventually_lists(&reader, "/public/agents?q=wombatcity", &[]).await;

    writer
        .post_empty("/api/agents/com.example.weather/go-live", &alice)
        .await;
    eventually_lists(
        &reader,
        "/public/agents?q=wombatcity",
        &["com.example.weather"],
    )
    .await;
    let deleted = writer
        .delete("/api/agents/com.example.weather", &alice)
        .await;
    assert_eq!(deleted.status, 204);
    eventually_lists(&reader, "/public/agents?q=wombatcity", &[]).await;
}

#[tokio::test]
async fn a_token_revoked_through_one_process_is_refused_by_the_other_at_once() {
    let first = TestApp::spawn().await;
    let second = first.sibling().await;
    let created = first
        .post(
            "/api/tokens",
            Some(crate::helpers::MASTER_KEY),
            json!({"owner": "alice"}),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.text);
    let secret = created.body["token"].as_str().expect("token");
    let id = created.body["id"].as_str().expect("id");
    assert_eq!(second.get_as("/api/agents", secret).await.status, 200);

    let revoked = first
        .delete(&format!("/api/tokens/{id}"), crate::helpers::MASTER_KEY)
        .await;
    assert!(revoked.status.is_success(), "{}", revoked.text);
    second
        .get_as("/api/agents", secret)
        .await
        .assert_problem(401, "unauthorized");
}

#[tokio::test]
async fn an_update_with_a_stale_revision_through_another_process_is_refused() {
    let first = TestApp::spawn().await;
    let second = first.sibling().await;
    let alice = first.token("alice", &[]).await;
    let record = first
        .publish(&alice, agent_body("com.example.weather"))
        .await;
    let revision = record["revision"].as_i64().expect("revision");

    let mut body = agent_body("com.example.weather");
    body["description"] = json!("First writer.");
    let won = first
        .request(
            axum::http::Method::PUT,
            "/api/agents/com.example.weather",
            Some(&alice),
            Some(body.clone()),
        )
        .await;
    assert_eq!(won.status, 200, "{}", won.text);
    let request = axum::http::Request::builder()
        .method("PUT")
        .uri("/api/agents/com.example.weather")
        .header("authorization", format!("Bearer {alice}"))
        .header("content-type", "application/json")
        .header("if-match", format!("\"{revision}\""))
        .body(axum::body::Body::from(body.to_string()))
        .expect("request");
    second
        .send(request)
        .await
        .assert_problem(412, "precondition_failed");
}
