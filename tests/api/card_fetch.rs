//! Publishing from a card: a body with a `manifest_url` and no name
//! or description is filled from the A2A v1.0 card fetched there.

use agent_registry::signing::{CardSigner, SigningKey};
use serde_json::{Value, json};

use crate::fakes::{Fake, weather_card};
use crate::helpers::{TestApp, error_fields};

async fn app_with_fake() -> (TestApp, Fake) {
    let fake = Fake::start().await;
    let app = TestApp::spawn_with(|config| fake.configure(config)).await;
    (app, fake)
}

#[tokio::test]
async fn publishing_only_a_manifest_url_fills_the_record_from_the_card() {
    let (app, fake) = app_with_fake().await;
    let token = app.token("alice", &["agents:write"]).await;
    let manifest_url = fake.url("/cards/weather.json");

    let record = app
        .publish(
            &token,
            json!({"package_name": "com.example.remote", "manifest_url": manifest_url}),
        )
        .await;

    assert_eq!(record["name"], "Remote Weather");
    assert_eq!(
        record["description"],
        "Forecasts from a card on the network."
    );
    assert_eq!(record["version"], "2.0.1");
    assert_eq!(record["manifest_url"], manifest_url);
    assert_eq!(record["url"], "https://weather.example.com/a2a/v1");
    let names: Vec<&str> = record["capabilities"]
        .as_array()
        .expect("capabilities")
        .iter()
        .filter_map(|capability| capability["name"].as_str())
        .collect();
    assert_eq!(names, ["get_forecast", "get_alerts"]);
    assert_eq!(record["payment"]["model"], "paid");
    assert_eq!(record["payment"]["protocols"], json!(["x402"]));
    assert_eq!(record["payment"]["rails"][0]["network"], "base");
    assert_eq!(
        record["representative_queries"],
        json!(["Weather in Paris tomorrow"]),
        "the card's skill examples stand for representative queries"
    );
    let id = record["id"].as_str().expect("id");
    app.post_empty(&format!("/api/agents/{id}/go-live"), &token)
        .await;
    let card = app.get("/public/agents/resolve/com.example.remote").await;
    assert_eq!(
        crate::cards::verified(&app, &card.body).await,
        agent_registry::signing::signed_form(&weather_card("https://weather.example.com/a2a/v1")),
        "the fetched card is served as published"
    );
}

#[tokio::test]
async fn fields_in_the_body_win_over_the_fetched_card() {
    let (app, fake) = app_with_fake().await;
    let token = app.token("alice", &["agents:write"]).await;

    let record = app
        .publish(
            &token,
            json!({"package_name": "com.example.remote", "manifest_url": fake.url("/cards/weather.json"),
                   "name": "My Weather", "payment": {"model": "free"}, "tags": ["weather"]}),
        )
        .await;

    assert_eq!(record["name"], "My Weather");
    assert_eq!(
        record["description"],
        "Forecasts from a card on the network."
    );
    assert_eq!(record["payment"]["model"], "free");
    assert_eq!(record["tags"], json!(["weather"]));
}

#[tokio::test]
async fn an_invalid_card_is_a_422_listing_what_is_wrong() {
    let (app, fake) = app_with_fake().await;
    let token = app.token("alice", &["agents:write"]).await;

    let response = app
        .try_publish(&token, json!({"package_name": "com.example.broken", "manifest_url": fake.url("/cards/invalid.json")}))
        .await;

    response.assert_problem(422, "validation_failed");
    assert_eq!(
        error_fields(&response),
        [
            "card.capabilities",
            "card.defaultInputModes",
            "card.defaultOutputModes",
            "card.description",
            "card.skills[0].description",
            "card.skills[0].name",
            "card.skills[0].tags",
            "card.supportedInterfaces",
        ]
    );
}

#[tokio::test]
async fn a_v0_3_card_is_refused_with_a_hint() {
    let (app, fake) = app_with_fake().await;
    let token = app.token("alice", &["agents:write"]).await;

    let response = app
        .try_publish(
            &token,
            json!({"package_name": "com.example.old", "manifest_url": fake.url("/cards/old.json")}),
        )
        .await;

    response.assert_problem(422, "validation_failed");
    assert_eq!(error_fields(&response), ["card.supportedInterfaces"]);
    assert!(
        response.body["errors"][0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("v0.3"))
    );
}

#[tokio::test]
async fn a_manifest_url_without_a_card_is_a_422_on_manifest_url() {
    let (app, fake) = app_with_fake().await;
    let token = app.token("alice", &["agents:write"]).await;

    for (path, needle) in [
        ("/cards/missing.json", "HTTP 404"),
        ("/cards/page.html", "text/html"),
        ("/cards/huge.json", "65536"),
    ] {
        let response = app
            .try_publish(
                &token,
                json!({"package_name": "com.example.nocard", "manifest_url": fake.url(path)}),
            )
            .await;

        response.assert_problem(422, "validation_failed");
        assert_eq!(error_fields(&response), ["manifest_url"], "{path}");
        let message = response.body["errors"][0]["message"]
            .as_str()
            .expect("message");
        assert!(message.contains(needle), "{path}: {message}");
    }
}

#[tokio::test]
async fn an_unreachable_manifest_host_is_an_upstream_error() {
    let (app, _fake) = app_with_fake().await;
    let token = app.token("alice", &["agents:write"]).await;
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = closed.local_addr().expect("addr").port();
    drop(closed);

    let response = app
        .post(
            "/api/agents/publish",
            Some(&token),
            json!({"package_name": "com.example.down",
                   "manifest_url": format!("http://127.0.0.1:{port}/.well-known/agent-card.json")}),
        )
        .await;

    response.assert_problem(502, "upstream_error");
}

#[tokio::test]
async fn the_package_name_is_still_required() {
    let (app, fake) = app_with_fake().await;
    let token = app.token("alice", &["agents:write"]).await;

    let response = app
        .try_publish(
            &token,
            json!({"manifest_url": fake.url("/cards/weather.json")}),
        )
        .await;

    response.assert_problem(422, "validation_failed");
    assert_eq!(error_fields(&response), ["package_name"]);
}

/// A card signed as its publisher would, with its key set served by the fake.
fn publisher_signed_card(fake: &Fake) -> (Value, String) {
    let key = SigningKey::generate_es256().expect("key");
    let kid = key.kid().to_owned();
    let jwks_url = fake.set_document("publisher-jwks.json", json!({"keys": [key.public_jwk()]}));
    let signer = CardSigner::new(key, Vec::new(), jwks_url);
    (
        signer.sign(&weather_card("https://weather.example.com/a2a/v1")),
        kid,
    )
}

#[tokio::test]
async fn a_publishers_signature_is_checked_and_recorded() {
    let (app, fake) = app_with_fake().await;
    let token = app.token("alice", &["agents:write"]).await;
    let (signed, kid) = publisher_signed_card(&fake);
    let manifest_url = fake.set_document("signed-card.json", signed.clone());

    let record = app
        .publish(
            &token,
            json!({"package_name": "com.example.signed", "manifest_url": manifest_url}),
        )
        .await;

    assert_eq!(record["card_signature"]["status"], "valid", "{record}");
    assert_eq!(record["card_signature"]["kid"], kid.as_str());
    assert!(record["card_signature"]["checked_at"].is_string());
    let id = record["id"].as_str().expect("id");
    app.post_empty(&format!("/api/agents/{id}/go-live"), &token)
        .await;
    let public = app.get("/public/agents/com.example.signed").await;
    assert_eq!(public.body["card_signature"], record["card_signature"]);

    // The same card changed after signing.
    let mut tampered = signed;
    tampered["description"] = json!("Forecasts, now for free.");
    let record = app
        .publish(
            &token,
            json!({"package_name": "com.example.tampered", "card": tampered}),
        )
        .await;
    assert_eq!(record["card_signature"]["status"], "invalid", "{record}");
    assert_eq!(record["card_signature"]["kid"], kid.as_str());
}

#[tokio::test]
async fn a_signature_whose_key_cannot_be_had_is_unverifiable_and_an_unsigned_card_has_no_check() {
    let (app, fake) = app_with_fake().await;
    let token = app.token("alice", &["agents:write"]).await;
    let (signed, _) = publisher_signed_card(&fake);
    let mut no_key_set = signed.clone();
    // Re-point the signature at a key set that is not there: the header no longer matches,
    // but no key is had, so the check stops at "unverifiable".
    let protected =
        json!({"alg": "ES256", "typ": "JOSE", "kid": "k1", "jku": fake.url("/docs/missing.json")});
    no_key_set["signatures"][0]["protected"] = json!(base64_url(&protected.to_string()));

    let record = app
        .publish(
            &token,
            json!({"package_name": "com.example.nokeys", "card": no_key_set}),
        )
        .await;
    assert_eq!(
        record["card_signature"]["status"], "unverifiable",
        "{record}"
    );
    assert!(
        record["card_signature"]["detail"]
            .as_str()
            .is_some_and(|detail| detail.contains("404")),
        "{record}"
    );

    let record = app
        .publish(
            &token,
            json!({"package_name": "com.example.unsigned", "card": weather_card("https://weather.example.com/a2a/v1")}),
        )
        .await;
    assert!(record.get("card_signature").is_none(), "{record}");
}

fn base64_url(text: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(text)
}
