//! Discovery identifiers (`urn:air:…`) and representative queries: given at publish, kept,
//! and shown wherever the record is.

use serde_json::{Value, json};

use crate::helpers::{TestApp, agent_body, error_fields, str_at};

fn with(mut body: Value, changes: Value) -> Value {
    for (key, value) in changes.as_object().expect("object") {
        body[key] = value.clone();
    }
    body
}

#[tokio::test]
async fn a_published_agent_gets_the_identifier_of_its_package_name() {
    let (app, alice) = TestApp::spawn_as("alice").await;

    let weather = app
        .publish_live(&alice, agent_body("com.example.weather"))
        .await;
    let hosted = app
        .publish_live(&alice, agent_body("io.github.alice.search"))
        .await;

    assert_eq!(weather["identifier"], "urn:air:example.com:weather");
    assert_eq!(hosted["identifier"], "urn:air:alice.github.io:search");
    let public = app.get("/public/agents/io.github.alice.search").await;
    assert_eq!(public.body["identifier"], "urn:air:alice.github.io:search");
}

#[tokio::test]
async fn a_publisher_may_choose_an_identifier_on_its_own_domain() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let body = with(
        agent_body("com.example.weather"),
        json!({"identifier": "urn:air:example.com:tools:Weather"}),
    );

    let record = app.publish(&alice, body).await;

    assert_eq!(record["identifier"], "urn:air:example.com:tools:Weather");
    let id = str_at(&record, "/id");
    let owned = app.get_as(&format!("/api/agents/{id}"), &alice).await;
    assert_eq!(
        owned.body["identifier"],
        "urn:air:example.com:tools:Weather"
    );
}

#[tokio::test]
async fn an_identifier_on_another_domain_is_a_422_naming_the_field() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let body = with(
        agent_body("com.example.weather"),
        json!({"identifier": "urn:air:google.com:weather"}),
    );

    let response = app.post("/api/agents/publish", Some(&alice), body).await;

    response.assert_problem(422, "validation_failed");
    assert_eq!(error_fields(&response), ["identifier"]);
    assert!(
        response.text.contains("example.com"),
        "the message names the domain it must be: {}",
        response.text
    );
    let malformed = app
        .post(
            "/api/agents/publish",
            Some(&alice),
            with(
                agent_body("com.example.x"),
                json!({"identifier": "urn:air:example.com"}),
            ),
        )
        .await;
    malformed.assert_problem(422, "validation_failed");
    assert_eq!(error_fields(&malformed), ["identifier"]);
}

#[tokio::test]
async fn a_publisher_on_a_subdomain_carries_its_own_identifier_and_is_found_by_it() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    // Real A2A publishers whose host is a subdomain of the package's domain.
    for (package, identifier) in [
        ("ai.lifie.hub.travel", "urn:air:hub.lifie.ai:travel"),
        (
            "com.taskhawktech.governance.audit",
            "urn:air:governance.taskhawktech.com:audit",
        ),
        (
            "app.luminarylane.www.concierge",
            "urn:air:www.luminarylane.app:concierge",
        ),
        ("ai.itsgloria.lucid", "urn:air:lucid.itsgloria.ai:gloria"),
    ] {
        let record = app
            .publish_live(
                &alice,
                with(agent_body(package), json!({"identifier": identifier})),
            )
            .await;
        assert_eq!(record["identifier"], identifier);
        let encoded = identifier.replace(':', "%3A");
        let found = app.get(&format!("/ard/agents/{encoded}")).await;
        assert_eq!(found.status, 200, "{identifier}: {}", found.text);
        assert_eq!(found.body["identifier"], identifier);
        let public = app.get(&format!("/public/agents/{identifier}")).await;
        assert_eq!(public.body["package_name"], package, "{}", public.text);
    }

    // A sibling host, or a subdomain the package name does not spell, is still refused.
    for (package, identifier) in [
        ("ai.lifie.hub.other", "urn:air:other.lifie.ai:tasks"),
        ("ai.lifie.tasks", "urn:air:hub.lifie.ai:tasks"),
    ] {
        let response = app
            .try_publish(
                &alice,
                with(agent_body(package), json!({"identifier": identifier})),
            )
            .await;
        response.assert_problem(422, "validation_failed");
        assert_eq!(error_fields(&response), ["identifier"], "{identifier}");
        assert!(response.text.contains("lifie.ai"), "{}", response.text);
    }
}

#[tokio::test]
async fn a_taken_identifier_is_a_conflict() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let bob = app.token("bob", &[]).await;
    app.publish(&alice, agent_body("com.example.weather")).await;

    let response = app
        .post(
            "/api/agents/publish",
            Some(&bob),
            with(
                agent_body("com.example.other"),
                json!({"identifier": "urn:air:EXAMPLE.com:weather"}),
            ),
        )
        .await;

    response.assert_problem(409, "conflict");
    assert!(response.text.contains("identifier"), "{}", response.text);
}

#[tokio::test]
async fn an_update_may_repeat_the_identifier_but_not_change_it() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let record = app.publish(&alice, agent_body("com.example.weather")).await;
    let path = format!("/api/agents/{}", str_at(&record, "/id"));

    let repeated = app
        .put(
            &path,
            &alice,
            with(
                agent_body("com.example.weather"),
                json!({"identifier": "urn:air:example.com:WEATHER"}),
            ),
        )
        .await;
    assert_eq!(repeated.status, 200, "{}", repeated.text);
    assert_eq!(
        repeated.body["revision"], record["revision"],
        "nothing changed"
    );

    let changed = app
        .put(
            &path,
            &alice,
            with(
                agent_body("com.example.weather"),
                json!({"identifier": "urn:air:example.com:renamed"}),
            ),
        )
        .await;
    changed.assert_problem(422, "validation_failed");
    assert_eq!(error_fields(&changed), ["identifier"]);
}

#[tokio::test]
async fn representative_queries_are_shown_in_the_record_card_and_versions() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let queries = json!([
        "will it rain in Paris tomorrow",
        "weekend forecast for Oslo"
    ]);
    let record = app
        .publish_live(
            &alice,
            with(
                agent_body("com.example.weather"),
                json!({"representative_queries": queries}),
            ),
        )
        .await;
    assert_eq!(record["representative_queries"], queries);

    let card = app.get("/public/agents/resolve/com.example.weather").await;
    let extensions = card.body["capabilities"]["extensions"]
        .as_array()
        .expect("extensions");
    let registry = extensions
        .iter()
        .find(|extension| extension["uri"] == "https://a2a-registry.org/extensions/registry/v1")
        .expect("the registry extension");
    assert_eq!(registry["params"]["representative_queries"], queries);

    let path = format!("/api/agents/{}", str_at(&record, "/id"));
    let newer = json!(["tide tables for Brest", "when is high tide"]);
    let updated = app
        .put(
            &path,
            &alice,
            with(
                agent_body("com.example.weather"),
                json!({"representative_queries": newer}),
            ),
        )
        .await;
    assert_eq!(updated.status, 200, "{}", updated.text);
    let first = app
        .get("/public/agents/com.example.weather/versions/1.0.0")
        .await;
    assert_eq!(first.body["representative_queries"], queries);
    let current = app.get("/public/agents/com.example.weather").await;
    assert_eq!(current.body["representative_queries"], newer);
}

#[tokio::test]
async fn representative_queries_outside_two_to_five_are_a_422() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    for queries in [json!(["only one"]), json!(["1", "2", "3", "4", "5", "6"])] {
        let response = app
            .post(
                "/api/agents/publish",
                Some(&alice),
                with(
                    agent_body("com.example.weather"),
                    json!({"representative_queries": queries}),
                ),
            )
            .await;
        response.assert_problem(422, "validation_failed");
        assert_eq!(error_fields(&response), ["representative_queries"]);
    }
}
