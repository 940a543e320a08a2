//! The audit log over loopback HTTP: every write with its actor, client and version, refused
//! writes with their reason, who may read which rows, filters and pages.

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{MASTER_KEY, TestApp, agent_body};

async fn audit(app: &TestApp, token: &str, query: &str) -> Vec<Value> {
    let page = app.get_as(&format!("/api/audit{query}"), token).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    page.body["entries"].as_array().expect("entries").clone()
}

fn actions(entries: &[Value]) -> Vec<&str> {
    entries
        .iter()
        .filter_map(|entry| entry["action"].as_str())
        .collect()
}

#[tokio::test]
async fn every_write_is_recorded_with_who_made_it_and_every_refusal_with_why() {
    let app = TestApp::spawn().await.served().await;
    let alice = app.token("alice", &[]).await;
    let mallory = app.token("mallory", &[]).await;
    let agent = app
        .publish_live(&alice, agent_body("com.alice.weather"))
        .await;
    let id = agent["id"].as_str().expect("id").to_owned();
    let mut changed = agent_body("com.alice.weather");
    changed["description"] = json!("Forecasts, now hourly");
    assert_eq!(
        app.put(&format!("/api/agents/{id}"), &alice, changed)
            .await
            .status,
        StatusCode::OK
    );
    // Mallory tries to delete it: refused, and recorded where alice can read it.
    app.delete(&format!("/api/agents/{id}"), &mallory)
        .await
        .assert_problem(403, "forbidden");
    app.act(&agent, "unpublish", &alice).await;

    let mine = audit(&app, &alice, "").await;
    assert_eq!(
        actions(&mine),
        [
            "agent.unpublished",
            &format!("DELETE /api/agents/{id}"),
            "agent.updated",
            "agent.published",
            "agent.created",
            // The master key made alice's token: that concerns her too.
            "token.created",
        ]
    );
    let created = &mine[4];
    assert_eq!(created["actor"], "alice");
    assert_eq!(created["actor_kind"], "token");
    assert!(
        created["token_id"]
            .as_str()
            .is_some_and(|t| t.starts_with("tok_"))
    );
    assert_eq!(created["client"], "127.0.0.1");
    assert_eq!(created["agent_id"], id.as_str());
    assert_eq!(created["package_name"], "com.alice.weather");
    assert_eq!(created["owner"], "alice");
    assert_eq!(created["version"], "1.0.0");
    assert_eq!(created["outcome"], "ok");
    assert_eq!(mine[2]["version"], "1.0.1");
    let refused = &mine[1];
    assert_eq!(refused["actor"], "mallory");
    assert_eq!(refused["outcome"], "refused");
    assert_eq!(refused["owner"], "alice");
    assert!(
        refused["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("forbidden: ")),
        "{refused}"
    );

    // Mallory sees her own refused attempt and her token, nothing of alice's writes.
    assert_eq!(
        actions(&audit(&app, &mallory, "").await),
        [format!("DELETE /api/agents/{id}").as_str(), "token.created"]
    );
    // The master key sees every row, the tokens it made included; filters narrow them.
    let all = audit(&app, MASTER_KEY, "").await;
    assert!(actions(&all).contains(&"token.created"), "{all:?}");
    let tokens: Vec<&Value> = all
        .iter()
        .filter(|e| e["action"] == "token.created")
        .collect();
    assert_eq!(tokens.len(), 2);
    assert_eq!(tokens[0]["actor_kind"], "master");
    assert_eq!(
        audit(&app, MASTER_KEY, "?agent=com.alice.weather")
            .await
            .len(),
        5
    );
    assert_eq!(
        actions(&audit(&app, MASTER_KEY, "?actor=mallory").await).len(),
        1
    );
    // A refused request without credentials is recorded too, as anonymous.
    let anonymous = app
        .post("/api/agents/publish", None, agent_body("com.x.y"))
        .await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
    let newest = &audit(&app, MASTER_KEY, "?limit=1").await[0];
    assert_eq!(newest["actor"], "anonymous");
    assert_eq!(newest["action"], "POST /api/agents/publish");
    assert!(
        newest["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("unauthorized"))
    );
    // Reads are not recorded.
    let before = audit(&app, MASTER_KEY, "").await.len();
    app.get_as("/api/agents", &alice).await;
    app.get("/public/agents").await;
    assert_eq!(audit(&app, MASTER_KEY, "").await.len(), before);
}

#[tokio::test]
async fn an_organisations_admins_read_its_rows_and_pages_go_back_in_time() {
    let app = TestApp::spawn().await;
    let alice = app.token("alice", &[]).await;
    let bob = app.token("bob", &[]).await;
    app.post("/api/orgs", Some(&alice), json!({"name": "acme"}))
        .await;
    app.put(
        "/api/orgs/acme/members/bob",
        &alice,
        json!({"role": "publisher"}),
    )
    .await;
    let mut body = agent_body("com.acme.weather");
    body["org"] = json!("acme");
    let agent = app.publish(&bob, body).await;
    let id = agent["id"].as_str().expect("id");
    let asked = app
        .post(
            &format!("/api/agents/{id}/transfer"),
            Some(&bob),
            json!({"to": "carol"}),
        )
        .await;
    assert_eq!(asked.status, StatusCode::CREATED, "{}", asked.text);

    // The admin reads the organisation's rows, whoever wrote them.
    let rows = audit(&app, &alice, "?org=acme").await;
    assert_eq!(
        actions(&rows),
        [
            "transfer.requested",
            "agent.created",
            "org.member_set",
            "org.created"
        ]
    );
    assert_eq!(rows[1]["actor"], "bob");
    assert_eq!(rows[2]["reason"], "bob is publisher");
    // The publisher reads its own writes, not the organisation's other rows.
    assert_eq!(
        actions(&audit(&app, &bob, "").await),
        ["transfer.requested", "agent.created", "token.created"]
    );

    // Pages: newest first, each cursor going further back, without gaps or repeats.
    let mut seen = Vec::new();
    let mut cursor = String::new();
    loop {
        let page = app
            .get_as(&format!("/api/audit?limit=2{cursor}"), MASTER_KEY)
            .await;
        for entry in page.body["entries"].as_array().expect("entries") {
            seen.push(entry["seq"].as_i64().expect("seq"));
        }
        match page.body["next_cursor"].as_str() {
            Some(next) => cursor = format!("&cursor={next}"),
            None => break,
        }
    }
    let mut sorted = seen.clone();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    sorted.dedup();
    assert_eq!(seen, sorted);
    assert_eq!(
        seen.len(),
        audit(&app, MASTER_KEY, "?limit=500").await.len()
    );

    for bad in ["?since=yesterday", "?cursor=abc", "?cursor=-3"] {
        app.get_as(&format!("/api/audit{bad}"), &alice)
            .await
            .assert_problem(400, "invalid_parameter");
    }
    assert!(
        audit(&app, MASTER_KEY, "?since=2999-01-01T00:00:00Z")
            .await
            .is_empty()
    );
    assert_eq!(app.get("/api/audit").await.status, StatusCode::UNAUTHORIZED);
}
