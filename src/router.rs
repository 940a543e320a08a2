//! The one route table: every path, who may call it, and the OpenAPI document beside it.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use tower_http::cors::CorsLayer;
use tower_http::trace::TraceLayer;
use utoipa::OpenApi;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa_swagger_ui::SwaggerUi;

use crate::api::ard as ard_api;
use crate::api::audit as audit_api;
use crate::api::{
    agents, bazaar, bindings, changes, identity, mcp_registry, mirrors, namespaces, ops, orgs,
    public, signin, tokens,
};
use crate::middleware::{self, RateLimit};
use crate::playground::http as playground;
use crate::state::AppState;
use crate::{a2a, ard, error, mcp, web};

/// Request bodies above this are refused with 413.
pub const BODY_LIMIT_BYTES: usize = 1024 * 1024;

#[derive(OpenApi)]
#[openapi(
    info(title = "Agent Registry", description = "Publish, search and resolve A2A agents."),
    paths(
        public::list_agents, public::search_agents, public::get_agent, public::resolve_card,
        public::list_versions, public::get_version,
        changes::list_changes,
        bazaar::list_resources, bazaar::search_resources,
        mcp_registry::list_servers, mcp_registry::list_server_versions, mcp_registry::get_server,
        a2a::registry_card, a2a::jwks, a2a::utility_card,
        ard_api::manifest, ard_api::ai_catalog, ard_api::search,
        ard_api::explore, ard_api::list, ard_api::lookup,
        a2a::jsonrpc::handle, a2a::legacy::discover, a2a::legacy::message,
        a2a::utility::invoke, a2a::utility::handle,
        mcp::http::post, mcp::http::get, mcp::http::delete,
        agents::publish_agent, agents::update_agent, agents::go_live, agents::unpublish,
        agents::verify_agent,
        agents::delete_agent, agents::list_own_agents, agents::get_own_agent,
        namespaces::claim_namespace, namespaces::list_namespaces, namespaces::verify_namespace,
        namespaces::release_namespace,
        bindings::create_binding, bindings::list_bindings, bindings::delete_binding,
        orgs::create_org, orgs::list_orgs, orgs::get_org, orgs::set_member, orgs::remove_member,
        orgs::link_github, orgs::unlink_github,
        orgs::transfer_agent, orgs::list_transfers, orgs::accept_transfer,
        agents::deprecate, agents::undeprecate,
        orgs::decline_transfer, audit_api::list_audit,
        tokens::create_token, tokens::list_tokens, tokens::revoke_token,
        identity::me, identity::exchange,
        signin::providers, signin::login, signin::callback, signin::logout,
        signin::github_exchange,
        playground::create_session, playground::get_session, playground::delete_session,
        playground::discover, playground::execute,
        ops::healthz, ops::readyz, ops::metrics, mirrors::list_mirrors,
    ),
    components(schemas(error::Problem, error::ErrorCode)),
    modifiers(&BearerAuth),
    tags(
        (name = "public", description = "Unauthenticated reads and search"),
        (name = "discovery", description = "Discovery standards: ARD (the manifest and the ARD registry API at /ard, with federation), x402 Bazaar (agents that take x402 payments, as paid resources), the MCP Registry read API"),
        (name = "management", description = "Owner-authenticated agent lifecycle, namespaces, organisations and transfers (scope agents:write)"),
        (name = "tokens", description = "API tokens, the caller (`/api/me`), trusted publishing from CI (`/api/auth/oidc`), and sign-in for people (`/api/auth/providers`, the browser's `/auth/login` and `/auth/callback`, `/auth/logout`, the CLI's `/api/auth/github`)"),
        (name = "a2a", description = "Agent cards and A2A endpoints"),
        (name = "mcp", description = "The registry as an MCP server (Streamable HTTP): tools that search and read agents, resources for records and cards"),
        (name = "playground", description = "Sessions that discover and execute agents (scope playground)"),
        (name = "operations", description = "Health, readiness, metrics"),
    )
)]
pub struct ApiDoc;

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// What answers while the server starts (storage opening, the keyword index loading): the
/// process is alive, and nothing else is ready yet.
pub fn starting() -> Router {
    async fn not_yet() -> axum::response::Response {
        use axum::response::IntoResponse;
        let mut error = crate::error::ApiError::new(
            crate::error::ErrorCode::Unavailable,
            "the registry is starting: storage is opening and the search index is loading",
        );
        error.retry_after_secs = Some(1);
        error.into_response()
    }
    Router::new()
        .route("/healthz", get(ops::healthz))
        .fallback(not_yet)
}

/// What `/mcp` uses of the application: the registry and signer behind its tools, its
/// sessions, and the REST API's token check.
fn mcp_endpoint(state: &AppState) -> Arc<mcp::http::McpHttp> {
    let source = mcp::source::Local {
        registry: Arc::clone(&state.registry),
        signer: Arc::clone(&state.signer),
        base_url: Arc::clone(&state.base_url),
        viewer: crate::domain::access::Viewer::Anonymous,
    };
    let config = &state.config.mcp;
    let tokens = Arc::clone(&state.auth);
    let authenticate: mcp::http::Authenticate = Arc::new(move |secret: String| {
        let tokens = Arc::clone(&tokens);
        Box::pin(async move {
            let caller = tokens.authenticate(&secret).await?;
            let viewer = tokens.viewer_of(&caller).await?;
            Ok((caller, viewer))
        })
    });
    Arc::new(mcp::http::McpHttp::new(
        mcp::McpServer::new(Arc::new(source)),
        mcp::session::Sessions::new(config.max_sessions(), config.session_idle()),
        &state.base_url,
        &config.mcp_allowed_origins,
        authenticate,
    ))
}

/// The span of one request (logged at debug level): its method and target, except the query
/// of the sign-in paths, which carries authorization codes and states that no log may hold.
fn request_span(request: &axum::http::Request<axum::body::Body>) -> tracing::Span {
    let uri = request.uri();
    let target = if uri.path().starts_with("/auth/") {
        uri.path()
    } else {
        uri.path_and_query()
            .map_or(uri.path(), |target| target.as_str())
    };
    tracing::debug_span!("request", method = %request.method(), uri = %target,
        version = ?request.version())
}

/// The whole HTTP surface.
pub fn router(state: AppState) -> Router {
    let rate_limit = Arc::new(RateLimit::from_config(&state.config));
    let audit = Arc::new(middleware::AuditLayer {
        store: Arc::clone(&state.store),
        registry: Arc::clone(&state.registry),
        proxy_hops: state.config.proxy_hops(),
    });
    RateLimit::prune_periodically(&rate_limit);
    let timeout = Duration::from_secs(state.config.request_timeout_secs.max(1));

    let public = Router::new()
        .route("/public/agents", get(public::list_agents))
        .route("/public/agents/search", post(public::search_agents))
        .route(
            "/public/agents/resolve/{package_name}",
            get(public::resolve_card),
        )
        .route("/public/agents/{identifier}", get(public::get_agent))
        .route(
            "/public/agents/{identifier}/versions",
            get(public::list_versions),
        )
        .route(
            "/public/agents/{identifier}/versions/{version}",
            get(public::get_version),
        )
        .route("/public/changes", get(changes::list_changes))
        .route("/discovery/resources", get(bazaar::list_resources))
        .route("/discovery/search", get(bazaar::search_resources))
        .route("/.well-known/agent-card.json", get(a2a::registry_card))
        .route("/.well-known/jwks.json", get(a2a::jwks))
        .route("/v0.1/servers", get(mcp_registry::list_servers))
        .route(
            "/v0.1/servers/{name}/versions",
            get(mcp_registry::list_server_versions),
        )
        .route(
            "/v0.1/servers/{name}/versions/{version}",
            get(mcp_registry::get_server),
        )
        .route("/a2a/message", post(a2a::legacy::message))
        // Trusted publishing: unauthenticated (the ID token is the credential), so per IP.
        .route("/api/auth/oidc", post(identity::exchange))
        .route(
            "/a2a/utility/{name}/.well-known/agent-card.json",
            get(a2a::utility_card),
        )
        // Who is reading: anonymous, or the private agents a token or sign-in may see.
        .route_layer(axum::middleware::from_fn_with_state(
            Arc::clone(&state.auth),
            crate::auth::resolve_viewer,
        ))
        // The MCP server authenticates its own sessions, and answers in JSON-RPC's shape.
        .route(
            "/mcp",
            post(mcp::http::post)
                .get(mcp::http::get)
                .delete(mcp::http::delete)
                .with_state(mcp_endpoint(&state)),
        )
        .route_layer(axum::middleware::from_fn_with_state(
            Arc::clone(&audit),
            middleware::audit,
        ))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&rate_limit),
            middleware::rate_limit,
        ));

    // ARD: the manifest at both well-known paths and the registry API, over their own state.
    let discovery = Router::new()
        .route("/.well-known/ard.json", get(ard_api::manifest))
        .route("/.well-known/ai-catalog.json", get(ard_api::ai_catalog))
        .route("/ard/search", post(ard_api::search))
        .route("/ard/explore", post(ard_api::explore))
        .route("/ard/agents", get(ard_api::list))
        .route("/ard/agents/{identifier}", get(ard_api::lookup))
        .route_layer(axum::middleware::from_fn_with_state(
            Arc::clone(&state.auth),
            crate::auth::resolve_viewer,
        ))
        .with_state(Arc::clone(&state.ard))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&rate_limit),
            middleware::rate_limit,
        ));

    let authenticated = Router::new()
        .route("/api/me", get(identity::me))
        .route("/api/agents", get(agents::list_own_agents))
        .route("/api/agents/publish", post(agents::publish_agent))
        .route(
            "/api/agents/{id}",
            get(agents::get_own_agent)
                .put(agents::update_agent)
                .delete(agents::delete_agent),
        )
        .route("/api/agents/{id}/go-live", post(agents::go_live))
        .route("/api/agents/{id}/unpublish", post(agents::unpublish))
        .route("/api/agents/{id}/verify", post(agents::verify_agent))
        .route("/api/agents/{id}/transfer", post(orgs::transfer_agent))
        .route(
            "/api/agents/{id}/deprecate",
            post(agents::deprecate).delete(agents::undeprecate),
        )
        .route("/api/transfers", get(orgs::list_transfers))
        .route("/api/transfers/{id}/accept", post(orgs::accept_transfer))
        .route("/api/transfers/{id}/decline", post(orgs::decline_transfer))
        .route("/api/orgs", get(orgs::list_orgs).post(orgs::create_org))
        .route("/api/orgs/{org}", get(orgs::get_org))
        .route(
            "/api/orgs/{org}/github",
            axum::routing::put(orgs::link_github).delete(orgs::unlink_github),
        )
        .route(
            "/api/orgs/{org}/members/{owner}",
            axum::routing::put(orgs::set_member).delete(orgs::remove_member),
        )
        .route(
            "/api/namespaces",
            get(namespaces::list_namespaces).post(namespaces::claim_namespace),
        )
        .route(
            "/api/namespaces/{namespace}",
            axum::routing::delete(namespaces::release_namespace),
        )
        .route(
            "/api/namespaces/{namespace}/verify",
            post(namespaces::verify_namespace),
        )
        .route(
            "/api/bindings",
            get(bindings::list_bindings).post(bindings::create_binding),
        )
        .route(
            "/api/bindings/{id}",
            axum::routing::delete(bindings::delete_binding),
        )
        .route(
            "/api/tokens",
            get(tokens::list_tokens).post(tokens::create_token),
        )
        .route(
            "/api/tokens/{id}",
            axum::routing::delete(tokens::revoke_token),
        )
        .route("/api/mirrors", get(mirrors::list_mirrors))
        .route("/api/playground/session", post(playground::create_session))
        .route(
            "/api/playground/session/{id}",
            get(playground::get_session).delete(playground::delete_session),
        )
        .route(
            "/api/playground/session/{id}/discover",
            post(playground::discover),
        )
        .route(
            "/api/playground/session/{id}/execute",
            post(playground::execute),
        )
        .route("/a2a/v1", post(a2a::jsonrpc::handle))
        // HTTP clients that join a path to the card's URL add a slash: the same endpoints.
        .route("/a2a/v1/", post(a2a::jsonrpc::handle))
        .route("/a2a/discover", post(a2a::legacy::discover))
        .route("/a2a/utility/{name}", post(a2a::utility::invoke))
        .route("/a2a/utility/{name}/v1", post(a2a::utility::handle))
        .route("/a2a/utility/{name}/v1/", post(a2a::utility::handle))
        .route("/api/audit", get(audit_api::list_audit))
        .route_layer(axum::middleware::from_fn_with_state(
            Arc::clone(&audit),
            middleware::audit,
        ));

    // The web interface (src/web): pages for people, not REST paths, so not in `ApiDoc`.
    let pages = Router::new()
        // An agent's page is a private agent's only for those who may see it; the other pages
        // and files are the same for everyone, and read no credential.
        .route("/agents/{package_name}", get(web::agent_page))
        .route_layer(axum::middleware::from_fn_with_state(
            Arc::clone(&state.auth),
            crate::auth::resolve_viewer,
        ))
        .route("/", get(web::search_page))
        .route("/playground", get(web::playground_page))
        .route("/console", get(web::console_page))
        .route("/assets/{file}", get(web::asset))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&rate_limit),
            middleware::rate_limit,
        ));

    // Sign-in: unauthenticated, each start stores a row and each finish calls the provider, so
    // a tighter per-IP limit than the public paths'.
    let signin_limit = Arc::new(RateLimit::for_signin(&state.config));
    RateLimit::prune_periodically(&signin_limit);
    let signin = Router::new()
        .route("/auth/login", get(signin::login))
        .route("/auth/callback", get(signin::callback))
        .route("/api/auth/github", post(signin::github_exchange))
        .layer(axum::middleware::from_fn_with_state(
            signin_limit,
            middleware::rate_limit,
        ))
        .route("/api/auth/providers", get(signin::providers))
        .route("/auth/logout", post(signin::logout))
        .route_layer(axum::middleware::from_fn_with_state(
            Arc::clone(&audit),
            middleware::audit,
        ));

    let operations = Router::new()
        .route("/healthz", get(ops::healthz))
        .route("/readyz", get(ops::readyz))
        .route("/metrics", get(ops::metrics));

    Router::new()
        .merge(public)
        .merge(discovery)
        .merge(authenticated)
        .merge(signin)
        .merge(operations)
        .merge(pages)
        .merge(SwaggerUi::new("/docs").external_url_unchecked(
            "/openapi.json",
            crate::openapi::document(&ApiDoc::openapi()),
        ))
        .fallback(web::not_found)
        .method_not_allowed_fallback(middleware::method_not_allowed)
        .with_state(state)
        .layer(DefaultBodyLimit::max(BODY_LIMIT_BYTES))
        .layer(axum::middleware::from_fn_with_state(
            timeout,
            middleware::timeout,
        ))
        .layer(axum::middleware::from_fn_with_state(
            BODY_LIMIT_BYTES,
            middleware::early_limits,
        ))
        .layer(axum::middleware::from_fn(ard::error::in_ard_shape))
        .layer(axum::middleware::from_fn(middleware::track_metrics))
        .layer(CorsLayer::permissive())
        .layer(TraceLayer::new_for_http().make_span_with(request_span))
}
