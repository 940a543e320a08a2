//! Facet counts on search answers (`facets=true`): counted over every match after filters and
//! duplicate collapsing, the same set `total` counts, on the REST search paths and the JSON
//! ones that share the search body.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::helpers::TestApp;

/// Eight agents of alice's (unverified; the hosted agents are domain-verified, so
/// `verification_level=unverified` leaves exactly these), two of them one server listed twice.
async fn catalogue(app: &TestApp) {
    let alice = app.token("alice", &[]).await;
    let agents = [
        json!({"package_name": "com.coins.spot", "name": "Coin Spot", "description": "Spot prices of crypto assets.",
               "category": "Finance", "tags": ["crypto", "realtime"],
               "payment": {"model": "paid", "protocols": ["x402"], "rails": ["base:usdc"]}}),
        json!({"package_name": "com.coins.history", "name": "Coin History", "description": "Historical candles for crypto markets.",
               "category": "finance", "tags": ["crypto", "history"],
               "payment": {"model": "freemium", "protocols": ["x402"], "rails": ["base:usdc"]}}),
        json!({"package_name": "com.nano.tips", "name": "Nano Tips", "description": "Sends Nano tips to users.",
               "category": "Payments", "tags": ["nano"], "payment": {"model": "free"}}),
        json!({"package_name": "com.weather.now", "name": "Weather Now", "description": "Current weather and realtime forecasts.",
               "category": "Weather", "tags": ["forecast", "realtime"], "payment": {"model": "free"}}),
        json!({"package_name": "com.stocks.quotes", "name": "Stock Quotes", "description": "Realtime stock quotes.",
               "category": "Finance", "tags": ["stocks", "realtime"],
               "payment": {"model": "paid", "protocols": ["x402"], "rails": ["base:usdc"]}}),
        json!({"package_name": "com.docs.reader", "name": "Doc Reader", "description": "Web pages as markdown.",
               "tags": ["markdown"]}),
        json!({"package_name": "io.github.acme.mail", "name": "Acme Mail", "description": "Send email over MCP.",
               "category": "Email", "tags": ["email"], "payment": {"model": "free"},
               "repository": {"url": "https://github.com/acme/mail", "source": "github"}}),
        json!({"package_name": "com.mirror.acme-mail", "name": "acme-mail", "description": "Send email over MCP.",
               "category": "Email", "tags": ["email"], "payment": {"model": "free"},
               "repository": {"url": "https://github.com/Acme/Mail.git", "source": "github"}}),
    ];
    for body in agents {
        app.publish_live(&alice, body).await;
    }
}

fn counts(entries: &[(&str, u64)]) -> Value {
    Value::Object(
        entries
            .iter()
            .map(|(key, count)| ((*key).to_owned(), json!(count)))
            .collect(),
    )
}

fn total(body: &Value) -> u64 {
    body["total"].as_u64().expect("total")
}

/// Every facet's counts summed.
fn sum(facet: &Value) -> u64 {
    facet
        .as_object()
        .expect("an object")
        .values()
        .map(|count| count.as_u64().expect("a count"))
        .sum()
}

#[tokio::test]
async fn counts_are_over_every_match_after_filters_and_collapsing() {
    let app = TestApp::spawn().await;
    catalogue(&app).await;

    let mine = app
        .get("/public/agents?verification_level=unverified&facets=true&limit=2")
        .await;
    assert_eq!(mine.status, 200, "{}", mine.text);
    assert_eq!(total(&mine.body), 7, "the mirror is collapsed");
    assert_eq!(mine.body["agents"].as_array().map(Vec::len), Some(2));
    let facets = &mine.body["facets"];
    assert_eq!(
        facets["category"],
        counts(&[
            ("Email", 1),
            ("Finance", 3),
            ("Payments", 1),
            ("Weather", 1)
        ]),
        "Finance and finance are one category, as the filter sees them"
    );
    assert_eq!(
        facets["tags"],
        counts(&[
            ("crypto", 2),
            ("email", 1),
            ("forecast", 1),
            ("history", 1),
            ("markdown", 1),
            ("nano", 1),
            ("realtime", 3),
            ("stocks", 1),
        ])
    );
    assert_eq!(
        facets["payment_model"],
        counts(&[("free", 3), ("freemium", 1), ("paid", 2)]),
        "the reader states no payment terms and is not counted"
    );
    assert_eq!(
        facets["health"],
        counts(&[("not_probed", 7)]),
        "none of them lists an endpoint to probe"
    );
    assert_eq!(
        facets["security"],
        counts(&[("none", 7)]),
        "no scanner finding in any of them"
    );
    assert_eq!(
        facets.as_object().map(|f| f.len()),
        Some(5),
        "{}",
        mine.text
    );

    // Every duplicate counts when duplicates are not collapsed.
    let every = app
        .get("/public/agents?verification_level=unverified&facets=true&collapse=false")
        .await;
    assert_eq!(total(&every.body), 8);
    assert_eq!(every.body["facets"]["category"]["Email"], 2);
    assert_eq!(every.body["facets"]["tags"]["email"], 2);
    assert_eq!(every.body["facets"]["payment_model"]["free"], 4);
    assert_eq!(every.body["facets"]["health"], counts(&[("not_probed", 8)]));

    // Filters narrow the counts like the list.
    let finance = app
        .get("/public/agents?verification_level=unverified&category=FINANCE&facets=true")
        .await;
    assert_eq!(total(&finance.body), 3);
    assert_eq!(
        finance.body["facets"]["category"],
        counts(&[("Finance", 3)])
    );
    assert_eq!(
        finance.body["facets"]["tags"],
        counts(&[
            ("crypto", 2),
            ("history", 1),
            ("realtime", 2),
            ("stocks", 1)
        ])
    );
    assert_eq!(
        finance.body["facets"]["payment_model"],
        counts(&[("freemium", 1), ("paid", 2)])
    );
    let free = app
        .get("/public/agents?verification_level=unverified&payment_model=free&facets=true")
        .await;
    assert_eq!(
        free.body["facets"]["category"],
        counts(&[("Email", 1), ("Payments", 1), ("Weather", 1)])
    );
    assert_eq!(free.body["facets"]["payment_model"], counts(&[("free", 3)]));
    let none = app.get("/public/agents?tags=no-such-tag&facets=true").await;
    assert_eq!(total(&none.body), 0);
    assert_eq!(
        none.body["facets"],
        json!({"category": {}, "tags": {}, "payment_model": {}, "health": {}, "security": {}})
    );

    // The registry's own agents too, without the filter: still every match, whatever the page.
    let all = app.get("/public/agents?facets=true&limit=1").await;
    assert_eq!(sum(&all.body["facets"]["health"]), total(&all.body));
    assert_eq!(
        all.body["facets"]["health"],
        counts(&[("not_probed", 7), ("unknown", 4)]),
        "the registry's own agents have endpoints; the prober is off"
    );
    let next = all.body["next_cursor"].as_str().expect("a next page");
    let second = app
        .get(&format!("/public/agents?facets=true&limit=1&cursor={next}"))
        .await;
    assert_eq!(
        second.body["facets"], all.body["facets"],
        "the same on every page"
    );
}

/// Counts of a query are over every agent the query matched: the same set as `total`, which
/// reading every page shows.
#[tokio::test]
async fn counts_of_a_query_are_over_all_its_matches_not_the_page() {
    let app = TestApp::spawn().await;
    catalogue(&app).await;

    for query in ["realtime", "crypto prices", "send email", "weather"] {
        let path = format!(
            "/public/agents?q={}&facets=true&limit=2",
            query.replace(' ', "%20")
        );
        let first = app.get(&path).await;
        assert_eq!(first.status, 200, "{}", first.text);
        let facets = first.body["facets"].clone();
        assert_eq!(sum(&facets["health"]), total(&first.body), "{query}");

        let mut seen: Vec<Value> = Vec::new();
        let mut page = first;
        loop {
            assert_eq!(
                page.body["facets"], facets,
                "{query}: the same on every page"
            );
            seen.extend(
                page.body["agents"]
                    .as_array()
                    .expect("agents")
                    .iter()
                    .cloned(),
            );
            match page.body["next_cursor"].as_str() {
                Some(cursor) => page = app.get(&format!("{path}&cursor={cursor}")).await,
                None => break,
            }
        }
        assert_eq!(seen.len() as u64, total(&page.body), "{query}");
        let mut categories: BTreeMap<String, u64> = BTreeMap::new();
        let mut tags: BTreeMap<String, u64> = BTreeMap::new();
        let mut models: BTreeMap<String, u64> = BTreeMap::new();
        for agent in &seen {
            if let Some(category) = agent["category"].as_str() {
                *categories.entry(category.to_lowercase()).or_default() += 1;
            }
            for tag in agent["tags"].as_array().expect("tags") {
                *tags
                    .entry(tag.as_str().expect("tag").to_owned())
                    .or_default() += 1;
            }
            if let Some(model) = agent["payment"]["model"].as_str() {
                *models.entry(model.to_owned()).or_default() += 1;
            }
        }
        let lowercase = |facet: &Value| -> BTreeMap<String, u64> {
            facet
                .as_object()
                .expect("object")
                .iter()
                .map(|(key, count)| (key.to_lowercase(), count.as_u64().expect("count")))
                .collect()
        };
        assert_eq!(lowercase(&facets["category"]), categories, "{query}");
        assert_eq!(lowercase(&facets["tags"]), tags, "{query}");
        assert_eq!(lowercase(&facets["payment_model"]), models, "{query}");
    }
}

#[tokio::test]
async fn the_post_search_and_the_search_bodies_ask_with_a_top_level_boolean() {
    let app = TestApp::spawn().await;
    catalogue(&app).await;
    let filters = json!({"verification_level": "unverified", "tags": "realtime"});

    let got = app
        .get("/public/agents?verification_level=unverified&tags=realtime&facets=true")
        .await;
    let posted = app
        .post(
            "/public/agents/search",
            None,
            json!({"facets": true, "filters": filters, "limit": 1}),
        )
        .await;
    assert_eq!(posted.status, 200, "{}", posted.text);
    assert_eq!(posted.body["facets"], got.body["facets"]);
    assert_eq!(
        posted.body["facets"]["category"],
        counts(&[("Finance", 2), ("Weather", 1)])
    );

    // The other paths that take the search body answer the same.
    let discover_token = app.token("bob", &["a2a"]).await;
    let discovered = app
        .post(
            "/a2a/discover",
            Some(&discover_token),
            json!({"facets": true, "filters": filters}),
        )
        .await;
    assert_eq!(discovered.status, 200, "{}", discovered.text);
    assert_eq!(discovered.body["facets"], got.body["facets"]);

    // Not asked, or asked not to: no member at all.
    for answer in [
        app.get("/public/agents").await,
        app.get("/public/agents?facets=false").await,
        app.get("/public/agents?facets=%20False%20").await,
        app.post("/public/agents/search", None, json!({})).await,
        app.post("/public/agents/search", None, json!({"facets": false}))
            .await,
        app.post("/public/agents/search", None, json!({"facets": null}))
            .await,
        app.post(
            "/public/agents/search",
            None,
            json!({"filters": {"facets": true}}),
        )
        .await,
    ] {
        assert_eq!(answer.status, 200, "{}", answer.text);
        assert!(answer.body.get("facets").is_none(), "{}", answer.text);
    }
}

#[tokio::test]
async fn a_facets_value_that_is_not_a_boolean_is_a_400() {
    let app = TestApp::spawn().await;

    for path in [
        "/public/agents?facets=maybe",
        "/public/agents?facets=1",
        "/public/agents?facets=",
    ] {
        let answer = app.get(path).await;
        answer.assert_problem(400, "invalid_parameter");
        assert!(
            answer.body["detail"]
                .as_str()
                .is_some_and(|d| d.contains("true")),
            "{}",
            answer.text
        );
    }
    for body in [
        json!({"facets": "true"}),
        json!({"facets": 1}),
        json!({"facets": []}),
    ] {
        app.post("/public/agents/search", None, body)
            .await
            .assert_problem(400, "invalid_parameter");
    }
}
