//! The MCP server at `/mcp`: which browser origins may call it, and how many sessions it keeps.

use std::time::Duration;

use clap::Args;

/// The MCP endpoint's sessions and origin check.
#[derive(Args, Clone, Debug)]
pub struct McpConfig {
    /// Browser origins (`scheme://host[:port]`, comma-separated) allowed to call `/mcp` besides
    /// the public URL's own; a request with any other `Origin` header is refused with 403.
    /// Requests without an `Origin` (hosts, command-line clients) are not affected.
    #[arg(long, env = "REGISTRY_MCP_ALLOWED_ORIGINS", value_delimiter = ',')]
    pub mcp_allowed_origins: Vec<String>,

    /// Most MCP sessions (clients that opened one with `initialize`) kept at once; opening one
    /// more ends the session idle the longest.
    #[arg(long, env = "REGISTRY_MCP_MAX_SESSIONS", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub mcp_max_sessions: u64,

    /// Seconds an MCP session lives without a request before it expires.
    #[arg(long, env = "REGISTRY_MCP_SESSION_IDLE_SECS", default_value_t = 1800,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub mcp_session_idle_secs: u64,
}

impl McpConfig {
    pub fn max_sessions(&self) -> usize {
        usize::try_from(self.mcp_max_sessions).unwrap_or(usize::MAX)
    }

    pub fn session_idle(&self) -> Duration {
        Duration::from_secs(self.mcp_session_idle_secs.max(1))
    }
}
