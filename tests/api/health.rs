//! Agent health: the field on records and summaries, the `health` filter, and the prober's
//! findings as every surface shows them, with agents served by the local fake.

use std::time::{Duration, Instant};

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::fakes::{Fake, weather_card};
use crate::helpers::{TestApp, agent_body, packages_in};

async fn wait_for_status(app: &TestApp, package: &str, status: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let record = app.get(&format!("/public/agents/{package}")).await;
        assert_eq!(record.status, StatusCode::OK, "{}", record.text);
        if record.body["health"]["status"] == status {
            return record.body;
        }
        assert!(
            Instant::now() < deadline,
            "{package} never became {status}: {}",
            record.body["health"]
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The search page at `path` once it lists exactly `expected`, in order.
async fn wait_for_search(app: &TestApp, path: &str, expected: &[&str]) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let page = app.get(path).await;
        assert_eq!(page.status, StatusCode::OK, "{}", page.text);
        if packages_in(&page.body) == expected {
            return page.body;
        }
        assert!(
            Instant::now() < deadline,
            "{path} never listed {expected:?}: {:?}",
            packages_in(&page.body)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// An A2A agent at its own host whose card is at `card_url`.
fn a2a_agent(package: &str, card_url: &str) -> Value {
    let mut body = agent_body(package);
    body["manifest_url"] = json!(card_url);
    body["url"] = json!(format!("https://{package}/a2a"));
    body
}

#[tokio::test]
async fn records_and_summaries_say_unknown_until_probed_and_the_filter_is_checked() {
    let app = TestApp::spawn().await;
    let token = app.token("alice", &["agents:write"]).await;
    let mut body = agent_body("com.example.quiet");
    body["url"] = json!("https://quiet.example.com/a2a");
    app.publish_live(&token, body).await;
    let record = app.get("/public/agents/com.example.quiet").await;
    let health = &record.body["health"];
    assert_eq!(health["status"], "unknown");
    assert_eq!(health["checked_at"], Value::Null);
    assert_eq!(health["consecutive_failures"], 0);
    assert_eq!(health["uptime_7d"], Value::Null);
    let listed = app.get("/public/agents?q=quiet").await;
    assert_eq!(listed.body["agents"][0]["health"]["status"], "unknown");
    let unknown = app.get("/public/agents?health=unknown").await;
    assert!(packages_in(&unknown.body).contains(&"com.example.quiet".to_owned()));
    let up = app.get("/public/agents?health=UP,%20down").await;
    assert_eq!(up.status, StatusCode::OK, "{}", up.text);
    assert_eq!(up.body["total"], 0);
    let posted = app
        .post(
            "/public/agents/search",
            None,
            json!({"filters": {"health": ["up", "not_conformant"]}}),
        )
        .await;
    assert_eq!(posted.status, StatusCode::OK, "{}", posted.text);
    assert_eq!(posted.body["total"], 0);
    for bad in [
        "/public/agents?health=sideways",
        "/public/agents?health=up,maybe",
    ] {
        let refused = app.get(bad).await;
        refused.assert_problem(400, "invalid_parameter");
        assert!(
            refused.body["detail"]
                .as_str()
                .unwrap_or("")
                .contains("health"),
            "{}",
            refused.text
        );
    }
    let wrong_type = app
        .post(
            "/public/agents/search",
            None,
            json!({"filters": {"health": 3}}),
        )
        .await;
    wrong_type.assert_problem(400, "invalid_parameter");
}

#[tokio::test]
async fn probed_agents_show_their_health_in_every_view() {
    let fake = Fake::start().await;
    let app = TestApp::spawn_with(|config| {
        fake.configure(config);
        config.probe.probe_interval_secs = 1;
        config.probe.probe_timeout_secs = 2;
    })
    .await;
    let token = app.token("alice", &["agents:write"]).await;
    let card_url = fake.set_document("live-card", weather_card("https://weather.example.com/a2a"));
    app.publish_live(&token, a2a_agent("com.example.live", &card_url))
        .await;
    let broken = a2a_agent("com.example.broken", &fake.url("/docs/no-such-card"));
    app.publish_live(&token, broken).await;
    let mut offline = agent_body("com.example.offline");
    offline["remotes"] = json!([{"type": "streamable-http", "url": "http://127.0.0.1:9/mcp"}]);
    app.publish_live(&token, offline).await;

    let record = wait_for_status(&app, "com.example.live", "up").await;
    let health = &record["health"];
    assert_eq!(health["consecutive_failures"], 0);
    assert_eq!(health["uptime_7d"], 1.0);
    assert_eq!(health["uptime_30d"], 1.0);
    assert_eq!(health["probe"], "a2a_card");
    assert_eq!(health["target"], card_url.as_str());
    assert!(health["checked_at"].is_string() && health["last_ok_at"].is_string());
    assert!(health["latency_ms"].is_u64());
    let broken = wait_for_status(&app, "com.example.broken", "not_conformant").await;
    assert!(
        broken["health"]["detail"]
            .as_str()
            .unwrap_or("")
            .contains("404"),
        "{}",
        broken["health"]
    );
    let offline = wait_for_status(&app, "com.example.offline", "down").await;
    assert_eq!(offline["health"]["probe"], "mcp_streamable_http");
    assert_eq!(offline["health"]["last_ok_at"], Value::Null);

    // Search filters and shows it. The prober stores a finding before the search index takes
    // it, so a record can show it a moment before searches do.
    let up = wait_for_search(&app, "/public/agents?health=up", &["com.example.live"]).await;
    assert_eq!(up["agents"][0]["health"]["status"], "up");
    wait_for_search(
        &app,
        "/public/agents?health=down,not_conformant&sort=name",
        &["com.example.broken", "com.example.offline"],
    )
    .await;

    // The card carries it in the registry's health extension.
    let card = app.get("/public/agents/resolve/com.example.live").await;
    assert_eq!(card.status, StatusCode::OK);
    let extensions = card.body["capabilities"]["extensions"]
        .as_array()
        .expect("extensions");
    let health = extensions
        .iter()
        .find(|e| e["uri"] == "https://a2a-registry.org/extensions/health/v1")
        .expect("health extension");
    assert_eq!(health["params"]["health"]["status"], "up");

    // Metrics count agents by status and probes by outcome. (The exporter is shared by every
    // app in this test process, so the gauges' values are checked at their source.)
    let metrics = app.get("/metrics").await.text;
    for series in [
        "registry_agents_by_health{status=\"up\"}",
        "registry_agents_by_health{status=\"not_conformant\"}",
        "registry_probes_total{status=\"down\"}",
        "registry_probe_duration_seconds",
    ] {
        assert!(metrics.contains(series), "{series} in {metrics}");
    }
    let counts = app.state.registry.health_counts();
    let count = |status: &str| {
        counts
            .iter()
            .find(|(s, _)| s.as_str() == status)
            .map_or(0, |(_, n)| *n)
    };
    assert_eq!(
        (count("up"), count("down"), count("not_conformant")),
        (1, 1, 1)
    );
}

#[tokio::test]
async fn processes_sharing_a_database_probe_each_agent_once_per_round() {
    let fake = Fake::start().await;
    let app = TestApp::spawn_with(|config| {
        fake.configure(config);
        config.probe.probe_interval_secs = 600;
        // Generous: a loaded machine must not turn a slow answer into `down`.
        config.probe.probe_timeout_secs = 10;
    })
    .await;
    let sibling = app.sibling().await;
    let token = app.token("alice", &["agents:write"]).await;
    let names: Vec<String> = (0..6).map(|n| format!("com.example.shared{n}")).collect();
    for (n, name) in names.iter().enumerate() {
        let card = fake.set_document(
            &format!("shared-{n}"),
            weather_card("https://weather.example.com/a2a"),
        );
        app.publish_live(&token, a2a_agent(name, &card)).await;
    }
    for name in &names {
        wait_for_status(&app, name, "up").await;
    }
    // Both probers have had time to look at the schedule again.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let hits: Vec<usize> = (0..6)
        .map(|n| fake.hits(&format!("/docs/shared-{n}")))
        .collect();
    assert_eq!(
        hits,
        vec![1; 6],
        "each agent was probed once, by one of the two processes"
    );
    drop(sibling);
}

#[tokio::test]
async fn the_probe_message_is_validated_and_shown_to_its_owner_only() {
    let app = TestApp::spawn().await;
    let token = app.token("alice", &["agents:write"]).await;
    for (value, why) in [
        (json!("x".repeat(501)), "at most 500"),
        (json!(42), "must be a string"),
        (json!("a\u{0}b"), "NUL"),
    ] {
        let mut body = agent_body("com.example.pinged");
        body["probe_message"] = value;
        body["url"] = json!(7);
        let response = app.post("/api/agents/publish", Some(&token), body).await;
        response.assert_problem(422, "validation_failed");
        let errors = response.body["errors"].as_array().expect("errors");
        let fields: Vec<&str> = errors.iter().filter_map(|e| e["field"].as_str()).collect();
        assert!(
            fields.contains(&"probe_message") && fields.contains(&"url"),
            "{fields:?}"
        );
        let message = errors
            .iter()
            .find(|e| e["field"] == "probe_message")
            .and_then(|e| e["message"].as_str())
            .unwrap_or("");
        assert!(message.contains(why), "{message}");
    }
    let mut body = agent_body("com.example.pinged");
    body["probe_message"] = json!("  ping  ");
    body["url"] = json!("https://pinged.example.com/a2a");
    let record = app.publish_live(&token, body).await;
    assert_eq!(
        record["probe_message"], "ping",
        "trimmed, in the owner's view"
    );
    let public = app.get("/public/agents/com.example.pinged").await;
    assert_eq!(
        public.body.get("probe_message"),
        None,
        "not in the public record"
    );
}

#[tokio::test]
async fn an_agent_without_an_endpoint_is_not_probed_and_says_why_everywhere() {
    let fake = Fake::start().await;
    let app = TestApp::spawn_with(|config| {
        fake.configure(config);
        config.probe.probe_interval_secs = 1;
        config.probe.probe_timeout_secs = 2;
    })
    .await;
    let token = app.token("alice", &["agents:write"]).await;
    // An npm MCP server whose only URL is its repository page: nothing of its publisher's runs.
    let mut package = agent_body("io.github.acme.translate");
    package["manifest_url"] = json!(fake.url("/pages/acme-translate"));
    package["repository"] = json!({"url": "https://github.com/acme/translate", "source": "github"});
    package["packages"] = json!([{"registry_type": "npm", "identifier": "acme-translate-mcp",
        "transport": {"type": "stdio"}}]);
    app.publish_live(&token, package).await;
    let mut described = agent_body("com.example.described");
    described["manifest_url"] = json!(fake.url("/pages/described"));
    app.publish_live(&token, described).await;
    let card_url = fake.set_document(
        "probed-card",
        weather_card("https://weather.example.com/a2a"),
    );
    app.publish_live(&token, a2a_agent("com.example.probed", &card_url))
        .await;

    wait_for_status(&app, "com.example.probed", "up").await;
    let record = app.get("/public/agents/io.github.acme.translate").await;
    let health = &record.body["health"];
    assert_eq!(health["status"], "not_probed", "{health}");
    assert_eq!(health["detail"], "package only");
    assert_eq!(health["checked_at"], Value::Null);
    let described = app.get("/public/agents/com.example.described").await;
    assert_eq!(described.body["health"]["status"], "not_probed");
    assert_eq!(described.body["health"]["detail"], "no endpoint");
    assert_eq!(
        fake.hits("/pages/acme-translate") + fake.hits("/pages/described"),
        0,
        "a repository or listing page is never fetched as a card"
    );

    let page = app
        .get("/public/agents?health=not_probed&sort=name&facets=true&collapse=false")
        .await;
    assert_eq!(
        packages_in(&page.body),
        ["com.example.described", "io.github.acme.translate"]
    );
    assert_eq!(page.body["agents"][1]["health"]["detail"], "package only");
    let all = app.get("/public/agents?facets=true&collapse=false").await;
    assert_eq!(
        all.body["facets"]["health"]["not_probed"], 2,
        "{}",
        all.text
    );
    assert_eq!(all.body["facets"]["health"]["up"], 1);
    let card = app
        .get("/public/agents/resolve/io.github.acme.translate")
        .await;
    let extensions = card.body["capabilities"]["extensions"]
        .as_array()
        .expect("extensions");
    let extension = extensions
        .iter()
        .find(|e| e["uri"] == "https://a2a-registry.org/extensions/health/v1")
        .expect("health extension");
    assert_eq!(extension["params"]["health"]["status"], "not_probed");
    let counts = app.state.registry.health_counts();
    assert!(
        counts
            .iter()
            .any(|(status, n)| status.as_str() == "not_probed" && *n == 2)
    );

    // An endpoint added later is probed, and removed again it is not_probed at once.
    let mut moved = a2a_agent("com.example.described", &card_url);
    moved["manifest_url"] = json!(card_url);
    let updated = app
        .put("/api/agents/com.example.described", &token, moved)
        .await;
    assert_eq!(updated.status, StatusCode::OK, "{}", updated.text);
    wait_for_status(&app, "com.example.described", "up").await;
    let mut bare = agent_body("com.example.described");
    bare["manifest_url"] = json!(fake.url("/pages/described"));
    let updated = app
        .put("/api/agents/com.example.described", &token, bare)
        .await;
    assert_eq!(updated.status, StatusCode::OK, "{}", updated.text);
    assert_eq!(updated.body["health"]["status"], "not_probed");
    wait_for_search(
        &app,
        "/public/agents?health=not_probed&sort=name&collapse=false",
        &["com.example.described", "io.github.acme.translate"],
    )
    .await;
}
