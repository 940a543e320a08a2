//! x402 Bazaar discovery: `GET /discovery/resources` and `GET /discovery/search` list the
//! ACTIVE agents that take x402 payments as paid resources, in the Bazaar's shapes.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::helpers::{TestApp, agent_body};

const BASE_USDC: &str = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913";
const SOLANA: &str = "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp";
const SOLANA_USDC: &str = "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v";
const ALICE_WALLET: &str = "0x209693Bc6afc0C5328bA36FaF03C514EF312287C";

/// A publish body: `agent_body` plus `fields`.
fn body(package_name: &str, fields: Value) -> Value {
    let mut body = agent_body(package_name);
    for (key, value) in fields.as_object().expect("object") {
        body[key] = value.clone();
    }
    body
}

/// Going live in this order: forecast, tides, sepolia (rails are listed sorted, so tides offers
/// nano before polygon). Not listed: an l402 agent, a free one,
/// one without payment terms, and an x402 agent still in STAGE.
async fn catalogue() -> TestApp {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let live = [
        body(
            "com.example.forecast",
            json!({"name": "Forecast", "description": "Weather forecasts for any city.",
                   "url": "https://forecast.example.com/a2a/v1",
                   "payment": {"model": "paid", "protocols": ["x402"],
                               "rails": ["base:usdc", "solana:usdc"],
                               "pay_to": ALICE_WALLET, "price": {"amount": "10000", "asset": "usdc"}}}),
        ),
        body(
            "com.example.tides",
            json!({"name": "Tides", "description": "Tide tables for harbours.",
                   "payment": {"model": "freemium", "protocols": ["x402", "l402"],
                               "rails": [{"network": "polygon", "asset": "usdc.e", "protocol": "x402"},
                                         "nano:xno",
                                         {"network": "lightning", "asset": "btc", "protocol": "l402"}]}}),
        ),
        body(
            "com.example.sepolia",
            json!({"name": "Sepolia Weather", "description": "Weather on a test network.",
                   "payment": {"model": "paid", "protocols": ["x402"], "rails": ["base-sepolia:usdc"],
                               "scheme": "upto", "pay_to": "0x0000000000000000000000000000000000000abc",
                               "price": {"amount": "500", "asset": "usdc"}}}),
        ),
        body(
            "com.example.lightning",
            json!({"payment": {"model": "paid", "protocols": ["l402"], "rails": ["lightning:btc"]}}),
        ),
        body("com.example.free", json!({"payment": {"model": "free"}})),
        body("com.example.plain", json!({})),
    ];
    for agent in live {
        app.publish_live(&alice, agent).await;
    }
    app.publish(
        &alice,
        body(
            "com.example.staged",
            json!({"payment": {"model": "paid", "protocols": ["x402"], "rails": ["base:usdc"]}}),
        ),
    )
    .await;
    app
}

/// The package names of a page's resources, in order.
fn packages(resources: &Value) -> Vec<String> {
    resources
        .as_array()
        .expect("an array of resources")
        .iter()
        .map(|item| {
            item["metadata"]["packageName"]
                .as_str()
                .expect("packageName")
                .to_owned()
        })
        .collect()
}

/// `GET /discovery/resources?{query}`: asserts 200 and returns the short package names.
async fn listed(app: &TestApp, query: &str) -> Vec<String> {
    let response = app.get(&format!("/discovery/resources?{query}")).await;
    assert_eq!(response.status, 200, "{query}: {}", response.text);
    assert_eq!(
        response.body["pagination"]["total"],
        response.body["items"].as_array().map_or(0, Vec::len),
        "{query}: one page holds every match here"
    );
    packages(&response.body["items"])
        .into_iter()
        .map(|name| name.trim_start_matches("com.example.").to_owned())
        .collect()
}

#[tokio::test]
async fn bazaar_lists_active_x402_agents_as_paid_http_resources() {
    let app = catalogue().await;
    let response = app.get("/discovery/resources").await;
    assert_eq!(response.status, 200, "{}", response.text);
    assert_eq!(
        response.header("content-type"),
        Some("application/json"),
        "{}",
        response.text
    );
    let body = &response.body;
    assert_eq!(body["x402Version"], 2);
    assert_eq!(
        body["pagination"],
        json!({"limit": 20, "offset": 0, "total": 3})
    );
    // In the order they went live; the l402, free, plain, staged and hosted agents are absent.
    assert_eq!(
        packages(&body["items"]),
        [
            "com.example.forecast",
            "com.example.tides",
            "com.example.sepolia"
        ]
    );

    let forecast = &body["items"][0];
    assert_eq!(forecast["resource"], "https://forecast.example.com/a2a/v1");
    assert_eq!(forecast["type"], "http");
    assert_eq!(forecast["x402Version"], 2);
    assert_eq!(
        forecast["accepts"],
        json!([
            {"scheme": "exact", "network": "eip155:8453", "asset": BASE_USDC,
             "payTo": ALICE_WALLET, "amount": "10000"},
            {"scheme": "exact", "network": SOLANA, "asset": SOLANA_USDC,
             "payTo": ALICE_WALLET, "amount": "10000"},
        ])
    );
    let updated = forecast["lastUpdated"].as_str().expect("lastUpdated");
    assert!(
        updated.len() == 20 && updated.ends_with('Z'),
        "RFC 3339 UTC: {updated}"
    );
    assert_eq!(
        forecast["metadata"],
        json!({"name": "Forecast", "description": "Weather forecasts for any city.",
               "packageName": "com.example.forecast",
               "cardUrl": "http://registry.test/public/agents/resolve/com.example.forecast"})
    );

    // Without a url the resource is the public record; without pay_to or price, accepts
    // entries carry neither; rails bound to another protocol are not offered.
    let tides = &body["items"][1];
    assert_eq!(
        tides["resource"],
        "http://registry.test/public/agents/com.example.tides"
    );
    assert_eq!(
        tides["accepts"],
        json!([
            {"scheme": "exact", "network": "nano:mainnet", "asset": "XNO"},
            {"scheme": "exact", "network": "eip155:137",
             "asset": "0x2791Bca1f2de4661ED88A30C99A7a9449Aa84174"},
        ])
    );

    let sepolia = &body["items"][2];
    assert_eq!(
        sepolia["accepts"],
        json!([{"scheme": "upto", "network": "eip155:84532",
                "asset": "0x036CbD53842c5426634e7929541eC2318f3dCF7e",
                "payTo": "0x0000000000000000000000000000000000000abc", "amount": "500"}])
    );
}

#[tokio::test]
async fn an_agent_leaves_the_bazaar_when_it_stops_being_active_or_drops_x402() {
    let app = catalogue().await;
    let alice = app.token("alice", &[]).await;
    let unpublished = app
        .post_empty("/api/agents/com.example.forecast/unpublish", &alice)
        .await;
    assert_eq!(unpublished.status, 200, "{}", unpublished.text);
    let dropped = app
        .put(
            "/api/agents/com.example.tides",
            &alice,
            body(
                "com.example.tides",
                json!({"payment": {"model": "paid", "protocols": ["l402"], "rails": ["lightning:btc"]}}),
            ),
        )
        .await;
    assert_eq!(dropped.status, 200, "{}", dropped.text);
    assert_eq!(listed(&app, "").await, ["sepolia"]);
}

#[tokio::test]
async fn network_filters_take_caip2_ids_and_the_registrys_names() {
    let app = catalogue().await;
    for (network, expected) in [
        ("eip155:8453", vec!["forecast"]),
        ("EIP155:8453", vec!["forecast"]),
        ("base", vec!["forecast"]),
        (SOLANA, vec!["forecast"]),
        ("solana", vec!["forecast"]),
        ("eip155:137", vec!["tides"]),
        ("polygon", vec!["tides"]),
        ("nano:mainnet", vec!["tides"]),
        ("nano", vec!["tides"]),
        ("eip155:84532", vec!["sepolia"]),
        ("base-sepolia", vec!["sepolia"]),
        // Known to nobody, or only on a rail bound to another protocol.
        ("eip155:999999999", vec![]),
        ("ethereum", vec![]),
        ("lightning", vec![]),
    ] {
        let query = format!("network={}", urlencode(network));
        assert_eq!(listed(&app, &query).await, expected, "{network}");
    }
}

#[tokio::test]
async fn asset_pay_to_scheme_and_max_amount_filters() {
    let app = catalogue().await;
    for (query, expected) in [
        // The asset by its contract (any case), its mint, or the registry's name.
        (format!("asset={BASE_USDC}"), vec!["forecast"]),
        (
            format!("asset={}", BASE_USDC.to_ascii_lowercase()),
            vec!["forecast"],
        ),
        (format!("asset={SOLANA_USDC}"), vec!["forecast"]),
        ("asset=usdc".to_owned(), vec!["forecast", "sepolia"]),
        ("asset=usdc.e".to_owned(), vec!["tides"]),
        ("asset=XNO".to_owned(), vec!["tides"]),
        ("asset=btc".to_owned(), vec![]),
        // Network and asset meet on one offer.
        ("network=base&asset=usdc".to_owned(), vec!["forecast"]),
        ("network=nano&asset=usdc".to_owned(), vec![]),
        // The payee: 0x addresses ignore case.
        (
            format!("payTo={}", ALICE_WALLET.to_ascii_lowercase()),
            vec!["forecast"],
        ),
        (
            "payTo=0x0000000000000000000000000000000000000001".to_owned(),
            vec![],
        ),
        ("scheme=exact".to_owned(), vec!["forecast", "tides"]),
        ("scheme=UPTO".to_owned(), vec!["sepolia"]),
        ("scheme=batch-settlement".to_owned(), vec![]),
        // The highest price, in the asset's smallest unit; agents without a price never match.
        ("maxAmount=10000".to_owned(), vec!["forecast", "sepolia"]),
        ("maxAmount=9999".to_owned(), vec!["sepolia"]),
        ("maxAmount=499".to_owned(), vec![]),
        (
            "maxAmount=10000&network=eip155:8453".to_owned(),
            vec!["forecast"],
        ),
        // Every resource is an http resource without extensions.
        ("type=http".to_owned(), vec!["forecast", "tides", "sepolia"]),
        ("type=HTTP".to_owned(), vec!["forecast", "tides", "sepolia"]),
        ("type=mcp".to_owned(), vec![]),
        ("extensions=bazaar".to_owned(), vec![]),
        // Empty values are not applied.
        (
            "network=&asset=&payTo=&maxAmount=&scheme=&type=".to_owned(),
            vec!["forecast", "tides", "sepolia"],
        ),
    ] {
        assert_eq!(listed(&app, &query).await, expected, "{query}");
    }
}

#[tokio::test]
async fn offset_pages_have_no_repeats_or_gaps_even_while_agents_go_live() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let x402 = |n: usize| {
        body(
            &format!("com.example.paid{n}"),
            json!({"payment": {"model": "paid", "protocols": ["x402"], "rails": ["base:usdc"]}}),
        )
    };
    for n in 0..7 {
        app.publish_live(&alice, x402(n)).await;
    }
    let all = app.get("/discovery/resources?limit=100").await;
    let all = packages(&all.body["items"]);
    assert_eq!(all.len(), 7);

    let mut seen = Vec::new();
    for offset in [0, 3, 6] {
        if offset == 3 {
            // An agent going live between pages joins the end of the list.
            app.publish_live(&alice, x402(7)).await;
        }
        let page = app
            .get(&format!("/discovery/resources?limit=3&offset={offset}"))
            .await;
        assert_eq!(page.status, 200, "{}", page.text);
        assert_eq!(page.body["pagination"]["limit"], 3);
        assert_eq!(page.body["pagination"]["offset"], offset);
        seen.extend(packages(&page.body["items"]));
    }
    let mut expected = all.clone();
    expected.push("com.example.paid7".to_owned());
    assert_eq!(seen, expected);

    let past_the_end = app.get("/discovery/resources?offset=100").await;
    assert_eq!(past_the_end.body["items"], json!([]));
    assert_eq!(past_the_end.body["pagination"]["total"], 8);
    let largest = app
        .get("/discovery/resources?offset=9223372036854775807")
        .await;
    assert_eq!(largest.status, 200, "{}", largest.text);
    assert_eq!(largest.body["items"], json!([]));
    // Page sizes are clamped, as on every path.
    let clamped = app.get("/discovery/resources?limit=0").await;
    assert_eq!(clamped.body["pagination"]["limit"], 1);
    let clamped = app.get("/discovery/resources?limit=5000").await;
    assert_eq!(clamped.body["pagination"]["limit"], 100);
}

#[tokio::test]
async fn search_ranks_x402_agents_and_pages_by_cursor() {
    let app = catalogue().await;
    let response = app.get("/discovery/search?query=weather").await;
    assert_eq!(response.status, 200, "{}", response.text);
    let body = &response.body;
    assert_eq!(body["x402Version"], 2);
    assert_eq!(body["partialResults"], false);
    assert_eq!(
        body["items"], body["resources"],
        "the list under both names"
    );
    let mut found = packages(&body["resources"]);
    found.sort();
    assert_eq!(found, ["com.example.forecast", "com.example.sepolia"]);
    assert_eq!(
        body["pagination"],
        json!({"limit": 20, "cursor": null, "total": 2})
    );
    let accepts: Vec<&Value> = body["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .map(|resource| &resource["accepts"][0]["network"])
        .collect();
    assert!(accepts.contains(&&json!("eip155:8453")), "{accepts:?}");

    // The same filters as the list.
    let filtered = app
        .get("/discovery/search?query=weather&network=eip155:84532&maxAmount=500")
        .await;
    assert_eq!(
        packages(&filtered.body["resources"]),
        ["com.example.sepolia"]
    );
    let none = app.get("/discovery/search?query=weather&type=mcp").await;
    assert_eq!(none.status, 200, "{}", none.text);
    assert_eq!(none.body["resources"], json!([]));
    assert_eq!(none.body["pagination"]["total"], 0);

    // Paging by cursor serves every match once.
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(cursor) => format!(
                "/discovery/search?query=weather%20tides&limit=1&cursor={}",
                urlencode(cursor)
            ),
            None => "/discovery/search?query=weather%20tides&limit=1".to_owned(),
        };
        let page = app.get(&path).await;
        assert_eq!(page.status, 200, "{}", page.text);
        assert_eq!(page.body["pagination"]["total"], 3);
        seen.extend(packages(&page.body["resources"]));
        match page.body["pagination"]["cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
        assert!(seen.len() <= 3, "{seen:?}");
    }
    let distinct: BTreeSet<&String> = seen.iter().collect();
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert_eq!(distinct.len(), 3, "{seen:?}");
}

#[tokio::test]
async fn bad_parameters_are_400_problems_naming_the_parameter() {
    let app = catalogue().await;
    for (path, parameter) in [
        ("/discovery/resources?network=!!!", "network"),
        ("/discovery/resources?network=eip155:", "network"),
        ("/discovery/resources?network=%20base", "network"),
        ("/discovery/resources?asset=us%20dc", "asset"),
        ("/discovery/resources?scheme=ex%20act", "scheme"),
        ("/discovery/resources?payTo=0x%201", "payTo"),
        ("/discovery/resources?maxAmount=0.01", "maxAmount"),
        ("/discovery/resources?maxAmount=-1", "maxAmount"),
        ("/discovery/resources?limit=ten", "limit"),
        ("/discovery/resources?offset=-1", "offset"),
        ("/discovery/resources?offset=1.5", "offset"),
        ("/discovery/resources?offset=9223372036854775808", "offset"),
        ("/discovery/resources?network=base&network=nano", "network"),
        ("/discovery/search", "query"),
        ("/discovery/search?query=%20%20", "query"),
        ("/discovery/search?query=weather&network=!!!", "network"),
        (
            "/discovery/search?query=weather&cursor=not-a-cursor",
            "cursor",
        ),
        ("/discovery/search?query=weather&limit=1.5", "limit"),
    ] {
        let response = app.get(path).await;
        response.assert_problem(400, "invalid_parameter");
        let detail = response.body["detail"].as_str().expect("detail");
        assert!(
            detail.starts_with(&format!("{parameter}:")),
            "{path}: {detail}"
        );
    }
}

#[tokio::test]
async fn pay_to_price_and_scheme_are_stored_returned_and_carried_by_the_card() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let payment = json!({"model": "paid", "protocols": ["x402"], "rails": ["base:usdc"],
                         "scheme": "Exact", "pay_to": ALICE_WALLET,
                         "price": {"amount": "0025000", "asset": "USDC"}});
    let canonical = json!({"model": "paid", "direction": "inbound", "protocols": ["x402"],
                           "rails": [{"network": "base", "asset": "usdc"}],
                           "scheme": "exact", "pay_to": ALICE_WALLET,
                           "price": {"amount": "25000", "asset": "usdc"}});
    let record = app
        .publish_live(
            &alice,
            body("com.example.priced", json!({"payment": payment})),
        )
        .await;
    assert_eq!(record["payment"], canonical);
    let public = app.get("/public/agents/com.example.priced").await;
    assert_eq!(public.body["payment"], canonical);
    let listed = app.get("/public/agents?payment_protocol=x402").await;
    assert_eq!(listed.body["agents"][0]["payment"], canonical);

    let card = app.get("/public/agents/resolve/com.example.priced").await;
    assert_eq!(card.status, 200, "{}", card.text);
    let extensions = card.body["capabilities"]["extensions"]
        .as_array()
        .expect("extensions");
    let carried = extensions
        .iter()
        .find_map(|extension| extension["params"].get("payment"))
        .expect("the payment extension");
    assert_eq!(carried, &canonical);

    // The record's payment reads back as a publish body (export, then import).
    let again = app
        .post(
            "/api/agents/publish",
            Some(&alice),
            body(
                "com.example.copy",
                json!({"payment": public.body["payment"]}),
            ),
        )
        .await;
    assert_eq!(again.status, 201, "{}", again.text);
    assert_eq!(again.body["payment"], canonical);
}

#[tokio::test]
async fn bad_pay_to_and_price_are_reported_with_every_other_bad_field() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let response = app
        .post(
            "/api/agents/publish",
            Some(&alice),
            json!({"package_name": "com.example.bad", "name": "",
                   "description": "Bad payment fields.",
                   "payment": {"model": "paid", "rails": ["base:usdc"], "scheme": "ex act",
                               "pay_to": "0x 1", "price": {"amount": "0.01", "asset": "eurc"}}}),
        )
        .await;
    response.assert_problem(422, "validation_failed");
    let fields: Vec<&str> = response.body["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .filter_map(|error| error["field"].as_str())
        .collect();
    assert_eq!(
        fields,
        [
            "name",
            "payment.scheme",
            "payment.pay_to",
            "payment.price.amount",
            "payment.price.asset"
        ]
    );
}

#[tokio::test]
async fn the_openapi_document_types_the_discovery_parameters() {
    let app = TestApp::spawn().await;
    let openapi = app.get("/openapi.json").await.body;
    let parameters = |path: &str| -> Vec<Value> {
        openapi["paths"][path]["get"]["parameters"]
            .as_array()
            .expect("parameters")
            .clone()
    };
    let named = |parameters: &[Value], name: &str| -> Value {
        parameters
            .iter()
            .find(|parameter| parameter["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("parameter {name}"))
    };
    let resources = parameters("/discovery/resources");
    for name in [
        "type",
        "network",
        "asset",
        "scheme",
        "payTo",
        "maxAmount",
        "extensions",
        "limit",
        "offset",
    ] {
        assert_eq!(named(&resources, name)["in"], "query", "{name}");
    }
    assert_eq!(
        named(&resources, "offset")["schema"],
        json!({"type": "integer", "minimum": 0, "maximum": i64::MAX})
    );
    assert_eq!(
        named(&resources, "maxAmount")["schema"]["pattern"],
        "^[0-9]{0,78}$"
    );
    let search = parameters("/discovery/search");
    assert_eq!(named(&search, "query")["required"], true);
    named(&search, "cursor");
    let items = &openapi["components"]["schemas"]["DiscoveryResources"]["properties"];
    assert!(items.get("items").is_some(), "{items}");
    let found = &openapi["components"]["schemas"]["DiscoverySearch"]["properties"];
    assert!(found.get("resources").is_some(), "{found}");
    let payment =
        &openapi["components"]["schemas"]["PublishRequest"]["properties"]["payment"]["properties"];
    for field in ["scheme", "pay_to", "price"] {
        assert!(payment.get(field).is_some(), "{field}");
    }
}

fn urlencode(value: &str) -> String {
    url::form_urlencoded::byte_serialize(value.as_bytes()).collect()
}
