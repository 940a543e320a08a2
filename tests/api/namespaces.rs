//! Namespaces owned before publishing (`--namespace-policy owned`): claims, proofs through a
//! well-known file served by a local fake, subdomains, assignment by the master key, and the
//! refusals.

use agent_registry::config::NamespacePolicy;
use serde_json::{Value, json};

use crate::fakes::Fake;
use crate::helpers::{MASTER_KEY, TestApp, TestResponse, agent_body, error_fields, str_at};

async fn owned_app() -> (TestApp, Fake) {
    let fake = Fake::start().await;
    let app = TestApp::spawn_with(|config| {
        fake.configure(config);
        config.publishing.namespace_policy = NamespacePolicy::Owned;
    })
    .await;
    (app, fake)
}

async fn claim(app: &TestApp, token: &str, namespace: &str) -> TestResponse {
    app.post(
        "/api/namespaces",
        Some(token),
        json!({"namespace": namespace}),
    )
    .await
}

/// Claim `namespace` for `token`'s owner and prove it with the well-known file.
async fn prove(app: &TestApp, fake: &Fake, token: &str, namespace: &str) -> Value {
    let claimed = claim(app, token, namespace).await;
    assert!(
        [200, 201].contains(&claimed.status.as_u16()),
        "{}",
        claimed.text
    );
    fake.set_verification_file(
        str_at(&claimed.body, "/domain"),
        &format!("{}\n", str_at(&claimed.body, "/token")),
    );
    let verified = app
        .post_empty(&format!("/api/namespaces/{namespace}/verify"), token)
        .await;
    assert_eq!(verified.status, 200, "{}", verified.text);
    verified.body
}

#[tokio::test]
async fn an_owner_publishes_only_under_a_namespace_proven_beforehand() {
    let (app, fake) = owned_app().await;
    let alice = app.token("alice", &["agents:write"]).await;

    let refused = app
        .try_publish(&alice, agent_body("com.example.weather"))
        .await;
    refused.assert_problem(403, "namespace_not_owned");
    let detail = str_at(&refused.body, "/detail");
    assert!(detail.contains("'com.example'"), "{detail}");
    assert!(detail.contains("POST /api/namespaces"), "{detail}");
    assert!(detail.contains("example.com"), "{detail}");

    let claimed = claim(&app, &alice, "Com.Example").await;
    assert_eq!(claimed.status, 201, "{}", claimed.text);
    let body = &claimed.body;
    assert_eq!(body["namespace"], "com.example");
    assert_eq!(body["owner"], "alice");
    assert_eq!(body["domain"], "example.com");
    assert_eq!(body["verified"], false);
    let token = str_at(body, "/token").to_owned();
    assert_eq!(body["dns_txt"], format!("agent-registry-verify={token}"));
    assert!(
        str_at(body, "/file_url").ends_with("/verify/example.com/agent-registry-verify.txt"),
        "{body}"
    );
    assert!(
        str_at(body, "/verify_url").ends_with("/api/namespaces/com.example/verify"),
        "{body}"
    );
    // Claimed but not proven: still refused.
    app.try_publish(&alice, agent_body("com.example.weather"))
        .await
        .assert_problem(403, "namespace_not_owned");
    // A second claim answers the first one's token.
    let again = claim(&app, &alice, "com.example").await;
    assert_eq!(again.status, 200, "{}", again.text);
    assert_eq!(again.body["token"], token.as_str());

    let missing = app
        .post_empty("/api/namespaces/com.example/verify", &alice)
        .await;
    missing.assert_problem(422, "verification_failed");
    fake.set_verification_file("example.com", &format!("{token}\n"));
    let verified = app
        .post_empty("/api/namespaces/com.example/verify", &alice)
        .await;
    assert_eq!(verified.status, 200, "{}", verified.text);
    assert_eq!(verified.body["verified"], true);
    assert!(
        str_at(&verified.body, "/proof").ends_with("/verify/example.com/agent-registry-verify.txt")
    );

    app.publish(&alice, agent_body("com.example.weather")).await;
    // The proof of example.com covers its subdomains' package names.
    app.publish(&alice, agent_body("com.example.hub.tools"))
        .await;
    app.try_publish(&alice, agent_body("com.examples.weather"))
        .await
        .assert_problem(403, "namespace_not_owned");

    let me = app.get_as("/api/me", &alice).await;
    assert_eq!(me.body["namespace_policy"], "owned");
    assert_eq!(me.body["owned_namespaces"], json!(["com.example"]));
    let listed = app.get_as("/api/namespaces", &alice).await;
    assert_eq!(listed.body["policy"], "owned");
    assert_eq!(listed.body["namespaces"][0]["namespace"], "com.example");
    assert_eq!(listed.body["namespaces"][0]["verified"], true);
}

#[tokio::test]
async fn a_proven_namespace_is_nobody_else_s_and_updates_need_it_too() {
    let (app, fake) = owned_app().await;
    let alice = app.token("alice", &["agents:write"]).await;
    let bob = app.token("bob", &["agents:write"]).await;
    // Both may claim while nobody has proven it; the first proof wins.
    let bobs = claim(&app, &bob, "com.example").await;
    assert_eq!(bobs.status, 201, "{}", bobs.text);
    prove(&app, &fake, &alice, "com.example").await;
    claim(&app, &bob, "com.example")
        .await
        .assert_problem(409, "namespace_taken");
    app.post_empty("/api/namespaces/com.example/verify", &bob)
        .await
        .assert_problem(409, "namespace_taken");
    app.try_publish(&bob, agent_body("com.example.weather"))
        .await
        .assert_problem(403, "namespace_not_owned");

    let record = app.publish(&alice, agent_body("com.example.weather")).await;
    let id = str_at(&record, "/id").to_owned();
    let released = app.delete("/api/namespaces/com.example", &alice).await;
    assert_eq!(released.status, 204, "{}", released.text);
    app.delete("/api/namespaces/com.example", &alice)
        .await
        .assert_problem(404, "namespace_not_found");
    // Without the namespace, the owner's own agent cannot be updated either.
    let mut update = agent_body("com.example.weather");
    update["description"] = json!("Changed");
    app.put(&format!("/api/agents/{id}"), &alice, update)
        .await
        .assert_problem(403, "namespace_not_owned");
    // Released, it is free for another owner's proof.
    prove(&app, &fake, &bob, "com.example").await;
    app.publish(&bob, agent_body("com.example.forecast")).await;
}

#[tokio::test]
async fn the_master_key_assigns_namespaces_and_publishes_anywhere() {
    let (app, _fake) = owned_app().await;
    let bob = app.token("bob", &["agents:write"]).await;

    let assigned = app
        .post(
            "/api/namespaces",
            Some(MASTER_KEY),
            json!({"namespace": "org.bob", "owner": "bob"}),
        )
        .await;
    assert_eq!(assigned.status, 201, "{}", assigned.text);
    assert_eq!(assigned.body["owner"], "bob");
    assert_eq!(assigned.body["verified"], true);
    assert_eq!(assigned.body["proof"], "assigned");
    app.publish(&bob, agent_body("org.bob.agent")).await;
    app.publish(MASTER_KEY, agent_body("net.anything.agent"))
        .await;

    // Only the master key names another owner.
    app.post(
        "/api/namespaces",
        Some(&bob),
        json!({"namespace": "org.carol", "owner": "carol"}),
    )
    .await
    .assert_problem(403, "forbidden");
    // Assigning a namespace another owner holds is refused too.
    app.post(
        "/api/namespaces",
        Some(MASTER_KEY),
        json!({"namespace": "org.bob", "owner": "carol"}),
    )
    .await
    .assert_problem(409, "namespace_taken");
    // The master key sees the holder's claim, and takes it down.
    let held = app
        .post_empty("/api/namespaces/org.bob/verify", MASTER_KEY)
        .await;
    assert_eq!(held.status, 200, "{}", held.text);
    assert_eq!(held.body["owner"], "bob");
    let taken_down = app.delete("/api/namespaces/org.bob", MASTER_KEY).await;
    assert_eq!(taken_down.status, 204, "{}", taken_down.text);
    app.try_publish(&bob, agent_body("org.bob.other"))
        .await
        .assert_problem(403, "namespace_not_owned");
}

#[tokio::test]
async fn bad_claims_are_refused_each_with_its_reason() {
    let (app, _fake) = owned_app().await;
    let alice = app.token("alice", &["agents:write"]).await;
    let reader = app.token("alice", &["a2a"]).await;

    for (body, field) in [
        (json!({"namespace": "io.github"}), "namespace"),
        (json!({"namespace": "com"}), "namespace"),
        (json!({"namespace": "com..example"}), "namespace"),
        (json!({"namespace": 7}), "namespace"),
        (json!({}), "namespace"),
        (json!({"namespace": "x".repeat(5000)}), "namespace"),
    ] {
        let refused = app.post("/api/namespaces", Some(&alice), body).await;
        refused.assert_problem(422, "validation_failed");
        assert_eq!(error_fields(&refused), [field], "{}", refused.text);
    }
    let shared = app
        .post(
            "/api/namespaces",
            Some(&alice),
            json!({"namespace": "io.github"}),
        )
        .await;
    assert!(
        shared.text.contains("io.github.yourname"),
        "{}",
        shared.text
    );
    app.post(
        "/api/namespaces",
        Some(&reader),
        json!({"namespace": "com.example"}),
    )
    .await
    .assert_problem(403, "forbidden");
    app.post("/api/namespaces", None, json!({"namespace": "com.example"}))
        .await
        .assert_problem(401, "unauthorized");
    for path in [
        "/api/namespaces/com.example/verify",
        "/api/namespaces/not%20a%20namespace/verify",
        "/api/namespaces/%00/verify",
    ] {
        app.post_empty(path, &alice)
            .await
            .assert_problem(404, "namespace_not_found");
    }
}

#[tokio::test]
async fn a_verified_agent_proves_its_namespace_under_the_open_policy() {
    let fake = Fake::start().await;
    let app = TestApp::spawn_with(|config| fake.configure(config)).await;
    let alice = app.token("alice", &["agents:write"]).await;
    let record = app.publish(&alice, agent_body("com.acme.bot")).await;
    fake.set_verification_file(
        "acme.com",
        &format!("{}\n", str_at(&record, "/verification_token")),
    );
    let verified = app
        .post_empty("/api/agents/com.acme.bot/verify", &alice)
        .await;
    assert_eq!(verified.status, 200, "{}", verified.text);

    let listed = app.get_as("/api/namespaces", &alice).await;
    assert_eq!(listed.body["policy"], "open");
    let held = &listed.body["namespaces"][0];
    assert_eq!(held["namespace"], "com.acme");
    assert_eq!(held["verified"], true);
    assert_eq!(
        held["proof"],
        format!("agent:{}", str_at(&record, "/id")).as_str()
    );
    let me = app.get_as("/api/me", &alice).await;
    assert_eq!(me.body["owned_namespaces"], json!(["com.acme"]));
}
