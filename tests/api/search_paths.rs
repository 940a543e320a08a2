//! One search function behind every path: the same query and filters give the
//! same agents in the same order through GET, POST search, /a2a/discover, /a2a/message and
//! JSON-RPC SendMessage.

use axum::http::{Method, StatusCode};
use serde_json::{Map, Value, json};

use crate::helpers::{MASTER_KEY, TestApp, packages_in};

/// A small but varied catalogue: payment terms, tags, categories, targets.
async fn catalogue(app: &TestApp) {
    let token = app.token("alice", &[]).await;
    let agents = [
        json!({"package_name": "com.coins.spot", "name": "Coin Spot Prices",
               "description": "Current spot price of bitcoin, ether and other crypto assets.",
               "category": "Finance", "target": "Business", "tags": ["crypto", "realtime"],
               "payment": {"model": "paid", "protocols": ["x402"], "rails": ["base:usdc", "polygon:usdc.e"]}}),
        json!({"package_name": "com.coins.history", "name": "Crypto History",
               "description": "Historical candles for crypto markets.",
               "category": "Finance", "tags": ["crypto", "history"],
               "payment": {"model": "freemium", "direction": "both", "protocols": ["lightning-invoice"],
                           "rails": [{"network": "lightning", "asset": "sats"}]}}),
        json!({"package_name": "com.nano.tipbot", "name": "Nano Tip Bot",
               "description": "Sends Nano tips and pays out rewards to users.",
               "category": "Payments", "tags": ["nano", "tips"],
               "payment": {"model": "free", "direction": "outbound", "rails": ["nano:xno"]}}),
        json!({"package_name": "com.weather.now", "name": "Weather Now",
               "description": "Current weather conditions and forecasts for any city.",
               "category": "Weather", "target": "Consumer", "tags": ["forecast", "realtime"],
               "payment": {"model": "free"}}),
        json!({"package_name": "com.stocks.quotes", "name": "Stock Quotes",
               "description": "Real-time stock market quotes and price alerts.",
               "category": "Finance", "target": "Business", "tags": ["stocks", "realtime"],
               "payment": {"model": "paid", "protocols": ["stripe"], "rails": ["base-sepolia:usdc"]}}),
        json!({"package_name": "com.docs.reader", "name": "Doc Reader",
               "description": "Turns web pages and PDFs into clean markdown for LLMs.",
               "category": "Web", "tags": ["markdown", "scraping"]}),
    ];
    for body in agents {
        app.publish_live(&token, body).await;
    }
}

/// A query and filters, expressed once, sent five ways.
pub struct Case {
    pub query: &'static str,
    pub filters: Value,
    pub limit: u64,
}

fn cases() -> Vec<Case> {
    let case = |query, filters, limit| Case {
        query,
        filters,
        limit,
    };
    vec![
        case("crypto price", json!({}), 5),
        case("bitcoin", json!({"payment_rail": "base:usdc"}), 5),
        case(
            "realtime",
            json!({"tags": "realtime", "payment_model": "paid,free"}),
            5,
        ),
        case("", json!({"payment_rail": "usdc"}), 10),
        case("", json!({"payment_direction": "outbound"}), 10),
        case(
            "",
            json!({"payment_protocol": "bolt11", "payment_rail": "lightning:"}),
            10,
        ),
        case(
            "prices",
            json!({"category": "finance", "target": "business"}),
            2,
        ),
        case(
            "weather forecast",
            json!({"verification_level": "unverified"}),
            3,
        ),
        case("markdown", json!({"payment_model": "free"}), 5),
        case(
            "",
            json!({"tags": ["test"], "verification_level": "domain_verified"}),
            5,
        ),
    ]
}

fn package_names(agents: &Value) -> Vec<String> {
    agents
        .as_array()
        .map(|list| {
            list.iter()
                .filter_map(|a| a["package_name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn query_string(case: &Case) -> String {
    let mut pairs = url::form_urlencoded::Serializer::new(String::new());
    pairs.append_pair("q", case.query);
    pairs.append_pair("limit", &case.limit.to_string());
    if let Some(filters) = case.filters.as_object() {
        for (key, value) in filters {
            let value = match value {
                Value::Array(items) => items
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(","),
                other => other.as_str().unwrap_or_default().to_owned(),
            };
            pairs.append_pair(key, &value);
        }
    }
    pairs.finish()
}

pub async fn through_every_path(app: &TestApp, case: &Case) -> Vec<(&'static str, Vec<String>)> {
    let token = MASTER_KEY;
    let get = app
        .get(&format!("/public/agents?{}", query_string(case)))
        .await;
    assert_eq!(get.status, StatusCode::OK, "{}", get.text);

    let body = json!({"query": case.query, "limit": case.limit, "filters": case.filters});
    let post = app.post("/public/agents/search", None, body.clone()).await;
    assert_eq!(post.status, StatusCode::OK, "{}", post.text);

    let discover = app.post("/a2a/discover", Some(token), body).await;
    assert_eq!(discover.status, StatusCode::OK, "{}", discover.text);

    let mut params: Map<String, Value> = case.filters.as_object().cloned().unwrap_or_default();
    params.insert("query".into(), json!(case.query));
    params.insert("limit".into(), json!(case.limit));
    let message = app
        .post(
            "/a2a/message",
            None,
            json!({"to": "registry", "action": "search", "params": params}),
        )
        .await;
    assert_eq!(message.status, StatusCode::OK, "{}", message.text);

    let mut data = case.filters.as_object().cloned().unwrap_or_default();
    data.insert("limit".into(), json!(case.limit));
    let mut parts = vec![json!({"data": data})];
    if !case.query.is_empty() {
        parts.insert(0, json!({"text": case.query}));
    }
    let rpc = app
        .request(
            Method::POST,
            "/a2a/v1",
            Some(token),
            Some(json!({"jsonrpc": "2.0", "id": 7, "method": "SendMessage",
                        "params": {"skill_id": "search_agents",
                                   "message": {"messageId": "m1", "role": "ROLE_USER", "parts": parts}}})),
        )
        .await;
    assert_eq!(rpc.status, StatusCode::OK, "{}", rpc.text);
    let rpc_agents = &rpc.body["result"]["message"]["parts"][0]["data"]["agents"];

    vec![
        ("GET /public/agents", package_names(&get.body["agents"])),
        (
            "POST /public/agents/search",
            package_names(&post.body["agents"]),
        ),
        (
            "POST /a2a/discover",
            package_names(&discover.body["agents"]),
        ),
        ("POST /a2a/message", package_names(&message.body["agents"])),
        ("JSON-RPC SendMessage", package_names(rpc_agents)),
    ]
}

#[tokio::test]
async fn every_search_path_returns_the_same_agents_in_the_same_order() {
    let app = TestApp::spawn().await;
    catalogue(&app).await;
    for case in cases() {
        let results = through_every_path(&app, &case).await;
        let (reference_path, reference) = &results[0];
        assert!(
            !reference.is_empty(),
            "case {:?} {} finds nothing; the table should exercise real matches",
            case.query,
            case.filters
        );
        for (path, found) in &results[1..] {
            assert_eq!(
                found, reference,
                "{path} differs from {reference_path} for query {:?} with {}",
                case.query, case.filters
            );
        }
    }
}

#[tokio::test]
async fn payment_filters_select_exactly_the_matching_agents_on_every_path() {
    let app = TestApp::spawn().await;
    catalogue(&app).await;
    let table = [
        (json!({"payment_rail": "base:usdc"}), vec!["com.coins.spot"]),
        (
            json!({"payment_rail": "usdc"}),
            vec!["com.coins.spot", "com.stocks.quotes"],
        ),
        (json!({"payment_rail": "NANO:XNO"}), vec!["com.nano.tipbot"]),
        (
            json!({"payment_rail": "nano:xno, base:"}),
            vec!["com.coins.spot", "com.nano.tipbot"],
        ),
        (
            json!({"payment_direction": "outbound"}),
            vec!["com.coins.history", "com.nano.tipbot"],
        ),
        (
            json!({"payment_direction": "both"}),
            vec!["com.coins.history"],
        ),
        (
            json!({"payment_model": "paid"}),
            vec!["com.coins.spot", "com.stocks.quotes"],
        ),
        (
            json!({"payment_protocol": "lsat,bolt11"}),
            vec!["com.coins.history"],
        ),
        (
            json!({"payment_rail": "lightning:btc"}),
            vec!["com.coins.history"],
        ),
        (json!({"payment_protocol": "lightning"}), vec![]),
    ];
    for (filters, expected) in table {
        let case = Case {
            query: "",
            filters: filters.clone(),
            limit: 20,
        };
        for (path, mut found) in through_every_path(&app, &case).await {
            found.sort();
            assert_eq!(found, expected, "{path} with {filters}");
        }
    }
}

#[tokio::test]
async fn unknown_closed_enum_filter_values_are_rejected_on_every_path() {
    let app = TestApp::spawn().await;
    for (key, value) in [
        ("payment_model", "gratis"),
        ("payment_direction", "sideways"),
    ] {
        let get = app.get(&format!("/public/agents?{key}={value}")).await;
        get.assert_problem(400, "invalid_parameter");
        let post = app
            .post(
                "/public/agents/search",
                None,
                json!({"filters": {key: value}}),
            )
            .await;
        post.assert_problem(400, "invalid_parameter");
        let discover = app
            .post(
                "/a2a/discover",
                Some(MASTER_KEY),
                json!({"query": "x", "filters": {key: value}}),
            )
            .await;
        discover.assert_problem(400, "invalid_parameter");
        let message = app
            .post(
                "/a2a/message",
                None,
                json!({"to": "registry", "action": "search", "params": {key: value}}),
            )
            .await;
        message.assert_problem(400, "invalid_parameter");
        let rpc = app
            .request(
                Method::POST,
                "/a2a/v1",
                Some(MASTER_KEY),
                Some(json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                            "params": {"message": {"parts": [{"data": {key: value}}]}}})),
            )
            .await;
        assert_eq!(rpc.status, StatusCode::OK);
        assert_eq!(rpc.body["error"]["code"], -32602, "{}", rpc.text);
    }
}

#[tokio::test]
async fn a_filtered_top_five_returns_five_matches_when_five_exist() {
    let (app, token) = TestApp::spawn_as("bulk").await;
    // Twenty strong keyword matches without the rail, then five weaker ones with it.
    for i in 0..20 {
        app.publish_live(
            &token,
            json!({"package_name": format!("com.bulk.strong{i}"), "name": "Weather weather weather",
                   "description": "Weather forecasts, weather maps, weather alerts."}),
        )
        .await;
    }
    for i in 0..5 {
        app.publish_live(
            &token,
            json!({"package_name": format!("com.bulk.paid{i}"), "name": "Helper",
                   "description": "Also mentions weather once.",
                   "payment": {"model": "paid", "rails": ["nano:xno"]}}),
        )
        .await;
    }
    let page = app
        .post(
            "/public/agents/search",
            None,
            json!({"query": "weather", "limit": 5, "filters": {"payment_rail": "nano:"}}),
        )
        .await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    let mut found = package_names(&page.body["agents"]);
    found.sort();
    assert_eq!(
        found,
        (0..5)
            .map(|i| format!("com.bulk.paid{i}"))
            .collect::<Vec<_>>()
    );
    assert_eq!(page.body["total"], 5);
}

/// Three listings of one server (one repository, as aggregators list it) and one other.
async fn publish_duplicates(app: &TestApp) -> String {
    let alice = app.token("alice", &[]).await;
    for (package, name) in [
        ("io.github.acme.mail", "Acme Mail"),
        ("com.aggregator.acme-mail", "acme-mail"),
        ("dev.lists.acme-mail-server", "Acme mail server"),
    ] {
        app.publish_live(
            &alice,
            json!({"package_name": package, "name": name,
                   "description": "Send email from your agent over MCP.",
                   "repository": {"url": "https://github.com/Acme/Mail.git", "source": "github"}}),
        )
        .await;
    }
    app.publish_live(
        &alice,
        json!({"package_name": "com.example.postman", "name": "Postman",
               "description": "Send email and letters."}),
    )
    .await;
    alice
}

#[tokio::test]
async fn duplicates_collapse_to_their_best_member_on_every_search_path_unless_asked() {
    let app = TestApp::spawn().await;
    let alice = publish_duplicates(&app).await;

    let collapsed = app.get("/public/agents?q=send%20email").await;
    let found = packages_in(&collapsed.body);
    assert_eq!(
        found.iter().filter(|p| p.contains("mail")).count(),
        1,
        "one per group: {found:?}"
    );
    assert!(
        found.contains(&"io.github.acme.mail".to_owned()),
        "the first published"
    );
    let total = |body: &Value| body["total"].as_u64().expect("total");
    let all = app
        .get("/public/agents?q=send%20email&collapse=false")
        .await;
    assert_eq!(
        total(&all.body),
        total(&collapsed.body) + 2,
        "the two duplicates come back"
    );
    let posted = app
        .post(
            "/public/agents/search",
            None,
            json!({"query": "send email", "collapse": false}),
        )
        .await;
    assert_eq!(total(&posted.body), total(&all.body));
    let discovered = app
        .post(
            "/a2a/discover",
            Some(&alice),
            json!({"query": "send email"}),
        )
        .await;
    assert_eq!(
        total(&discovered.body),
        total(&collapsed.body),
        "{}",
        discovered.text
    );

    let record = app.get("/public/agents/io.github.acme.mail").await;
    assert_eq!(
        record.body["duplicates"],
        json!(["com.aggregator.acme-mail", "dev.lists.acme-mail-server"])
    );
    app.get("/public/agents?collapse=maybe")
        .await
        .assert_problem(400, "invalid_parameter");

    // Paging a collapsed list never repeats or skips.
    let mut seen = Vec::new();
    let mut path = "/public/agents?limit=1&sort=name".to_owned();
    loop {
        let page = app.get(&path).await;
        seen.extend(packages_in(&page.body));
        match page.body["next_cursor"].as_str() {
            Some(cursor) => path = format!("/public/agents?limit=1&sort=name&cursor={cursor}"),
            None => break,
        }
    }
    assert_eq!(
        seen.iter().filter(|p| p.contains("mail")).count(),
        1,
        "{seen:?}"
    );

    // When the representative leaves, the next best member is shown.
    let id = record.body["id"].as_str().expect("id");
    app.post_empty(&format!("/api/agents/{id}/unpublish"), &alice)
        .await;
    let after = app.get("/public/agents?q=send%20email").await;
    assert!(
        packages_in(&after.body).contains(&"com.aggregator.acme-mail".to_owned()),
        "{:?}",
        packages_in(&after.body)
    );
}

/// Matches are what the query relates to, not every agent near it: a query no agent's words
/// hold finds nothing on any path, and the counts count matches.
#[tokio::test]
async fn a_query_nothing_matches_finds_nothing_on_every_path() {
    let app = TestApp::spawn().await;
    catalogue(&app).await;

    for query in ["zzzqqq", "qwxv zzkj", "xkqz vvqq"] {
        let listed = app
            .get(&format!(
                "/public/agents?q={}&facets=true",
                query.replace(' ', "+")
            ))
            .await;
        assert_eq!(listed.status, 200, "{}", listed.text);
        assert_eq!(listed.body["total"], 0, "{query}: {}", listed.text);
        assert_eq!(packages_in(&listed.body), Vec::<String>::new(), "{query}");
        let facets = listed.body["facets"].as_object().expect("facets");
        for (name, counts) in facets {
            let counted: u64 = counts
                .as_array()
                .map(|values| values.iter().filter_map(|v| v["count"].as_u64()).sum())
                .or_else(|| {
                    counts
                        .as_object()
                        .map(|values| values.values().filter_map(Value::as_u64).sum())
                })
                .unwrap_or(0);
            assert_eq!(counted, 0, "{query}: facet {name} counts {counts}");
        }
        let searched = app
            .post("/public/agents/search", None, json!({"query": query}))
            .await;
        assert_eq!(searched.body["total"], 0, "{query}: {}", searched.text);
        let explored = app
            .post(
                "/ard/explore",
                None,
                json!({"query": {"text": query}, "resultType": {"facets": [{"field": "type"}]}}),
            )
            .await;
        assert_eq!(explored.status, 200, "{}", explored.text);
        assert!(
            !explored.text.contains("\"count\":"),
            "{query}: nothing to count: {}",
            explored.text
        );
    }

    // A word only one agent holds matches that agent; its neighbours by meaning are not
    // matches by themselves with the built-in table.
    let one = app.get("/public/agents?q=pdfs").await;
    assert_eq!(one.body["total"], 1, "{}", one.text);
    assert_eq!(packages_in(&one.body), ["com.docs.reader"]);
}
