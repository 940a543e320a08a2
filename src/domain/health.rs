//! Whether an agent's endpoint answers, as the registry's prober last found it.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::AgentDraft;
use crate::timestamp::Timestamp;

/// The outcome class of the last probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = AgentHealthStatus)]
pub enum HealthStatus {
    /// The endpoint answered as the protocol requires.
    Up,
    /// No answer, a timeout, a 5xx, or an address the registry may not contact.
    Down,
    /// It answers, but not with a valid A2A v1.0 card, or not as an MCP server.
    NotConformant,
    /// Not probed yet: its first probe has not run.
    Unknown,
    /// Never probed: the agent lists no endpoint to probe (it runs from a package, or only a
    /// repository or web page is known); `detail` says which.
    NotProbed,
}

impl HealthStatus {
    pub const ALL: [Self; 5] = [
        Self::Up,
        Self::Down,
        Self::NotConformant,
        Self::Unknown,
        Self::NotProbed,
    ];

    /// Its place in `ALL`.
    pub fn index(self) -> usize {
        match self {
            Self::Up => 0,
            Self::Down => 1,
            Self::NotConformant => 2,
            Self::Unknown => 3,
            Self::NotProbed => 4,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Up => "up",
            Self::Down => "down",
            Self::NotConformant => "not_conformant",
            Self::Unknown => "unknown",
            Self::NotProbed => "not_probed",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|status| status.as_str() == s)
    }

    /// The factor a relevance score is multiplied by: agents that do not answer sink a little,
    /// never far enough to hide a strong match. Never above 1, so a demoted agent can only move
    /// down (the fused ranking's depth bounds rely on that). An agent that cannot be probed
    /// says nothing either way about whether it works, so it is not demoted.
    pub fn ranking_prior(self) -> f64 {
        match self {
            Self::Up | Self::Unknown | Self::NotProbed => 1.0,
            Self::NotConformant => 0.95,
            Self::Down => 0.9,
        }
    }
}

/// What was probed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ProbeKind {
    /// The agent's A2A card was fetched and checked.
    A2aCard,
    /// The card was fetched and checked, then the owner's probe message was sent.
    A2aMessage,
    /// An MCP `initialize` request to the agent's streamable HTTP remote.
    McpStreamableHttp,
    /// An MCP SSE remote's event stream was opened and its endpoint event read.
    McpSse,
}

/// The agent's health as shown in its record and summaries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(as = AgentHealth)]
pub struct Health {
    pub status: HealthStatus,
    /// When the last probe ran.
    pub checked_at: Option<Timestamp>,
    /// When a probe last found the agent up.
    pub last_ok_at: Option<Timestamp>,
    /// How long the last probe took, in milliseconds.
    pub latency_ms: Option<u64>,
    /// Probes in a row that did not find the agent up.
    pub consecutive_failures: u32,
    /// Share of probes that found the agent up over the last 7 days (0–1); null before the
    /// first probe.
    pub uptime_7d: Option<f64>,
    /// The same over the last 30 days.
    pub uptime_30d: Option<f64>,
    /// What the last probe checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<ProbeKind>,
    /// The address the last probe contacted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Why the agent is not up, when it is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// Why an agent is `not_probed`: it runs from a package (npm, PyPI, OCI, …) on the user's
/// machine, so there is no endpoint of the publisher's to check.
pub const PACKAGE_ONLY: &str = "package only";
/// Why an agent is `not_probed`: it names no endpoint (at most a repository or a web page).
pub const NO_ENDPOINT: &str = "no endpoint";

impl Health {
    /// The health of an agent not probed yet.
    pub fn unknown() -> Self {
        Self::unprobed(HealthStatus::Unknown, None)
    }

    /// The health of an agent that lists no endpoint: never probed, for `reason`
    /// (`PACKAGE_ONLY` or `NO_ENDPOINT`).
    pub fn not_probed(reason: &str) -> Self {
        Self::unprobed(HealthStatus::NotProbed, Some(reason.to_owned()))
    }

    fn unprobed(status: HealthStatus, detail: Option<String>) -> Self {
        Self {
            status,
            checked_at: None,
            last_ok_at: None,
            latency_ms: None,
            consecutive_failures: 0,
            uptime_7d: None,
            uptime_30d: None,
            probe: None,
            target: None,
            detail,
        }
    }

    /// The health an agent with `draft` shows, given what the prober stored (`None`: never
    /// probed): `not_probed` with its reason when the draft lists no endpoint, whatever was
    /// stored before (an earlier record's endpoint), else the stored health.
    pub fn shown(draft: &AgentDraft, stored: Option<Health>) -> Option<Health> {
        match ProbeTarget::of(draft) {
            Some(_) => stored,
            None => Some(Self::not_probed(not_probed_reason(draft))),
        }
    }

    /// Probes in a row that did not find the agent up, once a probe found `status`.
    pub fn failures_after(previous: Option<&Health>, status: HealthStatus) -> u32 {
        match status {
            HealthStatus::Up => 0,
            _ => previous
                .map_or(0, |health| health.consecutive_failures)
                .saturating_add(1),
        }
    }

    /// The health after `outcome`, given the health before it (`None`: never probed) and the
    /// probe counts of the last 7 and 30 days, this probe included.
    pub fn after(previous: Option<&Health>, outcome: &ProbeOutcome, uptime: Uptime) -> Self {
        let up = outcome.status == HealthStatus::Up;
        Self {
            status: outcome.status,
            checked_at: Some(outcome.at),
            last_ok_at: if up {
                Some(outcome.at)
            } else {
                previous.and_then(|health| health.last_ok_at)
            },
            latency_ms: Some(outcome.latency_ms),
            consecutive_failures: Self::failures_after(previous, outcome.status),
            uptime_7d: uptime.week.ratio(),
            uptime_30d: uptime.month.ratio(),
            probe: Some(outcome.kind),
            target: Some(outcome.target.clone()),
            detail: outcome.detail.clone(),
        }
    }
}

/// Probes and successes over a span of days.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProbeCount {
    pub probes: i64,
    pub ok: i64,
}

impl ProbeCount {
    /// Successes per probe, rounded to four places; `None` without probes.
    pub fn ratio(self) -> Option<f64> {
        (self.probes > 0).then(|| {
            let ratio = self.ok.clamp(0, self.probes) as f64 / self.probes as f64;
            (ratio * 10_000.0).round() / 10_000.0
        })
    }
}

/// Probe counts over the last 7 and 30 days.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Uptime {
    pub week: ProbeCount,
    pub month: ProbeCount,
}

/// What one probe found.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeOutcome {
    pub status: HealthStatus,
    pub kind: ProbeKind,
    /// The URL contacted.
    pub target: String,
    pub at: Timestamp,
    pub latency_ms: u64,
    pub detail: Option<String>,
}

/// What the prober contacts for one agent, derived from its record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeTarget {
    /// Fetch the A2A card at `card` and check it; then, when the owner gave a probe `message`
    /// and the agent lists a JSON-RPC interface, send it there with `SendMessage`.
    A2a {
        card: String,
        endpoint: Option<String>,
        message: Option<String>,
    },
    /// An MCP remote: `initialize` over streamable HTTP, or read the endpoint event of an SSE
    /// stream.
    Mcp { url: String, sse: bool },
}

/// Where an A2A agent publishes its card, relative to its origin.
pub const WELL_KNOWN_CARD: &str = "/.well-known/agent-card.json";

impl ProbeTarget {
    /// The probe for an agent, from its endpoints only:
    ///
    /// - an A2A agent (it lists an A2A interface or carries its card): its card, at
    ///   `manifest_url`, else at the first interface's origin;
    /// - else its first MCP remote;
    /// - else a `manifest_url` that names a card document (a `.json` path, or one under
    ///   `/.well-known/`): an agent described by its card alone.
    ///
    /// `None` when it lists no endpoint: a package runs on the user's machine, and a repository,
    /// a listing or a website (what `manifest_url` holds for most MCP servers) is no agent to
    /// check.
    pub fn of(draft: &AgentDraft) -> Option<Self> {
        let reach = &draft.reach;
        let a2a = |card: String| Self::A2a {
            card,
            endpoint: reach
                .interfaces
                .iter()
                .find(|interface| interface.protocol_binding.eq_ignore_ascii_case("JSONRPC"))
                .map(|interface| interface.url.clone()),
            message: draft.probe_message.clone(),
        };
        if !reach.interfaces.is_empty() || draft.card.is_some() {
            let card = draft.manifest_url.clone().or_else(|| {
                let first = reach.interfaces.first()?;
                let url = url::Url::parse(&first.url).ok()?;
                Some(format!(
                    "{}{WELL_KNOWN_CARD}",
                    url.origin().ascii_serialization()
                ))
            })?;
            return Some(a2a(card));
        }
        if let Some(remote) = reach.remotes.first() {
            return Some(Self::Mcp {
                url: remote.url.clone(),
                sse: remote.kind == "sse",
            });
        }
        draft
            .manifest_url
            .as_deref()
            .filter(|url| names_a_card(url))
            .map(|card| a2a(card.to_owned()))
    }

    /// The URL contacted first: its host is what per-host limits count.
    pub fn url(&self) -> &str {
        match self {
            Self::A2a { card, .. } => card,
            Self::Mcp { url, .. } => url,
        }
    }
}

/// Why a draft without an endpoint is not probed: `PACKAGE_ONLY` when it runs from a package,
/// else `NO_ENDPOINT`.
pub fn not_probed_reason(draft: &AgentDraft) -> &'static str {
    if draft.reach.packages.is_empty() {
        NO_ENDPOINT
    } else {
        PACKAGE_ONLY
    }
}

/// Whether a URL names a card document rather than a page about the agent: its path ends in
/// `.json`, or lies under `/.well-known/`.
fn names_a_card(raw: &str) -> bool {
    url::Url::parse(raw).is_ok_and(|url| {
        let path = url.path().to_ascii_lowercase();
        path.ends_with(".json") || path.starts_with("/.well-known/")
    })
}

/// The UTC day of `at`, as days since the epoch: the bucket uptime is counted in.
pub fn day_of(at: Timestamp) -> i64 {
    at.micros().div_euclid(86_400_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(status: HealthStatus, at: i64) -> ProbeOutcome {
        ProbeOutcome {
            status,
            kind: ProbeKind::A2aCard,
            target: "https://agent.example/.well-known/agent-card.json".into(),
            at: Timestamp::from_micros(at),
            latency_ms: 42,
            detail: (status != HealthStatus::Up).then(|| "no answer".into()),
        }
    }

    fn uptime(probes: i64, ok: i64) -> Uptime {
        let count = ProbeCount { probes, ok };
        Uptime {
            week: count,
            month: count,
        }
    }

    #[test]
    fn failures_count_up_and_a_success_resets_them() {
        let first = Health::after(None, &outcome(HealthStatus::Down, 1), uptime(1, 0));
        assert_eq!(first.consecutive_failures, 1);
        assert_eq!(first.last_ok_at, None);
        assert_eq!(first.uptime_7d, Some(0.0));
        let second = Health::after(
            Some(&first),
            &outcome(HealthStatus::NotConformant, 2),
            uptime(2, 0),
        );
        assert_eq!(second.consecutive_failures, 2);
        let third = Health::after(Some(&second), &outcome(HealthStatus::Up, 3), uptime(3, 1));
        assert_eq!(third.consecutive_failures, 0);
        assert_eq!(third.last_ok_at, Some(Timestamp::from_micros(3)));
        assert_eq!(third.uptime_30d, Some(0.3333));
        assert_eq!(third.detail, None);
        let fourth = Health::after(Some(&third), &outcome(HealthStatus::Down, 4), uptime(4, 1));
        assert_eq!(fourth.last_ok_at, Some(Timestamp::from_micros(3)));
    }

    #[test]
    fn statuses_round_trip_and_priors_never_promote() {
        for status in HealthStatus::ALL {
            assert_eq!(HealthStatus::parse(status.as_str()), Some(status));
            assert!(status.ranking_prior() <= 1.0 && status.ranking_prior() > 0.5);
        }
        assert_eq!(HealthStatus::parse("UP"), None);
        assert!(HealthStatus::Down.ranking_prior() < HealthStatus::Up.ranking_prior());
    }

    #[test]
    fn days_are_utc_and_ratios_need_probes() {
        assert_eq!(day_of(Timestamp::from_micros(86_400_000_000 - 1)), 0);
        assert_eq!(day_of(Timestamp::from_micros(86_400_000_000)), 1);
        assert_eq!(ProbeCount::default().ratio(), None);
        assert_eq!(ProbeCount { probes: 4, ok: 3 }.ratio(), Some(0.75));
    }

    fn draft(reach: serde_json::Value) -> AgentDraft {
        let mut body = serde_json::json!({
            "package_name": "com.example.thing",
            "name": "Thing",
            "description": "A thing.",
        });
        for (key, value) in reach.as_object().expect("object") {
            body[key] = value.clone();
        }
        AgentDraft::parse(&body).expect("draft")
    }

    fn target(reach: serde_json::Value) -> Option<String> {
        ProbeTarget::of(&draft(reach)).map(|target| target.url().to_owned())
    }

    #[test]
    fn only_endpoints_are_probed() {
        let package = serde_json::json!([{"registry_type": "npm", "identifier": "thing-mcp",
            "transport": {"type": "stdio"}}]);
        let repository =
            serde_json::json!({"url": "https://github.com/acme/thing", "source": "github"});
        assert_eq!(
            target(serde_json::json!({"url": "https://a.example/rpc"})).as_deref(),
            Some("https://a.example/.well-known/agent-card.json"),
            "an A2A interface: its origin's card"
        );
        assert_eq!(
            target(serde_json::json!({"url": "https://a.example/rpc",
                "manifest_url": "https://a.example/cards/thing"}))
            .as_deref(),
            Some("https://a.example/cards/thing"),
            "an A2A agent's manifest_url is its card"
        );
        assert_eq!(
            target(
                serde_json::json!({"manifest_url": "https://github.com/acme/thing",
                "remotes": [{"type": "streamable-http", "url": "https://mcp.example/mcp"}]})
            )
            .as_deref(),
            Some("https://mcp.example/mcp"),
            "an MCP server's manifest_url is its website: the remote is probed"
        );
        assert_eq!(
            target(serde_json::json!({"manifest_url": "https://cards.example/thing.json"}))
                .as_deref(),
            Some("https://cards.example/thing.json"),
            "a bare manifest_url naming a card document"
        );
        for reach in [
            serde_json::json!({"manifest_url": "https://github.com/acme/thing", "packages": package,
                "repository": repository}),
            serde_json::json!({"manifest_url": "https://docs.example/mcp"}),
            serde_json::json!({"repository": repository}),
            serde_json::json!({}),
        ] {
            assert_eq!(target(reach.clone()), None, "{reach}");
        }
    }

    #[test]
    fn an_agent_without_an_endpoint_shows_not_probed_with_its_reason() {
        let package = serde_json::json!({"manifest_url": "https://github.com/acme/thing",
            "packages": [{"registry_type": "npm", "identifier": "thing-mcp",
                "transport": {"type": "stdio"}}]});
        let stale = Health::after(None, &outcome(HealthStatus::Down, 1), uptime(1, 0));
        let shown = Health::shown(&draft(package), Some(stale.clone())).expect("shown");
        assert_eq!(shown.status, HealthStatus::NotProbed);
        assert_eq!(shown.detail.as_deref(), Some(PACKAGE_ONLY));
        assert_eq!(
            shown.checked_at, None,
            "a stale probe of a page is not shown"
        );
        let bare = Health::shown(&draft(serde_json::json!({})), None).expect("shown");
        assert_eq!(bare.detail.as_deref(), Some(NO_ENDPOINT));
        let probed = draft(serde_json::json!({"url": "https://a.example/rpc"}));
        assert_eq!(Health::shown(&probed, Some(stale.clone())), Some(stale));
        assert_eq!(Health::shown(&probed, None), None);
        assert_eq!(
            HealthStatus::NotProbed.ranking_prior(),
            1.0,
            "never demoted"
        );
    }
}
