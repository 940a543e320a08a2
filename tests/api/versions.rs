//! Agent versions: `1.0.0` by default, the patch bump on updates that name no version, 409 for
//! a lower one, the history at `/public/agents/{id}/versions`, earlier records served as they
//! were, and the version on every entry of the change feed.

use axum::http::{Method, Request, header};
use serde_json::{Value, json};

use crate::helpers::{TestApp, TestResponse, agent_body, str_at};

const PATH: &str = "/api/agents/com.example.weather";
const PUBLIC: &str = "/public/agents/com.example.weather";

/// A publish or update body for `com.example.weather` with `description` and, unless `None`,
/// `version`.
fn body(description: &str, version: Option<&str>) -> Value {
    let mut body = agent_body("com.example.weather");
    body["description"] = json!(description);
    if let Some(version) = version {
        body["version"] = json!(version);
    }
    body
}

/// `(version, is_latest)` of every entry of the agent's version list, in order.
async fn listed(app: &TestApp) -> Vec<(String, bool)> {
    let response = app.get(&format!("{PUBLIC}/versions")).await;
    assert_eq!(response.status, 200, "{}", response.text);
    response.body["versions"]
        .as_array()
        .unwrap_or_else(|| panic!("no versions array: {}", response.text))
        .iter()
        .map(|entry| {
            assert!(entry["published_at"].is_string(), "{entry}");
            (
                str_at(entry, "/version").to_owned(),
                entry["is_latest"].as_bool().expect("is_latest"),
            )
        })
        .collect()
}

/// Each of `paths` is 404 `agent_not_found`.
async fn all_missing(app: &TestApp, paths: &[String]) {
    for path in paths {
        app.get(path).await.assert_problem(404, "agent_not_found");
    }
}

fn versions(entries: &[(&str, bool)]) -> Vec<(String, bool)> {
    entries
        .iter()
        .map(|(version, latest)| ((*version).to_owned(), *latest))
        .collect()
}

/// PUT `body` and assert 200; the owner's record.
async fn update(app: &TestApp, token: &str, body: Value) -> Value {
    let response = app.put(PATH, token, body).await;
    assert_eq!(response.status, 200, "{}", response.text);
    response.body
}

#[tokio::test]
async fn an_agent_published_without_a_version_is_at_1_0_0() {
    let (app, alice) = TestApp::spawn_as("alice").await;

    let published = app.publish_live(&alice, body("Forecasts.", None)).await;

    assert_eq!(published["version"], "1.0.0");
    assert_eq!(app.get(PUBLIC).await.body["version"], "1.0.0");
    assert_eq!(listed(&app).await, versions(&[("1.0.0", true)]));
    let card = app.get("/public/agents/resolve/com.example.weather").await;
    assert_eq!(card.body["version"], "1.0.0");
}

#[tokio::test]
async fn a_change_naming_no_version_or_the_current_one_bumps_the_patch() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    app.publish_live(&alice, body("Forecasts.", Some("1.2.3")))
        .await;

    let omitted = update(&app, &alice, body("Forecasts and tides.", None)).await;
    assert_eq!(omitted["version"], "1.2.4");
    let repeated = update(&app, &alice, body("Tides only.", Some("1.2.4"))).await;
    assert_eq!(repeated["version"], "1.2.5");

    assert_eq!(
        listed(&app).await,
        versions(&[("1.2.5", true), ("1.2.4", false), ("1.2.3", false)])
    );
}

#[tokio::test]
async fn a_higher_version_is_taken_and_a_lower_one_is_a_conflict() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    app.publish_live(&alice, body("Forecasts.", Some("1.2.3")))
        .await;

    let higher = update(&app, &alice, body("Rewritten.", Some("2.0.0"))).await;
    assert_eq!(higher["version"], "2.0.0");
    assert_eq!(higher["revision"], 3);

    for lower in ["1.9.9", "2.0.0-rc.1", "1.2.3"] {
        let refused = app
            .put(PATH, &alice, body("Going back.", Some(lower)))
            .await;
        refused.assert_problem(409, "version_conflict");
        assert!(
            str_at(&refused.body, "/detail").contains(lower),
            "{}",
            refused.text
        );
    }
    let current = app.get(PUBLIC).await;
    assert_eq!(current.body["version"], "2.0.0");
    assert_eq!(current.body["description"], "Rewritten.");
    assert_eq!(current.body["revision"], 3, "refused updates write nothing");
}

#[tokio::test]
async fn an_update_that_changes_nothing_makes_no_version() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let published = app
        .publish_live(&alice, body("Forecasts.", Some("1.2.3")))
        .await;
    let feed_before = app.get("/public/changes").await.body["next_since"].clone();

    for same in [body("Forecasts.", None), body("Forecasts.", Some("1.2.3"))] {
        let response = app.put(PATH, &alice, same).await;
        assert_eq!(response.status, 200, "{}", response.text);
        assert_eq!(response.body["version"], "1.2.3");
        assert_eq!(response.body["revision"], published["revision"]);
        assert_eq!(response.body["updated_at"], published["updated_at"]);
        let etag = format!("\"{}\"", published["revision"]);
        assert_eq!(response.header("etag"), Some(etag.as_str()));
    }

    assert_eq!(listed(&app).await, versions(&[("1.2.3", true)]));
    let feed = app
        .get(&format!("/public/changes?since={feed_before}"))
        .await;
    assert_eq!(feed.body["changes"], json!([]), "nothing was written");
}

#[tokio::test]
async fn an_earlier_version_is_served_as_it_was() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let mut first = body("Forecasts.", Some("1.0.0"));
    first["tags"] = json!(["forecast"]);
    let published = app.publish_live(&alice, first).await;
    let mut second = body("Forecasts and tides.", None);
    second["tags"] = json!(["tides"]);
    let updated = update(&app, &alice, second).await;
    assert_eq!(updated["version"], "1.0.1");

    let old = app.get(&format!("{PUBLIC}/versions/1.0.0")).await;
    assert_eq!(old.status, 200, "{}", old.text);
    assert_eq!(old.body["version"], "1.0.0");
    assert_eq!(old.body["description"], "Forecasts.");
    assert_eq!(old.body["tags"], json!(["forecast"]));
    assert_eq!(old.body["id"], published["id"]);
    assert_eq!(old.body["state"], "ACTIVE");
    assert_eq!(old.body["revision"], 1, "the revision it was written at");
    assert!(old.body.get("verification_token").is_none());

    let current = app.get(PUBLIC).await;
    let latest = app.get(&format!("{PUBLIC}/versions/1.0.1")).await;
    assert_eq!(latest.status, 200, "{}", latest.text);
    assert_eq!(
        latest.body, current.body,
        "the latest version is the record"
    );
    assert_eq!(current.body["description"], "Forecasts and tides.");
    let keys = |response: &TestResponse| {
        let mut keys: Vec<String> = response
            .body
            .as_object()
            .expect("object")
            .keys()
            .cloned()
            .collect();
        keys.sort();
        keys
    };
    assert_eq!(keys(&old), keys(&current), "the same shape");

    // Everything else serves the latest version.
    let card = app.get("/public/agents/resolve/com.example.weather").await;
    assert_eq!(card.body["version"], "1.0.1");
    let found = app.get("/public/agents?q=tides").await;
    assert_eq!(
        found.body["agents"][0]["version"], "1.0.1",
        "{}",
        found.text
    );
    let by_id = app
        .get(&format!(
            "/public/agents/{}/versions",
            str_at(&published, "/id")
        ))
        .await;
    assert_eq!(by_id.status, 200, "{}", by_id.text);
    assert_eq!(by_id.body["versions"][0]["version"], "1.0.1");
}

#[tokio::test]
async fn an_unknown_version_is_404_version_not_found() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    app.publish_live(&alice, body("Forecasts.", None)).await;

    for version in ["9.9.9", "1.0", "latest", "1.0.0%00", "%20"] {
        app.get(&format!("{PUBLIC}/versions/{version}"))
            .await
            .assert_problem(404, "version_not_found");
    }
}

#[tokio::test]
async fn versions_are_public_only_while_the_agent_is_active() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    app.publish(&alice, body("Forecasts.", None)).await;
    let paths = [
        format!("{PUBLIC}/versions"),
        format!("{PUBLIC}/versions/1.0.0"),
    ];
    all_missing(&app, &paths).await;

    let live = app
        .post_empty("/api/agents/com.example.weather/go-live", &alice)
        .await;
    assert_eq!(live.status, 200, "{}", live.text);
    for path in &paths {
        assert_eq!(app.get(path).await.status, 200, "{path}");
    }

    let staged = app
        .post_empty("/api/agents/com.example.weather/unpublish", &alice)
        .await;
    assert_eq!(staged.status, 200, "{}", staged.text);
    all_missing(&app, &paths).await;

    assert_eq!(app.delete(PATH, &alice).await.status, 204);
    all_missing(&app, &paths).await;
    app.get("/public/agents/com.example.nope/versions")
        .await
        .assert_problem(404, "agent_not_found");
}

#[tokio::test]
async fn a_version_that_is_not_semver_is_kept_and_changed_in_place() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    app.publish_live(&alice, body("Forecasts.", Some("beta")))
        .await;

    let changed = update(&app, &alice, body("Forecasts, better.", None)).await;
    assert_eq!(changed["version"], "beta", "no bump is possible");
    assert_eq!(listed(&app).await, versions(&[("beta", true)]));
    let beta = app.get(&format!("{PUBLIC}/versions/beta")).await;
    assert_eq!(beta.body["description"], "Forecasts, better.");

    let named = update(&app, &alice, body("Now stable.", Some("1.0.0"))).await;
    assert_eq!(named["version"], "1.0.0");
    let back = app
        .put(PATH, &alice, body("Back to beta.", Some("beta")))
        .await;
    back.assert_problem(409, "version_conflict");
    assert_eq!(
        listed(&app).await,
        versions(&[("1.0.0", true), ("beta", false)])
    );
}

#[tokio::test]
async fn every_change_in_the_feed_carries_the_version() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let start = app.get("/public/changes?limit=1000").await.body["next_since"].clone();
    app.publish_live(&alice, body("Forecasts.", Some("1.4.0")))
        .await;
    update(&app, &alice, body("Forecasts and tides.", None)).await;
    update(&app, &alice, body("Tides.", Some("2.0.0"))).await;
    assert_eq!(app.delete(PATH, &alice).await.status, 204);

    let feed = app.get(&format!("/public/changes?since={start}")).await;
    assert_eq!(feed.status, 200, "{}", feed.text);
    let entries: Vec<(String, String)> = feed.body["changes"]
        .as_array()
        .expect("changes")
        .iter()
        .map(|entry| {
            (
                str_at(entry, "/kind").to_owned(),
                str_at(entry, "/version").to_owned(),
            )
        })
        .collect();
    let expected: Vec<(String, String)> = [
        ("published", "1.4.0"),
        ("updated", "1.4.1"),
        ("updated", "2.0.0"),
        ("deleted", "2.0.0"),
    ]
    .iter()
    .map(|(kind, version)| ((*kind).to_owned(), (*version).to_owned()))
    .collect();
    assert_eq!(entries, expected, "{}", feed.text);
}

#[tokio::test]
async fn an_update_under_if_match_gets_its_version_too() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    app.publish_live(&alice, body("Forecasts.", Some("0.9.0")))
        .await;
    let request = Request::builder()
        .method(Method::PUT)
        .uri(PATH)
        .header(header::AUTHORIZATION, format!("Bearer {alice}"))
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::IF_MATCH, "\"2\"")
        .body(axum::body::Body::from(body("Changed.", None).to_string()))
        .expect("request");

    let response = app.send(request).await;

    assert_eq!(response.status, 200, "{}", response.text);
    assert_eq!(response.body["version"], "0.9.1");
    assert_eq!(response.header("etag"), Some("\"3\""));
}
