//! Ownership: an agent belongs to the owner of the token that created it.

use serde_json::json;

use crate::helpers::{MASTER_KEY, TestApp, agent_body, package_names, str_at};

#[tokio::test]
async fn another_owner_is_forbidden_to_change_an_agent() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let mallory = app.token("mallory", &[]).await;
    let live = app
        .publish_live(&alice, agent_body("com.example.live"))
        .await;
    let staged = app.publish(&alice, agent_body("com.example.staged")).await;
    let live_path = format!("/api/agents/{}", str_at(&live, "/id"));
    let staged_path = format!("/api/agents/{}", str_at(&staged, "/id"));

    let mut hijack = agent_body("com.example.live");
    hijack["name"] = json!("Hijacked");
    app.put(&live_path, &mallory, hijack)
        .await
        .assert_problem(403, "forbidden");
    app.post_empty(&format!("{live_path}/unpublish"), &mallory)
        .await
        .assert_problem(403, "forbidden");
    app.post_empty(&format!("{staged_path}/go-live"), &mallory)
        .await
        .assert_problem(403, "forbidden");
    for path in [&live_path, &staged_path] {
        app.delete(path, &mallory)
            .await
            .assert_problem(403, "forbidden");
    }

    let after = app.get_as(&live_path, &alice).await;
    assert_eq!(after.body["name"], live["name"]);
    assert_eq!(after.body["state"], "ACTIVE");
    assert_eq!(after.body["revision"], live["revision"]);
    let staged_after = app.get_as(&staged_path, &alice).await;
    assert_eq!(staged_after.body["state"], "STAGE");
}

#[tokio::test]
async fn another_owner_is_forbidden_by_package_name_too() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let mallory = app.token("mallory", &[]).await;
    app.publish_live(&alice, agent_body("com.example.live"))
        .await;

    app.delete("/api/agents/Com.Example.Live", &mallory)
        .await
        .assert_problem(403, "forbidden");
    app.get_as("/api/agents/com.example.live", &mallory)
        .await
        .assert_problem(403, "forbidden");
}

#[tokio::test]
async fn the_master_key_may_act_on_any_agent() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let record = app.publish(&alice, agent_body("com.example.weather")).await;
    let path = format!("/api/agents/{}", str_at(&record, "/id"));

    let read = app.get_as(&path, MASTER_KEY).await;
    assert_eq!(read.status, 200, "{}", read.text);
    let mut body = agent_body("com.example.weather");
    body["name"] = json!("Renamed by the operator");
    let updated = app.put(&path, MASTER_KEY, body).await;
    assert_eq!(updated.status, 200, "{}", updated.text);
    assert_eq!(updated.body["owner"], "alice", "ownership does not move");
    let live = app.post_empty(&format!("{path}/go-live"), MASTER_KEY).await;
    assert_eq!(live.body["state"], "ACTIVE", "{}", live.text);
    let staged = app
        .post_empty(&format!("{path}/unpublish"), MASTER_KEY)
        .await;
    assert_eq!(staged.body["state"], "STAGE", "{}", staged.text);
    let deleted = app.delete(&path, MASTER_KEY).await;
    assert_eq!(deleted.status, 204, "{}", deleted.text);
}

#[tokio::test]
async fn the_master_key_lists_every_owners_agents() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let bob = app.token("bob", &[]).await;
    app.publish(&alice, agent_body("com.example.alices")).await;
    app.publish(&bob, agent_body("com.example.bobs")).await;

    let everything = app.get_as("/api/agents?limit=100", MASTER_KEY).await;
    let bobs = app.get_as("/api/agents", &bob).await;

    let names = package_names(&everything);
    assert!(
        names.contains(&"com.example.alices".to_owned()),
        "{names:?}"
    );
    assert!(names.contains(&"com.example.bobs".to_owned()), "{names:?}");
    assert_eq!(package_names(&bobs), ["com.example.bobs"]);
}

#[tokio::test]
async fn an_owner_cannot_take_over_a_hosted_agent() {
    let (app, alice) = TestApp::spawn_as("alice").await;

    app.post_empty("/api/agents/registry.utility.finance/unpublish", &alice)
        .await
        .assert_problem(403, "forbidden");
    app.delete("/api/agents/registry.utility.wiki", &alice)
        .await
        .assert_problem(403, "forbidden");
    assert_eq!(
        app.get("/public/agents/registry.utility.finance")
            .await
            .status,
        200
    );
}
