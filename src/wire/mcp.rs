//! What the other transports say about MCP: where the registry's MCP server answers and the
//! protocol revisions it speaks (the registry's card and the OpenAPI document advertise them;
//! `mcp/` serves them).

/// The path of the Streamable HTTP endpoint.
pub const ENDPOINT: &str = "/mcp";

/// A protocol revision this server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Revision {
    V2024_11_05,
    V2025_03_26,
    V2025_06_18,
    V2025_11_25,
    /// Stateless: no `initialize`, no sessions; every request carries its revision in `_meta`.
    V2026_07_28,
}

impl Revision {
    /// The revisions reached through the `initialize` handshake, newest first.
    pub const HANDSHAKE: [Revision; 4] = [
        Self::V2025_11_25,
        Self::V2025_06_18,
        Self::V2025_03_26,
        Self::V2024_11_05,
    ];
    /// The stateless revisions, whose requests carry `_meta`, newest first.
    pub const MODERN: [Revision; 1] = [Self::V2026_07_28];

    pub fn parse(text: &str) -> Option<Self> {
        Self::MODERN
            .into_iter()
            .chain(Self::HANDSHAKE)
            .find(|revision| revision.as_str() == text)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::V2024_11_05 => "2024-11-05",
            Self::V2025_03_26 => "2025-03-26",
            Self::V2025_06_18 => "2025-06-18",
            Self::V2025_11_25 => "2025-11-25",
            Self::V2026_07_28 => "2026-07-28",
        }
    }

    pub fn is_modern(self) -> bool {
        self >= Self::V2026_07_28
    }

    /// Whether tools may declare an `outputSchema` and answer `structuredContent` (2025-06-18
    /// on); earlier clients get the structured answer as JSON text instead.
    pub fn has_structured_content(self) -> bool {
        self >= Self::V2025_06_18
    }

    /// The handshake revision answered to an `initialize` asking for `requested`: the same one
    /// when served, else the newest (the client then decides whether it can go on).
    pub fn negotiate(requested: Option<&str>) -> Self {
        requested
            .and_then(Self::parse)
            .filter(|revision| !revision.is_modern())
            .unwrap_or(Self::HANDSHAKE[0])
    }

    /// Every revision served, newest first, as `server/discover` and version errors list them.
    pub fn supported() -> Vec<&'static str> {
        Self::MODERN
            .into_iter()
            .chain(Self::HANDSHAKE)
            .map(Self::as_str)
            .collect()
    }
}
