//! Public reads: list, filters, sort, pagination, get, search.

use std::collections::HashSet;

use serde_json::{Value, json};

use crate::helpers::{TestApp, agent_body, package_names, str_at};

/// The registry's own agents, there from the start: itself and its hosted agents.
const HOSTED: [&str; 4] = [
    "registry.agent-registry",
    "registry.utility.finance",
    "registry.utility.reader",
    "registry.utility.wiki",
];

/// Five ACTIVE agents with varied targets, categories, tags and payment terms, plus one in STAGE.
async fn catalogue() -> TestApp {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let agents = [
        json!({"package_name": "com.example.weather", "target": "Business", "category": "Weather",
               "tags": ["forecast", "realtime"],
               "payment": {"model": "paid", "protocols": ["x402"], "rails": ["base:usdc"]}}),
        json!({"package_name": "com.example.crypto", "target": "Business", "category": "Finance",
               "tags": ["cryptography"],
               "payment": {"model": "freemium", "direction": "both", "protocols": ["lightning-invoice"],
                           "rails": ["lightning:btc", "nano:xno"]}}),
        json!({"package_name": "com.example.maps", "target": "Consumer",
               "category": "Location Services", "tags": ["maps", "Crypto"],
               "payment": {"model": "free"}}),
        json!({"package_name": "com.example.nopay", "target": "Developers", "category": "Weather",
               "tags": ["forecast"]}),
        json!({"package_name": "com.example.sepolia", "target": "business", "category": "Testing",
               "payment": {"model": "paid", "protocols": ["x402"],
                           "rails": ["base-sepolia:usdc", "polygon:usdc.e"]}}),
    ];
    for fields in agents {
        let mut body = agent_body(str_at(&fields, "/package_name"));
        for (key, value) in fields.as_object().expect("object") {
            body[key] = value.clone();
        }
        app.publish_live(&alice, body).await;
    }
    let mut staged = agent_body("com.example.staged");
    staged["target"] = json!("Business");
    staged["tags"] = json!(["forecast", "crypto"]);
    staged["payment"] = json!({"model": "paid", "rails": ["base:usdc"]});
    app.publish(&alice, staged).await;
    app
}

/// The sorted package names answered by `GET /public/agents?{query}`.
async fn listed(app: &TestApp, query: &str) -> Vec<String> {
    let response = app.get(&format!("/public/agents?limit=100&{query}")).await;
    assert_eq!(response.status, 200, "{query}: {}", response.text);
    let mut names = package_names(&response);
    names.sort();
    names
}

fn names(short: &[&str]) -> Vec<String> {
    let mut names: Vec<String> = short
        .iter()
        .map(|name| {
            if name.starts_with("registry.") {
                (*name).to_owned()
            } else {
                format!("com.example.{name}")
            }
        })
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn the_list_shows_only_active_agents_as_summaries() {
    let app = catalogue().await;

    let response = app.get("/public/agents").await;

    assert_eq!(response.status, 200, "{}", response.text);
    let mut listed = package_names(&response);
    listed.sort();
    let mut expected = names(&["weather", "crypto", "maps", "nopay", "sepolia"]);
    expected.extend(HOSTED.map(str::to_owned));
    expected.sort();
    assert_eq!(listed, expected);
    assert_eq!(response.body["total"], 9);
    assert_eq!(response.body["limit"], 20);
    assert_eq!(response.body["next_cursor"], Value::Null);
    let summary = response.body["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .find(|agent| agent["package_name"] == "com.example.weather")
        .expect("weather listed");
    for key in [
        "id",
        "package_name",
        "name",
        "description",
        "verification_level",
        "manifest_url",
        "target",
        "category",
        "tags",
        "payment",
    ] {
        assert!(summary.get(key).is_some(), "summary lacks {key}: {summary}");
    }
    assert_eq!(
        summary["manifest_url"],
        "http://registry.test/public/agents/resolve/com.example.weather"
    );
    assert!(summary.get("score").is_none(), "no score without a query");
}

#[tokio::test]
async fn one_agent_is_public_by_id_or_package_name_without_owner_fields() {
    let app = catalogue().await;

    let by_name = app.get("/public/agents/com.example.weather").await;
    let by_id = app
        .get(&format!("/public/agents/{}", str_at(&by_name.body, "/id")))
        .await;

    assert_eq!(by_name.status, 200, "{}", by_name.text);
    assert_eq!(by_id.body, by_name.body);
    assert_eq!(by_name.body["state"], "ACTIVE");
    assert!(by_name.body.get("verification_token").is_none());
    assert!(by_name.body.get("has_card").is_none());
}

#[tokio::test]
async fn an_unknown_agent_is_not_found() {
    let app = catalogue().await;

    let response = app.get("/public/agents/com.example.nope").await;

    response.assert_problem(404, "agent_not_found");
    assert!(
        str_at(&response.body, "/detail").contains("com.example.nope"),
        "{}",
        response.text
    );
}

#[tokio::test]
async fn target_and_category_match_exactly_and_case_insensitively() {
    let app = catalogue().await;

    assert_eq!(
        listed(&app, "target=BUSINESS").await,
        names(&["weather", "crypto", "sepolia"])
    );
    assert_eq!(
        listed(&app, "target=business,consumer").await,
        names(&["weather", "crypto", "sepolia", "maps"])
    );
    assert_eq!(listed(&app, "target=busi").await, names(&[]));
    assert_eq!(
        listed(&app, "category=finance").await,
        names(&["crypto", "registry.utility.finance"])
    );
    assert_eq!(
        listed(&app, "category=location%20services").await,
        names(&["maps"])
    );
}

#[tokio::test]
async fn tags_match_exactly_so_crypto_is_not_cryptography() {
    let app = catalogue().await;

    assert_eq!(
        listed(&app, "tags=crypto").await,
        names(&["maps", "registry.utility.finance"])
    );
    assert_eq!(listed(&app, "tags=cryptography").await, names(&["crypto"]));
    assert_eq!(
        listed(&app, "tags=Forecast,MAPS").await,
        names(&["weather", "nopay", "maps"])
    );
    assert_eq!(listed(&app, "tags=fore").await, names(&[]));
}

#[tokio::test]
async fn verification_level_filters_hosted_and_published_agents_apart() {
    let app = catalogue().await;

    assert_eq!(
        listed(&app, "verification_level=domain_verified").await,
        names(&HOSTED)
    );
    assert_eq!(
        listed(&app, "verification_level=unverified").await,
        names(&["weather", "crypto", "maps", "nopay", "sepolia"])
    );
    app.get("/public/agents?verification_level=gold")
        .await
        .assert_problem(400, "invalid_parameter");
}

#[tokio::test]
async fn different_parameters_are_and_ed() {
    let app = catalogue().await;

    assert_eq!(
        listed(&app, "target=business&category=weather").await,
        names(&["weather"])
    );
    assert_eq!(
        listed(&app, "tags=forecast&payment_model=paid").await,
        names(&["weather"])
    );
    assert_eq!(
        listed(&app, "target=developers&payment_model=free").await,
        names(&HOSTED)
    );
}

#[tokio::test]
async fn payment_filters_work_end_to_end() {
    let app = catalogue().await;
    let mut free = names(&["maps"]);
    free.extend(HOSTED.map(str::to_owned));
    free.sort();

    let cases: [(&str, Vec<String>); 13] = [
        ("payment_model=paid", names(&["weather", "sepolia"])),
        (
            "payment_model=paid,freemium",
            names(&["weather", "sepolia", "crypto"]),
        ),
        ("payment_model=free", free),
        ("payment_rail=base:usdc", names(&["weather"])),
        ("payment_rail=usdc", names(&["weather", "sepolia"])),
        ("payment_rail=NANO:XNO", names(&["crypto"])),
        (
            "payment_rail=nano:xno,%20base:",
            names(&["crypto", "weather"]),
        ),
        (
            "payment_rail=nano:&payment_rail=polygon:",
            names(&["crypto", "sepolia"]),
        ),
        ("payment_protocol=lightning", names(&[])),
        ("payment_protocol=bolt11", names(&["crypto"])),
        ("payment_direction=outbound", names(&["crypto"])),
        (
            "payment_direction=inbound",
            names(&["weather", "sepolia", "crypto"]),
        ),
        (
            "payment_protocol=x402&payment_rail=base:",
            names(&["weather"]),
        ),
    ];
    for (query, expected) in cases {
        assert_eq!(listed(&app, query).await, expected, "{query}");
    }
}

#[tokio::test]
async fn an_empty_payment_filter_is_not_applied() {
    let app = catalogue().await;

    let everything = listed(&app, "").await;

    for query in ["payment_rail=", "payment_model=%20", "payment_protocol=,"] {
        assert_eq!(listed(&app, query).await, everything, "{query}");
    }
    assert!(everything.contains(&"com.example.nopay".to_owned()));
}

#[tokio::test]
async fn unknown_payment_models_and_directions_are_invalid_parameters() {
    let app = catalogue().await;

    for query in [
        "payment_model=subscription",
        "payment_model=free,gratis",
        "payment_direction=sideways",
    ] {
        let response = app.get(&format!("/public/agents?{query}")).await;
        response.assert_problem(400, "invalid_parameter");
        let parameter = query.split('=').next().expect("name");
        assert!(
            str_at(&response.body, "/detail").contains(parameter),
            "{}",
            response.text
        );
    }
}

#[tokio::test]
async fn sort_by_name_orders_by_display_name() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    for (package, name) in [("c", "charlie"), ("a", "Alpha"), ("b", "bravo")] {
        let mut body = agent_body(&format!("com.example.{package}"));
        body["name"] = json!(name);
        body["tags"] = json!(["sorted"]);
        app.publish_live(&alice, body).await;
    }

    let response = app.get("/public/agents?tags=sorted&sort=name").await;

    assert_eq!(
        package_names(&response),
        ["com.example.a", "com.example.b", "com.example.c"]
    );
}

#[tokio::test]
async fn without_a_query_the_newest_agents_come_first() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    app.publish_many(&alice, "n", 3, "sorted").await;

    let default = app.get("/public/agents?tags=sorted").await;
    let newest = app.get("/public/agents?tags=sorted&sort=newest").await;

    let expected = ["com.example.n2", "com.example.n1", "com.example.n0"];
    assert_eq!(package_names(&default), expected);
    assert_eq!(package_names(&newest), expected);
}

#[tokio::test]
async fn with_a_query_the_best_match_comes_first_with_a_score() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    // The best match says what was asked in its name and its description; the other mentions
    // the word once.
    let mut in_name = agent_body("com.example.named");
    in_name["name"] = json!("Forecast Agent");
    in_name["description"] = json!("Weather forecasts for any city, hour by hour.");
    in_name["tags"] = json!(["ranked"]);
    let mut in_description = agent_body("com.example.described");
    in_description["description"] = json!("Gives a forecast.");
    in_description["tags"] = json!(["ranked"]);
    app.publish_live(&alice, in_description).await;
    app.publish_live(&alice, in_name).await;

    let response = app.get("/public/agents?q=forecast&tags=ranked").await;

    assert_eq!(
        package_names(&response),
        ["com.example.named", "com.example.described"]
    );
    let scores: Vec<f64> = response.body["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .map(|agent| agent["score"].as_f64().expect("score"))
        .collect();
    assert!(scores[0] > scores[1], "{scores:?}");
    let by_newest = app
        .get("/public/agents?q=forecast&tags=ranked&sort=newest")
        .await;
    assert_eq!(
        package_names(&by_newest),
        ["com.example.named", "com.example.described"]
    );
}

#[tokio::test]
async fn an_unknown_sort_is_an_invalid_parameter() {
    let app = TestApp::spawn().await;

    app.get("/public/agents?sort=popular")
        .await
        .assert_problem(400, "invalid_parameter");
    app.post("/public/agents/search", None, json!({"sort": "popular"}))
        .await
        .assert_problem(400, "invalid_parameter");
}

/// Every page of `GET /public/agents?{query}&limit={limit}`, checking `total` and `limit` on each.
async fn walk(app: &TestApp, query: &str, limit: usize, total: usize) -> Vec<Vec<String>> {
    let mut pages = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut path = format!("/public/agents?{query}&limit={limit}");
        if let Some(cursor) = &cursor {
            path.push_str(&format!("&cursor={cursor}"));
        }
        let page = app.get(&path).await;
        assert_eq!(page.status, 200, "{path}: {}", page.text);
        assert_eq!(page.body["total"], total, "{path}");
        assert_eq!(page.body["limit"], limit, "{path}");
        pages.push(package_names(&page));
        match page.body["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
        assert!(pages.len() <= total, "the walk does not end");
    }
    pages
}

#[tokio::test]
async fn walking_every_page_returns_every_agent_exactly_once_in_order() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let records = app.publish_many(&alice, "page", 25, "paged").await;
    let newest_first: Vec<String> = records
        .iter()
        .rev()
        .map(|record| str_at(record, "/package_name").to_owned())
        .collect();
    let mut by_name = newest_first.clone();
    by_name.sort_by_key(|package| format!("agent {package}"));

    for (query, expected) in [
        ("tags=paged", &newest_first),
        ("tags=paged&sort=name", &by_name),
    ] {
        let pages = walk(&app, query, 7, 25).await;
        let sizes: Vec<usize> = pages.iter().map(Vec::len).collect();
        assert_eq!(sizes, [7, 7, 7, 4], "{query}");
        assert_eq!(&pages.concat(), expected, "{query}");
    }
}

#[tokio::test]
async fn paging_a_relevance_search_matches_the_single_page_order() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    for i in 0..12 {
        let mut body = agent_body(&format!("com.example.rel{i}"));
        // Vary where the term occurs, so scores differ and tie.
        body["name"] = json!(if i % 3 == 0 {
            "Lookup helper"
        } else {
            "Helper"
        });
        body["tags"] = json!(["rel"]);
        body["description"] = json!(if i % 2 == 0 {
            "lookup things"
        } else {
            "lookup"
        });
        app.publish_live(&alice, body).await;
    }

    let pages = walk(&app, "q=lookup&tags=rel", 5, 12).await;
    let single = app.get("/public/agents?q=lookup&tags=rel&limit=100").await;

    let walked = pages.concat();
    assert_eq!(walked, package_names(&single));
    assert_eq!(walked.iter().collect::<HashSet<_>>().len(), 12);
}

#[tokio::test]
async fn a_malformed_cursor_is_an_invalid_parameter() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    app.publish_many(&alice, "c", 3, "cursor").await;
    let first = app.get("/public/agents?tags=cursor&limit=1").await;
    let newest_cursor = str_at(&first.body, "/next_cursor");

    for query in [
        "cursor=!!!".to_owned(),
        "cursor=bm90LWpzb24".to_owned(),
        "cursor=e30".to_owned(),
        format!("cursor={newest_cursor}&sort=name"),
    ] {
        app.get(&format!("/public/agents?tags=cursor&{query}"))
            .await
            .assert_problem(400, "invalid_parameter");
    }
    app.post("/public/agents/search", None, json!({"cursor": "!!!"}))
        .await
        .assert_problem(400, "invalid_parameter");
}

#[tokio::test]
async fn limits_are_defaulted_and_clamped() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    app.publish_many(&alice, "lim", 25, "limited").await;
    let page = |response: &crate::helpers::TestResponse| {
        (
            response.body["limit"].as_u64().expect("limit"),
            response.body["agents"].as_array().map_or(0, Vec::len),
        )
    };

    assert_eq!(page(&app.get("/public/agents").await), (20, 20));
    assert_eq!(page(&app.get("/public/agents?limit=0").await), (1, 1));
    assert_eq!(page(&app.get("/public/agents?limit=-5").await), (1, 1));
    assert_eq!(page(&app.get("/public/agents?limit=1000").await), (100, 29));
    let search = |body: Value| {
        let app = &app;
        async move {
            let response = app.post("/public/agents/search", None, body).await;
            assert_eq!(response.status, 200, "{}", response.text);
            page(&response)
        }
    };
    assert_eq!(search(json!({})).await, (5, 5));
    assert_eq!(search(json!({"query": "agent"})).await, (5, 5));
    assert_eq!(search(json!({"limit": 0})).await, (1, 1));
    assert_eq!(search(json!({"limit": 1000})).await, (100, 29));
    app.get("/public/agents?limit=many")
        .await
        .assert_problem(400, "invalid_parameter");
}

#[tokio::test]
async fn search_accepts_filters_nested_top_level_camel_case_arrays_and_comma_strings() {
    let app = catalogue().await;
    let searched = |body: Value| {
        let app = &app;
        async move {
            let response = app.post("/public/agents/search", None, body).await;
            assert_eq!(response.status, 200, "{}", response.text);
            let mut names = package_names(&response);
            names.sort();
            names
        }
    };

    let cases = [
        (
            json!({"filters": {"tags": ["forecast", "maps"]}, "limit": 20}),
            names(&["weather", "nopay", "maps"]),
        ),
        (
            json!({"filters": {"tags": "forecast, maps"}, "limit": 20}),
            names(&["weather", "nopay", "maps"]),
        ),
        (json!({"payment_rail": "base:usdc"}), names(&["weather"])),
        (
            json!({"filters": {"paymentRail": ["nano:xno"]}}),
            names(&["crypto"]),
        ),
        (
            json!({"filters": {"payment_model": "paid,freemium", "target": "Business"}}),
            names(&["weather", "crypto", "sepolia"]),
        ),
        (
            json!({"query": "agent", "filters": {"paymentModel": ["paid"], "paymentDirection": "inbound"}}),
            names(&["weather", "sepolia"]),
        ),
        (
            json!({"filters": {"verification_level": "domain_verified", "category": "web"}}),
            names(&["registry.utility.reader"]),
        ),
    ];
    for (body, expected) in cases {
        assert_eq!(searched(body.clone()).await, expected, "{body}");
    }
}

#[tokio::test]
async fn search_rejects_wrongly_typed_filters() {
    let app = TestApp::spawn().await;

    for body in [
        json!({"filters": {"tags": 3}}),
        json!({"filters": {"payment_rail": [1, 2]}}),
        json!({"filters": "tags=x"}),
        json!({"query": ["x"]}),
        json!({"limit": true}),
        json!({"payment_model": "subscription"}),
        json!(["query"]),
    ] {
        app.post("/public/agents/search", None, body)
            .await
            .assert_problem(400, "invalid_parameter");
    }
}

#[tokio::test]
async fn list_and_search_give_the_same_agents_in_the_same_order() {
    let app = catalogue().await;

    let cases = [
        ("", json!({})),
        ("q=agent", json!({"query": "agent"})),
        (
            "q=agent&tags=forecast,maps",
            json!({"query": "agent", "filters": {"tags": ["forecast", "maps"]}}),
        ),
        (
            "payment_rail=usdc&sort=name",
            json!({"sort": "name", "filters": {"payment_rail": "usdc"}}),
        ),
        (
            "q=example%20agent&target=business&payment_model=paid,freemium",
            json!({"query": "example agent", "target": "business", "paymentModel": ["paid", "freemium"]}),
        ),
    ];
    for (query, mut body) in cases {
        body["limit"] = json!(100);
        let listed = app.get(&format!("/public/agents?limit=100&{query}")).await;
        let searched = app.post("/public/agents/search", None, body).await;
        assert_eq!(listed.status, 200, "{}", listed.text);
        assert_eq!(package_names(&listed), package_names(&searched), "{query}");
        assert_eq!(listed.body["total"], searched.body["total"], "{query}");
    }
}

#[tokio::test]
async fn an_empty_search_lists_by_filters_alone() {
    let app = catalogue().await;

    for body in [
        json!({"query": "", "filters": {"tags": "forecast"}}),
        json!({"query": null, "tags": "forecast"}),
    ] {
        let response = app.post("/public/agents/search", None, body).await;
        let mut found = package_names(&response);
        found.sort();
        assert_eq!(found, names(&["weather", "nopay"]));
    }
    let no_criteria = app.post("/public/agents/search", None, json!({})).await;
    assert_eq!(no_criteria.status, 200, "{}", no_criteria.text);
    assert_eq!(no_criteria.body["total"], 9);
}

#[tokio::test]
async fn target_category_and_tags_match_case_insensitively_beyond_ascii() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let mut body = agent_body("com.example.meteo");
    body["target"] = json!("ÉTUDIANTS");
    body["category"] = json!("MÉTÉO");
    body["tags"] = json!(["ÉCLAIR"]);
    app.publish_live(&alice, body).await;

    for query in [
        "category=M%C3%89T%C3%89O",
        "category=m%C3%A9t%C3%A9o",
        "target=%C3%89TUDIANTS",
        "target=%C3%A9tudiants",
        "tags=%C3%89CLAIR",
        "tags=%C3%A9clair",
    ] {
        assert_eq!(listed(&app, query).await, names(&["meteo"]), "{query}");
    }
}

#[tokio::test]
async fn filters_follow_an_agents_updates_and_unpublishing() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let mut body = agent_body("com.example.tides");
    body["tags"] = json!(["weather"]);
    body["category"] = json!("Forecasts");
    app.publish_live(&alice, body.clone()).await;
    let found = |query: &'static str| {
        let app = &app;
        async move { package_names(&app.get(&format!("/public/agents?{query}")).await) }
    };
    assert_eq!(found("tags=weather").await, ["com.example.tides"]);
    assert_eq!(found("category=forecasts").await, ["com.example.tides"]);

    body["tags"] = json!(["tides", "harbour"]);
    body["category"] = json!("Marine");
    let updated = app.put("/api/agents/com.example.tides", &alice, body).await;
    assert_eq!(updated.status, 200, "{}", updated.text);
    assert!(found("tags=weather").await.is_empty());
    assert!(found("category=forecasts").await.is_empty());
    assert_eq!(found("tags=harbour,nothing").await, ["com.example.tides"]);
    assert_eq!(
        found("q=tides&tags=tides&category=marine").await,
        ["com.example.tides"]
    );

    let unpublished = app
        .post_empty("/api/agents/com.example.tides/unpublish", &alice)
        .await;
    assert_eq!(unpublished.status, 200, "{}", unpublished.text);
    assert!(found("tags=tides").await.is_empty());
    assert!(found("q=tides&tags=tides").await.is_empty());
}
