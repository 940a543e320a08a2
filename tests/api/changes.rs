//! The public change feed (`GET /public/changes`): public changes in order, tombstones for
//! agents that leave, paging by `next_since`, and the documented error shape.

use serde_json::{Value, json};

use crate::helpers::{TestApp, agent_body, str_at};

/// Where the feed ends now (the hosted agents registered at start-up are already in it).
async fn feed_end(app: &TestApp) -> i64 {
    let mut since = 0;
    loop {
        let page = app.get(&format!("/public/changes?since={since}")).await;
        assert_eq!(page.status, 200, "{}", page.text);
        let next = page.body["next_since"].as_i64().expect("next_since");
        if next == since {
            return since;
        }
        since = next;
    }
}

/// `(kind, package_name, tombstone)` of every entry of a page.
fn entries(page: &Value) -> Vec<(String, String, bool)> {
    page["changes"]
        .as_array()
        .unwrap_or_else(|| panic!("no changes array: {page}"))
        .iter()
        .map(|entry| {
            (
                str_at(entry, "/kind").to_owned(),
                str_at(entry, "/package_name").to_owned(),
                entry["tombstone"].as_bool().expect("tombstone"),
            )
        })
        .collect()
}

fn entry(kind: &str, package_name: &str, tombstone: bool) -> (String, String, bool) {
    (kind.to_owned(), package_name.to_owned(), tombstone)
}

#[tokio::test]
async fn the_feed_lists_public_changes_in_order_with_tombstones() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let start = feed_end(&app).await;

    let staged = app.publish(&alice, agent_body("com.example.staged")).await;
    let live = app
        .publish_live(&alice, agent_body("com.example.live"))
        .await;
    let mut changed = agent_body("com.example.live");
    changed["description"] = json!("Now with tides.");
    let updated = app
        .put("/api/agents/com.example.live", &alice, changed)
        .await;
    assert_eq!(updated.status, 200, "{}", updated.text);
    let gone = app
        .publish_live(&alice, agent_body("com.example.gone"))
        .await;
    let unpublished = app
        .post_empty("/api/agents/com.example.gone/unpublish", &alice)
        .await;
    assert_eq!(unpublished.status, 200);
    app.publish_live(&alice, agent_body("com.example.deleted"))
        .await;
    let deleted = app.delete("/api/agents/com.example.deleted", &alice).await;
    assert_eq!(deleted.status, 204);
    let staged_deleted = app
        .delete(&format!("/api/agents/{}", str_at(&staged, "/id")), &alice)
        .await;
    assert_eq!(staged_deleted.status, 204);

    let page = app.get(&format!("/public/changes?since={start}")).await;
    assert_eq!(page.status, 200, "{}", page.text);
    assert_eq!(
        entries(&page.body),
        [
            entry("published", "com.example.live", false),
            entry("updated", "com.example.live", false),
            entry("published", "com.example.gone", false),
            entry("unpublished", "com.example.gone", true),
            entry("published", "com.example.deleted", false),
            entry("deleted", "com.example.deleted", true),
        ],
        "the staged agent never appears: {}",
        page.text
    );
    let changes = page.body["changes"].as_array().expect("changes");
    let seqs: Vec<i64> = changes
        .iter()
        .map(|c| c["seq"].as_i64().expect("seq"))
        .collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    assert!(seqs[0] > start);
    assert_eq!(page.body["next_since"], json!(seqs.last().expect("last")));
    assert_eq!(changes[0]["id"], live["id"]);
    assert_eq!(
        changes[0]["agent"]["description"], "Now with tides.",
        "the current record"
    );
    assert!(changes[0]["at"].is_string());
    assert!(
        changes[2]["agent"].is_null(),
        "no record once unpublished: {}",
        changes[2]
    );
    assert_eq!(changes[3]["id"], gone["id"]);
    assert!(changes[3]["agent"].is_null());
    assert!(changes[0]["agent"].get("verification_token").is_none());

    let after = app
        .get(&format!(
            "/public/changes?since={}",
            page.body["next_since"]
        ))
        .await;
    assert_eq!(after.body["changes"], json!([]));
    assert_eq!(after.body["next_since"], page.body["next_since"]);
}

#[tokio::test]
async fn the_feed_pages_by_next_since_without_gaps_or_repeats() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let start = feed_end(&app).await;
    app.publish_many(&alice, "paged", 5, "paging").await;

    let mut since = start;
    let mut seen = Vec::new();
    loop {
        let page = app
            .get(&format!("/public/changes?since={since}&limit=2"))
            .await;
        assert_eq!(page.status, 200, "{}", page.text);
        assert_eq!(page.body["limit"], 2);
        let batch = entries(&page.body);
        assert!(batch.len() <= 2);
        if batch.is_empty() {
            break;
        }
        seen.extend(batch);
        since = page.body["next_since"].as_i64().expect("next_since");
    }
    let expected: Vec<_> = (0..5)
        .map(|i| entry("published", &format!("com.example.paged{i}"), false))
        .collect();
    assert_eq!(seen, expected);
}

#[tokio::test]
async fn bad_feed_parameters_are_a_400_with_the_documented_shape() {
    let app = TestApp::spawn().await;
    for query in [
        "since=abc",
        "since=-1",
        "since=1.5",
        "since=99999999999999999999",
        "limit=ten",
        "since=%00%27%3B--",
    ] {
        app.get(&format!("/public/changes?{query}"))
            .await
            .assert_problem(400, "invalid_parameter");
    }
    let clamped = app.get("/public/changes?limit=100000").await;
    assert_eq!(clamped.status, 200);
    assert_eq!(clamped.body["limit"], 1000);
    let beyond = app.get("/public/changes?since=9223372036854775807").await;
    assert_eq!(beyond.status, 200, "{}", beyond.text);
    assert_eq!(beyond.body["changes"], json!([]));
}
