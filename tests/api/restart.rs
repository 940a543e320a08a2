//! Durability across restarts: what was acknowledged is there after a restart.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use agent_registry::mirror::{Quiet, Source};
use serde_json::json;

use crate::helpers::{MASTER_KEY, TestApp, agent_body, package_names, str_at};

#[tokio::test]
async fn agents_and_their_states_survive_a_restart() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let staged = app.publish(&alice, agent_body("com.example.staged")).await;
    let mut live_body = agent_body("com.example.live");
    live_body["payment"] = json!({"model": "paid", "rails": ["base:usdc"]});
    let live = app.publish_live(&alice, live_body).await;
    let unpublished = app
        .publish_live(&alice, agent_body("com.example.unpublished"))
        .await;
    let response = app
        .post_empty("/api/agents/com.example.unpublished/unpublish", &alice)
        .await;
    assert_eq!(response.status, 200);
    let deleted = app
        .publish_live(&alice, agent_body("com.example.deleted"))
        .await;
    assert_eq!(
        app.delete("/api/agents/com.example.deleted", &alice)
            .await
            .status,
        204
    );

    let app = app.restart().await;

    for (record, state) in [
        (&staged, "STAGE"),
        (&live, "ACTIVE"),
        (&unpublished, "STAGE"),
    ] {
        let path = format!("/api/agents/{}", str_at(record, "/id"));
        let after = app.get_as(&path, &alice).await;
        assert_eq!(after.status, 200, "{}", after.text);
        assert_eq!(after.body["state"], state, "{path}");
        assert_eq!(after.body["package_name"], record["package_name"]);
        assert_eq!(after.body["created_at"], record["created_at"]);
        assert_eq!(
            after.body["verification_token"],
            record["verification_token"]
        );
    }
    let public = app.get("/public/agents/com.example.live").await;
    assert_eq!(public.body["payment"], live["payment"]);
    assert_eq!(public.body["published_at"], live["published_at"]);
    let searched = app
        .get("/public/agents?q=example&payment_rail=base:usdc")
        .await;
    assert_eq!(package_names(&searched), ["com.example.live"]);
    let mut listed = package_names(&app.get("/public/agents").await);
    listed.sort();
    assert_eq!(
        listed,
        [
            "com.example.live",
            "registry.agent-registry",
            "registry.utility.finance",
            "registry.utility.reader",
            "registry.utility.wiki"
        ]
    );
    app.get(&format!("/public/agents/{}", str_at(&deleted, "/id")))
        .await
        .assert_problem(404, "agent_not_found");
}

#[tokio::test]
async fn agents_can_be_changed_after_a_restart() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    app.publish(&alice, agent_body("com.example.weather")).await;

    let app = app.restart().await;

    let mut body = agent_body("com.example.weather");
    body["name"] = json!("Renamed");
    let updated = app
        .put("/api/agents/com.example.weather", &alice, body)
        .await;
    assert_eq!(updated.status, 200, "{}", updated.text);
    assert_eq!(updated.body["revision"], 2);
    let live = app
        .post_empty("/api/agents/com.example.weather/go-live", &alice)
        .await;
    assert_eq!(live.status, 200, "{}", live.text);
    app.try_publish(&alice, agent_body("com.example.weather"))
        .await
        .assert_problem(409, "conflict");
}

#[tokio::test]
async fn tokens_survive_a_restart_and_revoked_tokens_stay_revoked() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let reader = app.token("bob", &["a2a"]).await;
    let revoked = app
        .post("/api/tokens", Some(MASTER_KEY), json!({"owner": "carol"}))
        .await;
    let revoked_secret = str_at(&revoked.body, "/token").to_owned();
    let response = app
        .delete(
            &format!("/api/tokens/{}", str_at(&revoked.body, "/id")),
            MASTER_KEY,
        )
        .await;
    assert_eq!(response.status, 204);

    let app = app.restart().await;

    assert_eq!(app.get_as("/api/agents", &alice).await.status, 200);
    app.get_as("/api/agents", &reader)
        .await
        .assert_problem(403, "forbidden");
    app.get_as("/api/agents", &revoked_secret)
        .await
        .assert_problem(401, "unauthorized");
    let tokens = app.get_as("/api/tokens", MASTER_KEY).await;
    assert_eq!(tokens.body["tokens"].as_array().map(Vec::len), Some(3));
}

#[tokio::test]
async fn the_hosted_agents_are_registered_once_across_restarts() {
    let app = TestApp::spawn().await;
    let before = app.get("/public/agents/registry.utility.wiki").await;

    let app = app.restart().await.restart().await;

    let after = app.get("/public/agents/registry.utility.wiki").await;
    assert_eq!(after.body["id"], before.body["id"]);
    assert_eq!(after.body["revision"], before.body["revision"]);
    assert_eq!(app.get("/public/agents?tags=test").await.body["total"], 3);
}

/// An MCP Registry whose first listing request never answers (the pass under way when the
/// process died) and whose later ones list nothing.
async fn stalling_upstream() -> (String, Arc<AtomicUsize>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&hits);
    let router = axum::Router::new().route(
        "/v0.1/servers",
        axum::routing::get(move || {
            let hits = Arc::clone(&counted);
            async move {
                if hits.fetch_add(1, Ordering::SeqCst) == 0 {
                    std::future::pending::<()>().await;
                }
                axum::Json(json!({"servers": [], "metadata": {"count": 0}}))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))
        .await
        .expect("bind");
    let origin = format!("http://{}", listener.local_addr().expect("address"));
    tokio::spawn(async move { axum::serve(listener, router).await.expect("serve") });
    (origin, hits)
}

/// A pass of `source` as the timer runs one: `None` when it is not this process's turn.
async fn timed_pass(app: &TestApp, source: &Source) -> Option<agent_registry::mirror::PassReport> {
    app.state
        .mirrors
        .pass_if_due(source, false, &Quiet)
        .await
        .expect("the pass succeeds")
}

#[tokio::test]
async fn a_restarted_server_resumes_the_mirror_pass_its_earlier_run_left_leased() {
    let (origin, hits) = stalling_upstream().await;
    let source = Source::parse(&format!("mcp-registry={origin}")).expect("source");
    let app = TestApp::spawn().await;
    assert!(
        app.state.instance.is_stable(),
        "{}",
        app.state.instance.id()
    );
    let mirrors = Arc::clone(&app.state.mirrors);
    let pass = {
        let source = source.clone();
        tokio::spawn(async move { mirrors.pass_if_due(&source, true, &Quiet).await })
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while hits.load(Ordering::SeqCst) == 0 {
        assert!(
            Instant::now() < deadline,
            "the pass never reached the upstream"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Another live process on the same data leaves the source to the one that holds it.
    let sibling = app.sibling().await;
    assert_ne!(sibling.state.instance.id(), app.state.instance.id());
    let turn = timed_pass(&sibling, &source).await;
    assert!(turn.is_none(), "a live process's lease holds");
    drop(sibling);

    // The process dies mid-pass: its lease stays in storage.
    pass.abort();
    let _ = pass.await;
    let app = app.restart().await;

    let resumed = timed_pass(&app, &source).await;
    assert!(
        resumed.is_some(),
        "the restarted process takes back its own lease at once"
    );
    assert_eq!(hits.load(Ordering::SeqCst), 2);
}
