//! A mirror source as configured: `KIND=URL`, its id, and the owner of the agents it writes.

use url::Url;

use super::access::MIRROR_PREFIX;

/// The kinds of source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The MCP Registry API (`/v0.1/servers`).
    McpRegistry,
    /// Another instance of this registry, through its public change feed.
    AgentRegistry,
    /// An ARD publisher's manifest.
    Ard,
}

impl Kind {
    pub const ALL: [Self; 3] = [Self::McpRegistry, Self::AgentRegistry, Self::Ard];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::McpRegistry => "mcp-registry",
            Self::AgentRegistry => "agent-registry",
            Self::Ard => "ard",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == text)
    }
}

/// One configured source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub kind: Kind,
    /// The URL as configured, without a trailing slash.
    pub url: Url,
    /// `{kind}:{host}[:{port}][{path}]`.
    pub id: String,
}

impl Source {
    /// Read `KIND=URL`: an http or https URL with a host and no query or fragment.
    pub fn parse(text: &str) -> Result<Self, String> {
        let (kind, url) = text
            .trim()
            .split_once('=')
            .ok_or_else(|| format!("'{text}': expected KIND=URL"))?;
        let kind = Kind::parse(kind.trim()).ok_or_else(|| {
            format!(
                "'{kind}': the kind is one of {}",
                Kind::ALL.map(Kind::as_str).join(", ")
            )
        })?;
        let mut url = Url::parse(url.trim()).map_err(|err| format!("'{url}': {err}"))?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err(format!("'{url}': an http or https URL is needed"));
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err(format!("'{url}': no query or fragment"));
        }
        let path = url.path().trim_end_matches('/').to_owned();
        url.set_path(&path);
        let host = url.host_str().unwrap_or_default().to_ascii_lowercase();
        let port = url
            .port()
            .map(|port| format!(":{port}"))
            .unwrap_or_default();
        Ok(Self {
            id: format!("{}:{host}{port}{path}", kind.as_str()),
            kind,
            url,
        })
    }

    /// The owner of the agents this source writes.
    pub fn owner(&self) -> String {
        format!("{MIRROR_PREFIX}{}", self.id)
    }
}
