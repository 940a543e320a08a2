//! Private agents on every path, over loopback HTTP: five callers (anonymous, an outsider with a token, a viewer of
//! the owning organisation, one of its publishers, the master key) × every read path × a
//! public, an unlisted and a private agent, asserting presence, absence, totals and facet
//! counts; and the change feed, which carries a private agent's changes only to those who may
//! see it.

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::helpers::{MASTER_KEY, TestApp, agent_body, feed_entries as feed};
use crate::mcp::stateless_as;

/// The three agents, told apart by a word each (every path shows it somewhere: package name,
/// MCP name, identifier).
const PUBLIC: &str = "zpubtide";
const UNLISTED: &str = "zunltide";
const PRIVATE: &str = "zprivtide";

fn package(word: &str) -> String {
    format!("com.example.{word}")
}

/// An agent every listing path can show: a tide service that is an MCP server and takes x402.
fn body(word: &str, visibility: &str) -> Value {
    let mut body = agent_body(&package(word));
    body["name"] = json!(format!("Tide tables {word}"));
    body["description"] = json!("Tide tables and moon phases for any harbour.");
    body["category"] = json!("Sea");
    body["tags"] = json!(["tides"]);
    body["visibility"] = json!(visibility);
    body["org"] = json!("acme");
    body["url"] = json!(format!("https://{word}.example.com/a2a/v1"));
    body["remotes"] = json!([{"type": "streamable-http",
                              "url": format!("https://mcp.example.com/{word}")}]);
    body["payment"] = json!({"model": "paid", "protocols": ["x402"], "rails": ["base:usdc"],
                             "pay_to": "0x209693Bc6afc0C5328bA36FaF03C514EF312287C",
                             "price": {"amount": "10000", "asset": "usdc"}});
    body
}

/// Who asks, and whether it may see the organisation's private agents.
struct Who {
    name: &'static str,
    token: Option<String>,
    sees_private: bool,
}

struct World {
    app: TestApp,
    callers: Vec<Who>,
    /// The private agent's id.
    private_id: String,
    publisher: String,
}

/// Organisation `acme` (alice admin, bob publisher, vic viewer) owns the three agents; eve is
/// an outsider with a token of her own.
async fn world() -> World {
    // Over real loopback HTTP, as clients reach it.
    let app = TestApp::spawn().await.served().await;
    let alice = app.token("alice", &[]).await;
    let bob = app.token("bob", &[]).await;
    let vic = app.token("vic", &[]).await;
    let eve = app.token("eve", &[]).await;
    let org = app
        .post("/api/orgs", Some(&alice), json!({"name": "acme"}))
        .await;
    assert_eq!(org.status, StatusCode::CREATED, "{}", org.text);
    for (member, role) in [("bob", "publisher"), ("vic", "viewer")] {
        let set = app
            .put(
                &format!("/api/orgs/acme/members/{member}"),
                &alice,
                json!({"role": role}),
            )
            .await;
        assert_eq!(set.status, StatusCode::OK, "{}", set.text);
    }
    app.publish_live(&bob, body(PUBLIC, "public")).await;
    app.publish_live(&bob, body(UNLISTED, "unlisted")).await;
    let private = app.publish_live(&bob, body(PRIVATE, "private")).await;
    assert_eq!(private["visibility"], "private");
    // Eve's own public agent: an outsider's lists are not empty.
    let mut own = agent_body("com.example.evetide");
    own["description"] = json!("Tide tables for one harbour.");
    own["category"] = json!("Sea");
    own["tags"] = json!(["tides"]);
    app.publish_live(&eve, own).await;
    let who = |name, token: Option<&str>, sees_private| Who {
        name,
        token: token.map(str::to_owned),
        sees_private,
    };
    World {
        callers: vec![
            who("anonymous", None, false),
            who("outsider", Some(&eve), false),
            who("viewer", Some(&vic), true),
            who("publisher", Some(&bob), true),
            who("master", Some(MASTER_KEY), true),
        ],
        private_id: private["id"].as_str().expect("id").to_owned(),
        publisher: bob,
        app,
    }
}

impl World {
    /// The feed's newest position, as the master key reads it (every change is there).
    async fn latest(&self) -> Value {
        let master = &self.callers[4];
        self.get(master, "/public/changes?limit=1000").await.body["next_since"].clone()
    }

    async fn get(&self, who: &Who, path: &str) -> crate::helpers::TestResponse {
        self.app
            .request(Method::GET, path, who.token.as_deref(), None)
            .await
    }

    async fn post(&self, who: &Who, path: &str, body: Value) -> crate::helpers::TestResponse {
        self.app.post(path, who.token.as_deref(), body).await
    }

    /// What each listing path shows `who`: the path and its answer's text.
    async fn listings(&self, who: &Who) -> Vec<(&'static str, String)> {
        let mut seen = Vec::new();
        let mut ok = |path: &'static str, response: crate::helpers::TestResponse| {
            assert_eq!(
                response.status,
                StatusCode::OK,
                "{} {path}: {}",
                who.name,
                response.text
            );
            seen.push((path, response.text));
        };
        ok(
            "GET /public/agents",
            self.get(who, "/public/agents?q=tides&limit=50").await,
        );
        ok(
            "GET /public/agents (no text)",
            self.get(who, "/public/agents?category=sea&limit=50").await,
        );
        ok(
            "POST /public/agents/search",
            self.post(
                who,
                "/public/agents/search",
                json!({"query": "tide tables harbour", "limit": 50}),
            )
            .await,
        );
        ok(
            "POST /a2a/message",
            self.post(
                who,
                "/a2a/message",
                json!({"to": "registry", "action": "search",
                       "params": {"query": "tides", "limit": 20}}),
            )
            .await,
        );
        if who.token.is_some() {
            ok(
                "POST /a2a/discover",
                self.post(who, "/a2a/discover", json!({"query": "tides", "limit": 20}))
                    .await,
            );
            ok(
                "JSON-RPC SendMessage",
                self.post(
                    who,
                    "/a2a/v1",
                    json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                           "params": {"message": {"messageId": "m1", "role": "ROLE_USER",
                                                  "parts": [{"text": "tides"}]}}}),
                )
                .await,
            );
        }
        ok(
            "GET /.well-known/ard.json",
            self.get(who, "/.well-known/ard.json").await,
        );
        ok(
            "GET /.well-known/ai-catalog.json",
            self.get(who, "/.well-known/ai-catalog.json").await,
        );
        ok(
            "POST /ard/search",
            self.post(who, "/ard/search", json!({"query": {"text": "tides"}}))
                .await,
        );
        ok("GET /ard/agents", self.get(who, "/ard/agents").await);
        ok(
            "GET /v0.1/servers",
            self.get(who, "/v0.1/servers?limit=100").await,
        );
        ok(
            "GET /discovery/resources",
            self.get(who, "/discovery/resources").await,
        );
        ok(
            "GET /discovery/search",
            self.get(who, "/discovery/search?query=tides").await,
        );
        ok(
            "GET /public/changes",
            self.get(who, "/public/changes").await,
        );
        ok(
            "MCP search_agents",
            stateless_as(
                &self.app,
                who.token.as_deref(),
                "tools/call",
                json!({"name": "search_agents", "arguments": {"query": "tides", "limit": 20}}),
            )
            .await,
        );
        seen
    }
}

#[tokio::test]
async fn every_listing_path_shows_a_private_agent_to_those_who_may_see_it_and_to_nobody_else() {
    let world = world().await;
    for who in &world.callers {
        for (path, text) in world.listings(who).await {
            assert!(text.contains(PUBLIC), "{} {path}: {text}", who.name);
            assert!(!text.contains(UNLISTED), "{} {path}: {text}", who.name);
            assert_eq!(
                text.contains(PRIVATE),
                who.sees_private,
                "{} {path}: {text}",
                who.name
            );
        }
    }
}

#[tokio::test]
async fn totals_and_facet_counts_count_only_what_the_caller_may_see() {
    let world = world().await;
    let mut explored = Vec::new();
    for who in &world.callers {
        // The public agent and eve's, and the private one to those who see it.
        let expected = if who.sees_private { 3 } else { 2 };
        let page = world
            .get(who, "/public/agents?category=sea&facets=true")
            .await;
        assert_eq!(page.body["total"], expected, "{}: {}", who.name, page.text);
        assert_eq!(
            page.body["facets"]["category"]["Sea"], expected,
            "{}: {}",
            who.name, page.text
        );
        let listed = world.get(who, "/ard/agents").await;
        let ours = listed.body["items"]
            .as_array()
            .expect("items")
            .iter()
            .filter(|item| item.to_string().contains("tide"))
            .count();
        assert_eq!(ours, expected, "{}: {}", who.name, listed.text);
        let explore = world
            .post(
                who,
                "/ard/explore",
                json!({"query": {"text": "tides"},
                       "resultType": {"facets": [{"field": "type"}]}}),
            )
            .await;
        assert_eq!(explore.status, StatusCode::OK, "{}", explore.text);
        let counted: u64 = explore.body["facets"]["type"]["buckets"]
            .as_array()
            .expect("buckets")
            .iter()
            .filter_map(|bucket| bucket["count"].as_u64())
            .sum();
        explored.push((who.sees_private, counted));
    }
    // ARD's explore counts an entry once per value it has: those who see the private agent
    // count more, and each side counts alike.
    let counts = |sees: bool| -> Vec<u64> {
        explored
            .iter()
            .filter(|(s, _)| *s == sees)
            .map(|(_, c)| *c)
            .collect()
    };
    let (seers, others) = (counts(true), counts(false));
    assert!(seers.windows(2).all(|w| w[0] == w[1]), "{explored:?}");
    assert!(others.windows(2).all(|w| w[0] == w[1]), "{explored:?}");
    assert!(seers[0] > others[0], "{explored:?}");
}

#[tokio::test]
async fn a_page_is_full_when_private_agents_are_mixed_in() {
    let world = world().await;
    let bob = world.publisher.clone();
    // More private agents than public ones, all matching: an anonymous page of two is two
    // public agents, and its total counts the public ones only.
    for i in 0..4 {
        world
            .app
            .publish_live(&bob, body(&format!("zhidden{i}"), "private"))
            .await;
    }
    let anonymous = &world.callers[0];
    let page = world
        .get(anonymous, "/public/agents?q=tides&limit=2&collapse=false")
        .await;
    assert_eq!(page.body["agents"].as_array().map(Vec::len), Some(2));
    assert_eq!(page.body["total"], 2, "{}", page.text);
    assert!(page.body["next_cursor"].is_null(), "{}", page.text);
    let member = &world.callers[2];
    let mut seen = Vec::new();
    let mut cursor = String::new();
    loop {
        let page = world
            .get(
                member,
                &format!("/public/agents?q=tides&limit=2&cursor={cursor}"),
            )
            .await;
        assert_eq!(page.body["total"], 7, "{}", page.text);
        for agent in page.body["agents"].as_array().expect("agents") {
            seen.push(agent["package_name"].as_str().expect("name").to_owned());
        }
        match page.body["next_cursor"].as_str() {
            Some(next) => cursor = next.to_owned(),
            None => break,
        }
    }
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 7, "{seen:?}");
}

#[tokio::test]
async fn a_private_agent_resolves_for_those_who_may_see_it_and_is_not_found_for_anyone_else() {
    let world = world().await;
    let private = package(PRIVATE);
    let unlisted = package(UNLISTED);
    let urn = |word: &str| format!("urn:air:example.com:{word}");
    for who in &world.callers {
        let lookups = |name: &str, word: &str| {
            vec![
                format!("/public/agents/{name}"),
                format!("/public/agents/resolve/{name}"),
                format!("/public/agents/{name}/versions"),
                format!("/public/agents/{name}/versions/1.0.0"),
                format!("/ard/agents/{}", urn(word)),
                format!("/v0.1/servers/com.example%2F{word}/versions/latest"),
                format!("/v0.1/servers/com.example%2F{word}/versions"),
                format!("/agents/{name}"),
            ]
        };
        for path in lookups(&unlisted, UNLISTED) {
            let found = world.get(who, &path).await;
            assert_eq!(found.status, StatusCode::OK, "{} {path}", who.name);
        }
        for path in lookups(&private, PRIVATE) {
            let found = world.get(who, &path).await;
            let expected = if who.sees_private {
                StatusCode::OK
            } else {
                StatusCode::NOT_FOUND
            };
            assert_eq!(
                found.status, expected,
                "{} {path}: {}",
                who.name, found.text
            );
            if !who.sees_private {
                // Not found as an unknown agent is: nothing tells that it exists.
                assert!(!found.text.contains("private"), "{} {path}", who.name);
            }
        }
        // The MCP server's record resource and get_agent tool.
        let read = stateless_as(
            &world.app,
            who.token.as_deref(),
            "resources/read",
            json!({"uri": format!("agent://{private}")}),
        )
        .await;
        assert_eq!(
            read.body["error"].is_null(),
            who.sees_private,
            "{}: {}",
            who.name,
            read.text
        );
        let tool = stateless_as(
            &world.app,
            who.token.as_deref(),
            "tools/call",
            json!({"name": "get_agent", "arguments": {"agent": private}}),
        )
        .await;
        assert_eq!(
            tool.body["result"]["isError"].as_bool() != Some(true),
            who.sees_private,
            "{}: {}",
            who.name,
            tool.text
        );
        let resolved = world
            .post(
                who,
                "/a2a/message",
                json!({"to": "registry", "action": "resolve_package",
                       "params": {"package_name": private}}),
            )
            .await;
        let expected = if who.sees_private { 200 } else { 404 };
        assert_eq!(resolved.status.as_u16(), expected, "{}", who.name);
        // The management API: an outsider finds no such agent (404, never 403).
        if let Some(token) = &who.token {
            let managed = world
                .app
                .get_as(&format!("/api/agents/{}", world.private_id), token)
                .await;
            let expected = if who.sees_private { 200 } else { 404 };
            assert_eq!(
                managed.status.as_u16(),
                expected,
                "{}: {}",
                who.name,
                managed.text
            );
        }
    }
}

#[tokio::test]
async fn an_answer_for_a_caller_is_not_kept_by_shared_caches() {
    let world = world().await;
    let path = format!("/public/agents/resolve/{}", package(PUBLIC));
    let anonymous = world.get(&world.callers[0], &path).await;
    assert!(
        anonymous
            .header("cache-control")
            .is_some_and(|value| value.starts_with("public")),
        "{:?}",
        anonymous.header("cache-control")
    );
    assert!(
        anonymous
            .header("vary")
            .is_some_and(|v| v.contains("Authorization"))
    );
    let member = world.get(&world.callers[2], &path).await;
    assert_eq!(member.header("cache-control"), Some("private, no-cache"));
    let manifest = world.get(&world.callers[2], "/.well-known/ard.json").await;
    assert_eq!(manifest.header("cache-control"), Some("private, no-cache"));
}

#[tokio::test]
async fn a_bad_token_on_a_read_path_is_refused_rather_than_read_as_anonymous() {
    let world = world().await;
    let bad = world
        .app
        .request(Method::GET, "/public/agents", Some("ar_not_a_token"), None)
        .await;
    bad.assert_problem(401, "unauthorized");
}

#[tokio::test]
async fn a_visibility_change_reads_in_the_feed_as_each_caller_sees_it() {
    let world = world().await;
    let bob = world.publisher.clone();
    let public = package(PUBLIC);
    let record = world.app.get(&format!("/public/agents/{public}")).await;
    let id = record.body["id"].as_str().expect("id").to_owned();
    let since = world.latest().await;

    // Made private: anonymous readers drop it; the organisation's members keep it.
    let hidden = world
        .app
        .put(&format!("/api/agents/{id}"), &bob, body(PUBLIC, "private"))
        .await;
    assert_eq!(hidden.status, StatusCode::OK, "{}", hidden.text);
    for who in &world.callers {
        let changes = world
            .get(who, &format!("/public/changes?since={since}"))
            .await;
        let expected = if who.sees_private {
            (public.clone(), "updated".to_owned(), true)
        } else {
            (public.clone(), "unpublished".to_owned(), false)
        };
        assert_eq!(
            feed(&changes.body),
            [expected],
            "{}: {}",
            who.name,
            changes.text
        );
    }

    // A change while private reaches its viewers only.
    let since = world.latest().await;
    let mut quiet = body(PUBLIC, "private");
    quiet["description"] = json!("Tide tables, now for members.");
    let updated = world
        .app
        .put(&format!("/api/agents/{id}"), &bob, quiet)
        .await;
    assert_eq!(updated.status, StatusCode::OK, "{}", updated.text);
    for who in &world.callers {
        let changes = world
            .get(who, &format!("/public/changes?since={since}"))
            .await;
        let entries = feed(&changes.body);
        if who.sees_private {
            assert_eq!(
                entries,
                [(public.clone(), "updated".to_owned(), true)],
                "{}",
                who.name
            );
        } else {
            assert!(entries.is_empty(), "{}: {}", who.name, changes.text);
        }
    }

    // Public again: published for everyone.
    let since = world.latest().await;
    let shown = world
        .app
        .put(&format!("/api/agents/{id}"), &bob, body(PUBLIC, "public"))
        .await;
    assert_eq!(shown.status, StatusCode::OK, "{}", shown.text);
    for who in &world.callers {
        let changes = world
            .get(who, &format!("/public/changes?since={since}"))
            .await;
        assert_eq!(
            feed(&changes.body),
            [(public.clone(), "published".to_owned(), true)],
            "{}: {}",
            who.name,
            changes.text
        );
    }
}

#[tokio::test]
async fn a_private_agent_handed_to_another_owner_leaves_the_former_owners_view() {
    let world = world().await;
    let master = &world.callers[4];
    let vic = &world.callers[2];
    let since = world.latest().await;
    // The master key moves it to eve: the organisation's members no longer see it; eve does.
    let moved = world
        .post(
            master,
            &format!("/api/agents/{}/transfer", world.private_id),
            json!({"to": "eve"}),
        )
        .await;
    assert!(moved.status.is_success(), "{}", moved.text);
    let private = package(PRIVATE);
    let gone = world.get(vic, &format!("/public/agents/{private}")).await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
    let changes = world
        .get(vic, &format!("/public/changes?since={since}"))
        .await;
    assert_eq!(
        feed(&changes.body),
        [(private.clone(), "unpublished".to_owned(), false)],
        "{}",
        changes.text
    );
    let eve = &world.callers[1];
    let found = world.get(eve, &format!("/public/agents/{private}")).await;
    assert_eq!(found.status, StatusCode::OK, "{}", found.text);
    let changes = world
        .get(eve, &format!("/public/changes?since={since}"))
        .await;
    assert_eq!(
        feed(&changes.body),
        [(private, "updated".to_owned(), true)],
        "{}",
        changes.text
    );
}
