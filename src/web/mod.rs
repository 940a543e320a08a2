//! The web interface: search, agent, playground and console pages over the public and owner APIs.
//!
//! Pages are small HTML shells rendered here (the parts a crawler or a page title needs, escaped);
//! the rest is vanilla JS modules from `assets/`, embedded in the binary and served under
//! `/assets/`. No framework, no build step, nothing fetched from elsewhere at run time.

mod assets;
mod html;

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use std::sync::Arc;

use crate::registry::Registry;
use crate::store::AgentState;

pub use assets::asset;

/// The paths of the web interface in the route table: pages for people, not REST API paths, so
/// they stay out of the OpenAPI document.
pub const ROUTES: &[&str] = &[
    "/",
    "/agents/{package_name}",
    "/playground",
    "/console",
    "/assets/{file}",
];

/// `GET /`: search with filters and instant results.
///
/// Its `Link` header names the registry's ARD manifest, for clients that read headers only.
pub async fn search_page() -> Response {
    let mut response = page(
        StatusCode::OK,
        html::Page {
            title: "Find an agent",
            nav: html::Nav::Search,
            script: "search.js",
            body: include_str!("assets/search.html").to_owned(),
        },
    );
    response.headers_mut().insert(
        axum::http::header::LINK,
        axum::http::HeaderValue::from_static(
            "</.well-known/ard.json>; rel=\"ard\"; type=\"application/json\"",
        ),
    );
    response
}

/// `GET /agents/{package_name}`: one ACTIVE agent; its name and package are rendered here, the
/// capabilities, card and snippets by `agent.js`.
pub async fn agent_page(
    State(registry): State<Arc<Registry>>,
    viewer: crate::auth::Viewer,
    package_name: Result<Path<String>, PathRejection>,
) -> Response {
    // A path that is not even UTF-8 names no agent: the same page as an unknown one.
    let package_name = package_name.map_or_else(|_| String::new(), |Path(name)| name);
    let found = match registry.find(&package_name).await {
        Ok(found) => found,
        Err(err) => {
            tracing::error!(error = %err, "cannot read an agent for its page");
            return error_page(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Something went wrong",
                "The registry could not read this agent. Try again in a moment.",
            );
        }
    };
    // A private agent is a page only for those who may see it: to anyone else, not found.
    let Some(agent) =
        found.filter(|agent| agent.state == AgentState::Active && agent.is_visible_to(&viewer))
    else {
        let shown = crate::domain::truncate(&package_name, 120);
        return error_page(
            StatusCode::NOT_FOUND,
            "Agent not found",
            &format!(
                "No published agent is named “{shown}”. It may be unpublished, deleted, or misspelt."
            ),
        );
    };
    let body = html::fill(
        include_str!("assets/agent.html"),
        &[
            ("package_name", agent.package_name()),
            ("name", &agent.draft.name),
            ("description", &agent.draft.description),
        ],
    );
    let response = page(
        StatusCode::OK,
        html::Page {
            title: &agent.draft.name,
            nav: html::Nav::None,
            script: "agent.js",
            body,
        },
    );
    crate::cached::per_viewer(response, &viewer)
}

/// `GET /playground`: sessions, discovery, schema-generated input forms, execution history.
pub async fn playground_page() -> Response {
    page(
        StatusCode::OK,
        html::Page {
            title: "Playground",
            nav: html::Nav::Playground,
            script: "playground.js",
            body: html::with_token_panel(
                include_str!("assets/playground.html"),
                "playground",
                "console",
            ),
        },
    )
}

/// `GET /console`: an owner's agents, publishing and lifecycle.
pub async fn console_page() -> Response {
    page(
        StatusCode::OK,
        html::Page {
            title: "Console",
            nav: html::Nav::Console,
            script: "console.js",
            body: html::with_token_panel(
                include_str!("assets/console.html"),
                "agents:write",
                "playground",
            ),
        },
    )
}

/// Whether a request prefers HTML (a browser navigating), so an unknown path can answer with a
/// page instead of problem+json. API clients (no `Accept`, `*/*`, JSON) keep problem+json.
pub fn wants_html(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|accept| {
            accept
                .split(',')
                .any(|kind| kind.trim().starts_with("text/html"))
        })
}

/// The HTML 404 for a browser that followed a dead link.
/// The fallback of every path no route has: a page for a browser's GET, else the API's 404.
pub async fn not_found(request: axum::extract::Request) -> Response {
    if request.method() == axum::http::Method::GET && wants_html(request.headers()) {
        return not_found_page();
    }
    crate::middleware::not_found(&request)
}

pub fn not_found_page() -> Response {
    error_page(
        StatusCode::NOT_FOUND,
        "Page not found",
        "There is nothing at this address. Search the registry instead.",
    )
}

fn error_page(status: StatusCode, heading: &str, message: &str) -> Response {
    let body = html::fill(
        include_str!("assets/error.html"),
        &[("heading", heading), ("message", message)],
    );
    page(
        status,
        html::Page {
            title: heading,
            nav: html::Nav::None,
            script: "common.js",
            body,
        },
    )
}

fn page(status: StatusCode, page: html::Page<'_>) -> Response {
    let mut response = (status, page.render()).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    html::secure(headers);
    response
}
