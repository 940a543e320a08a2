//! The registry as an MCP server: tools and resources that search and read the registry, over
//! Streamable HTTP at `/mcp` (`http.rs`, with sessions in `session.rs`) and over stdio
//! (`stdio.rs`, answering from a registry over HTTP). Both transports run the one
//! implementation here over a `Source`: this process's registry, or a registry's REST API.
//!
//! Revisions: 2026-07-28 (stateless: every request carries its revision in `_meta`), and
//! 2025-11-25, 2025-06-18, 2025-03-26 and 2024-11-05 through the `initialize` handshake.

use std::sync::Arc;

use serde_json::{Value, json};

pub mod http;
pub mod protocol;
pub mod resources;
pub mod session;
pub mod source;
pub mod stdio;
pub mod tools;

use protocol::{Revision, RpcError};
use source::Source;

/// The one implementation of the MCP methods, over a source.
#[derive(Clone)]
pub struct McpServer {
    source: Arc<dyn Source>,
}

impl McpServer {
    pub fn new(source: Arc<dyn Source>) -> Self {
        Self { source }
    }

    /// This server answering as `viewer` reads the registry.
    pub fn as_viewer(&self, viewer: crate::domain::access::Viewer) -> Self {
        match self.source.for_viewer(viewer) {
            Some(source) => Self { source },
            None => self.clone(),
        }
    }

    /// The result of `initialize` at the negotiated `revision`.
    pub fn initialize(revision: Revision) -> Value {
        json!({
            "protocolVersion": revision.as_str(),
            "capabilities": protocol::capabilities(),
            "serverInfo": protocol::server_info(),
            "instructions": protocol::INSTRUCTIONS,
        })
    }

    /// Answer one request at `revision` (`initialize` is the transports' own: it opens a
    /// session or sets the stdio process's revision).
    pub async fn answer(
        &self,
        method: &str,
        params: Option<&Value>,
        revision: Revision,
    ) -> Result<Value, RpcError> {
        let source = self.source.as_ref();
        let result = match method {
            "server/discover" => json!({
                "supportedVersions": Revision::supported(),
                "capabilities": protocol::capabilities(),
                "serverInfo": protocol::server_info(),
                "instructions": protocol::INSTRUCTIONS,
            }),
            // Removed in 2026-07-28.
            "ping" if !revision.is_modern() => json!({}),
            "tools/list" => tools::list(revision),
            "tools/call" => tools::call(source, params, revision).await?,
            "resources/list" => resources::list(),
            "resources/templates/list" => resources::templates(),
            "resources/read" => resources::read(source, params, revision).await?,
            "initialize" => {
                return Err(RpcError::invalid_request(
                    "initialize opens a session once, before any other request",
                ));
            }
            other => return Err(RpcError::method_not_found(other)),
        };
        Ok(protocol::finish(method, result, revision))
    }
}
