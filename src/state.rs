//! The shared application state handed to every handler.

use std::sync::Arc;

use metrics_exporter_prometheus::PrometheusHandle;

use crate::config::Config;
use crate::hosted::HostedAgents;
use crate::outbound::Outbound;
use crate::registry::Registry;
use crate::store::Store;
use crate::timestamp::Timestamp;

/// What every handler shares. Cheap to clone, as axum does for every extractor and middleware
/// of every request: one shared allocation, its fields read through `Deref`.
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

impl AppState {
    pub fn new(shared: Shared) -> Self {
        Self(Arc::new(shared))
    }
}

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// The fields of `AppState`.
pub struct Shared {
    pub config: Arc<Config>,
    /// The application core: every read and write of agents goes through it.
    pub registry: Arc<Registry>,
    /// Tokens and playground sessions. Agents are read and written only through `registry`.
    pub store: Arc<dyn Store>,
    /// Public root URL without a trailing slash (`{base_url}` and `{site_url}`).
    pub base_url: Arc<str>,
    /// Checks bearer secrets (tokens and the master key) for every authenticated path.
    pub auth: Arc<crate::auth::Authenticator>,
    pub metrics: PrometheusHandle,
    /// Fetches user-supplied URLs (cards, verification files) behind the SSRF guard.
    pub outbound: Arc<Outbound>,
    /// The hosted utility agents.
    pub hosted: HostedAgents,
    /// When this process started: the last time the registry's and hosted agents' cards, which
    /// are built from the binary and its configuration, can have changed.
    pub started_at: Timestamp,
    /// The ARD manifest, registry API and federation.
    pub ard: Arc<crate::ard::Ard>,
    /// Signs every card the registry serves; publishes the keys.
    pub signer: Arc<crate::signing::CardSigner>,
    /// The mirror sources and their state.
    pub mirrors: Arc<crate::mirror::Mirrors>,
    /// Trusted publishing: the OIDC issuers whose ID tokens are exchanged for registry tokens.
    pub publishing: Arc<crate::oidc::TrustedPublishing>,
    /// Sign-in for people: the OpenID Connect providers, GitHub, and browser sessions.
    pub signin: Arc<crate::signin::SignIn>,
    /// How many tokens trusted publishing mints per namespace.
    pub exchange_limit: Arc<crate::oidc::ExchangeLimit>,
    /// The liveness prober, stopped when the last copy of the state is dropped; `None` when
    /// probing is off.
    pub _prober: Option<Arc<crate::task::AbortOnDrop>>,
    /// Deletes audit rows past their retention, hourly; `None` when they are kept forever.
    pub _audit_purge: Option<Arc<crate::task::AbortOnDrop>>,
    /// The mirrors' background passes, stopped with the state; `None` without sources.
    pub _mirroring: Option<Arc<crate::task::AbortOnDrop>>,
    /// Who this process is for its leases; holds the data directory's lock while it lives.
    pub instance: Arc<crate::instance::Instance>,
}

impl axum::extract::FromRef<AppState> for Arc<crate::auth::Authenticator> {
    fn from_ref(state: &AppState) -> Self {
        Arc::clone(&state.auth)
    }
}

impl axum::extract::FromRef<AppState> for Arc<Registry> {
    fn from_ref(state: &AppState) -> Self {
        Arc::clone(&state.registry)
    }
}
