//! Unlisted agents: resolvable by whoever knows them, listed nowhere (every search path,
//! totals and facets, the ARD registry API and manifest, the AI Catalog, the change feed), and
//! visibility changes that travel through the feed as unpublish and publish.

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{TestApp, agent_body, feed_entries, packages_in};
use crate::search_paths::{Case, through_every_path};

fn body(package: &str, visibility: &str) -> Value {
    let mut body = agent_body(package);
    body["description"] = json!("Tide tables and moon phases for any harbour.");
    body["category"] = json!("Sea");
    body["tags"] = json!(["tides"]);
    body["visibility"] = json!(visibility);
    body
}

/// What the listing paths show of the catalogue: every search path, and the ARD and AI
/// Catalog documents, as sets of package names.
async fn listed(app: &TestApp) -> Vec<(&'static str, Vec<String>)> {
    let ours = |names: Vec<String>| -> Vec<String> {
        names
            .into_iter()
            .filter(|name| name.starts_with("com.example."))
            .collect()
    };
    let mut seen: Vec<(&'static str, Vec<String>)> = through_every_path(
        app,
        &Case {
            query: "tides moon harbour",
            filters: json!({}),
            limit: 10,
        },
    )
    .await
    .into_iter()
    .map(|(path, names)| (path, ours(names)))
    .collect();
    let ard = app
        .post("/ard/search", None, json!({"query": {"text": "tides"}}))
        .await;
    assert_eq!(ard.status, StatusCode::OK, "{}", ard.text);
    let names = |text: &str| {
        ["com.example.sun", "com.example.moon"]
            .into_iter()
            .filter(|name| text.contains(name))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    seen.push(("POST /ard/search", names(&ard.text)));
    seen.push(("GET /ard/agents", names(&app.get("/ard/agents").await.text)));
    seen.push((
        "GET /.well-known/ai-catalog.json",
        names(&app.get("/.well-known/ai-catalog.json").await.text),
    ));
    seen.push((
        "GET /.well-known/ard.json",
        names(&app.get("/.well-known/ard.json").await.text),
    ));
    seen
}

/// The feed's entries as package name and kind.
fn feed(changes: &Value) -> Vec<(String, String)> {
    feed_entries(changes)
        .into_iter()
        .map(|(package, kind, _)| (package, kind))
        .collect()
}

#[tokio::test]
async fn an_unlisted_agent_is_resolvable_and_listed_nowhere() {
    let app = TestApp::spawn().await;
    let token = app.token("alice", &[]).await;
    app.publish_live(&token, body("com.example.sun", "public"))
        .await;
    let moon = app
        .publish_live(&token, body("com.example.moon", "unlisted"))
        .await;
    assert_eq!(moon["visibility"], "unlisted");

    for (path, names) in listed(&app).await {
        assert_eq!(names, ["com.example.sun"], "{path}");
    }
    let page = app.get("/public/agents?category=sea&facets=true").await;
    assert_eq!(page.body["total"], 1);
    assert_eq!(packages_in(&page.body), ["com.example.sun"]);
    assert!(!page.text.contains("com.example.moon"));
    let explore = app.post("/ard/explore", None, json!({})).await;
    assert!(!explore.text.contains("\"count\":2"), "{}", explore.text);

    // Whoever knows it resolves it: the record, its card, its versions.
    let record = app.get("/public/agents/com.example.moon").await;
    assert_eq!(record.status, StatusCode::OK, "{}", record.text);
    assert_eq!(record.body["visibility"], "unlisted");
    assert_eq!(
        app.get("/public/agents/resolve/com.example.moon")
            .await
            .status,
        StatusCode::OK
    );
    assert_eq!(
        app.get("/public/agents/com.example.moon/versions")
            .await
            .status,
        StatusCode::OK
    );
    // The feed never heard of it.
    let changes = app.get("/public/changes").await;
    let packages: Vec<String> = feed(&changes.body).into_iter().map(|(p, _)| p).collect();
    assert!(
        packages.contains(&"com.example.sun".to_owned()),
        "{packages:?}"
    );
    assert!(!changes.text.contains("com.example.moon"), "{packages:?}");
}

#[tokio::test]
async fn hiding_and_showing_an_agent_travel_through_the_feed_and_an_update_keeps_it() {
    let app = TestApp::spawn().await;
    let token = app.token("alice", &[]).await;
    let sun = app
        .publish_live(&token, body("com.example.sun", "public"))
        .await;
    let id = sun["id"].as_str().expect("id").to_owned();
    let since = app.get("/public/changes").await.body["next_since"].clone();

    // Hidden: gone from every list, a tombstone in the feed.
    let hidden = app
        .put(
            &format!("/api/agents/{id}"),
            &token,
            body("com.example.sun", "unlisted"),
        )
        .await;
    assert_eq!(hidden.status, StatusCode::OK, "{}", hidden.text);
    assert_eq!(hidden.body["visibility"], "unlisted");
    for (path, names) in listed(&app).await {
        assert!(names.is_empty(), "{path}: {names:?}");
    }
    let changes = app.get(&format!("/public/changes?since={since}")).await;
    assert_eq!(
        feed(&changes.body),
        [("com.example.sun".to_owned(), "unpublished".to_owned())],
        "{}",
        changes.text
    );
    // An update that does not say keeps it unlisted.
    let mut quiet = body("com.example.sun", "public");
    quiet.as_object_mut().expect("object").remove("visibility");
    quiet["description"] = json!("Tide tables, updated quietly.");
    let kept = app.put(&format!("/api/agents/{id}"), &token, quiet).await;
    assert_eq!(kept.body["visibility"], "unlisted", "{}", kept.text);
    let still = app.get(&format!("/public/changes?since={since}")).await;
    assert_eq!(feed(&still.body).len(), 1, "{}", still.text);

    // Shown again: listed, and published in the feed.
    let shown = app
        .put(
            &format!("/api/agents/{id}"),
            &token,
            body("com.example.sun", "PUBLIC "),
        )
        .await;
    assert_eq!(shown.body["visibility"], "public", "{}", shown.text);
    for (path, names) in listed(&app).await {
        assert_eq!(names, ["com.example.sun"], "{path}");
    }
    let last = feed(
        &app.get(&format!("/public/changes?since={since}"))
            .await
            .body,
    );
    assert_eq!(
        last.last().map(|(_, kind)| kind.as_str()),
        Some("published")
    );
}

#[tokio::test]
async fn unknown_visibilities_are_refused_with_a_reason() {
    let app = TestApp::spawn().await;
    let token = app.token("alice", &[]).await;
    for (value, says) in [
        (json!("hidden"), "public, unlisted or private"),
        (json!(3), "must be a string"),
    ] {
        let mut refused = agent_body("com.example.x");
        refused["visibility"] = value.clone();
        let answer = app.try_publish(&token, refused).await;
        answer.assert_problem(422, "validation_failed");
        assert!(answer.text.contains(says), "{value}: {}", answer.text);
    }
}
