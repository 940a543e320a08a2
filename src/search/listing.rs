//! What a result list shows of an agent: its listing, kept by the index for every agent.

use crate::domain::Payment;
use crate::store::{Agent, VerificationLevel};
use crate::timestamp::Timestamp;

/// What a result list shows of one agent. The index keeps one per agent, built when the agent
/// is indexed, so a page of results reads nothing from storage.
///
/// A million of them are held at once, so the strings are not kept as a dozen `String`s (24
/// bytes each, most of them empty, and an allocation each) but end to end in one: about 250
/// bytes less per agent (`docs/search.md`).
#[derive(Clone, PartialEq)]
pub struct Listing {
    /// The fields (`ID` … `CATEGORY`, absent ones empty), then the tags, then the capability
    /// names.
    text: Packed,
    /// Which of the optional fields are present, a bit each.
    present: u16,
    /// How many of the strings after the fields are tags, and how many after those are
    /// capability names (the representative queries follow them).
    tags: u32,
    capabilities: u32,
    /// What kind of artifact the agent is.
    pub kind: AgentKind,
    pub verification_level: VerificationLevel,
    /// Whether it lists an MCP remote or package.
    pub mcp: bool,
    /// One of the registry's own agents (its card and the hosted utility agents).
    pub operated: bool,
    /// Boxed: most agents have none, and the struct is 150 bytes.
    pub payment: Option<Box<Payment>>,
    pub published_at: Option<Timestamp>,
    /// When the record last changed.
    pub updated_at: Timestamp,
    /// The worst scanner finding in its texts and in what its endpoint shows.
    pub severity: crate::domain::scan::Severity,
    /// The publisher's deprecation; boxed, as most agents have none.
    pub deprecation: Option<Box<crate::domain::deprecation::Deprecation>>,
}

// The listing's fields, in `Listing::text`.
const ID: usize = 0;
const PACKAGE_NAME: usize = 1;
const NAME: usize = 2;
const DESCRIPTION: usize = 3;
const VERSION: usize = 4;
const MANIFEST_URL: usize = 5;
const URL: usize = 6;
const TARGET: usize = 7;
const CATEGORY: usize = 8;
const URN: usize = 9;
const FIELDS: usize = 10;

/// What kind of artifact an agent is: what its discovery entry's `type` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AgentKind {
    /// An A2A agent: it has a card or an A2A endpoint.
    A2a,
    /// An MCP server, reached only through MCP remotes or packages.
    Mcp,
    /// Neither: a record with no way to call it stated.
    Listed,
}

impl AgentKind {
    pub fn of(draft: &crate::domain::AgentDraft) -> Self {
        if draft.card.is_some() || draft.url.is_some() || !draft.reach.interfaces.is_empty() {
            Self::A2a
        } else if !draft.reach.remotes.is_empty() || !draft.reach.packages.is_empty() {
            Self::Mcp
        } else {
            Self::Listed
        }
    }
}

impl Listing {
    /// The listing of `agent`, scanned here (the index passes the stored verdict instead).
    pub fn of(agent: &Agent) -> Self {
        Self::with_severity(agent, agent.security().max_severity)
    }

    /// The listing of `agent`, whose worst scanner finding is `severity`.
    pub fn with_severity(agent: &Agent, severity: crate::domain::scan::Severity) -> Self {
        let draft = &agent.draft;
        let optional = [
            (VERSION, &draft.version),
            (MANIFEST_URL, &draft.manifest_url),
            (URL, &draft.url),
            (TARGET, &draft.target),
            (CATEGORY, &draft.category),
        ];
        let present = optional
            .iter()
            .filter(|(_, value)| value.is_some())
            .fold(0u16, |bits, (field, _)| bits | 1 << field);
        let fields = [
            agent.id.as_str(),
            agent.package_name(),
            &draft.name,
            &draft.description,
        ]
        .into_iter()
        .chain(
            optional
                .iter()
                .map(|(_, value)| value.as_deref().unwrap_or("")),
        );
        let capabilities = draft.capabilities.iter().map(|c| c.name.as_str());
        Self {
            text: Packed::of(
                fields
                    .chain(std::iter::once(agent.urn.as_str()))
                    .chain(draft.tags.iter().map(String::as_str))
                    .chain(capabilities)
                    .chain(draft.representative_queries.iter().map(String::as_str)),
            ),
            present,
            tags: u32::try_from(draft.tags.len()).unwrap_or(u32::MAX),
            capabilities: u32::try_from(draft.capabilities.len()).unwrap_or(u32::MAX),
            kind: AgentKind::of(draft),
            verification_level: agent.verification_level,
            mcp: !draft.reach.remotes.is_empty() || !draft.reach.packages.is_empty(),
            operated: agent.owner == crate::domain::access::SYSTEM_OWNER,
            payment: draft.payment.clone().map(Box::new),
            published_at: agent.published_at,
            updated_at: agent.updated_at,
            severity,
            deprecation: agent.shown_deprecation().map(Box::new),
        }
    }

    fn optional(&self, field: usize) -> Option<&str> {
        (self.present & 1 << field != 0).then(|| self.text.get(field))
    }

    pub fn id(&self) -> &str {
        self.text.get(ID)
    }

    pub fn package_name(&self) -> &str {
        self.text.get(PACKAGE_NAME)
    }

    pub fn name(&self) -> &str {
        self.text.get(NAME)
    }

    pub fn description(&self) -> &str {
        self.text.get(DESCRIPTION)
    }

    pub fn version(&self) -> Option<&str> {
        self.optional(VERSION)
    }

    /// The owner's own card address, when they gave one.
    pub fn manifest_url(&self) -> Option<&str> {
        self.optional(MANIFEST_URL)
    }

    pub fn url(&self) -> Option<&str> {
        self.optional(URL)
    }

    pub fn target(&self) -> Option<&str> {
        self.optional(TARGET)
    }

    pub fn category(&self) -> Option<&str> {
        self.optional(CATEGORY)
    }

    pub fn tags(&self) -> Strs<'_> {
        self.text.range(FIELDS, FIELDS + self.tags as usize)
    }

    /// Names of the agent's capabilities.
    pub fn capabilities(&self) -> Strs<'_> {
        let start = FIELDS + self.tags as usize;
        self.text.range(start, start + self.capabilities as usize)
    }

    /// Requests a user might make that the agent serves.
    pub fn representative_queries(&self) -> Strs<'_> {
        let start = FIELDS + self.tags as usize + self.capabilities as usize;
        self.text.range(start, self.text.len())
    }

    /// The discovery identifier (`urn:air:…`).
    pub fn urn(&self) -> &str {
        self.text.get(URN)
    }

    /// The identifier's publisher domain.
    pub fn publisher(&self) -> &str {
        let rest = self
            .urn()
            .strip_prefix(crate::domain::urn::PREFIX)
            .unwrap_or_default();
        rest.split(':').next().unwrap_or_default()
    }
}

impl std::fmt::Debug for Listing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listing")
            .field("id", &self.id())
            .field("package_name", &self.package_name())
            .field("name", &self.name())
            .field("description", &self.description())
            .field("version", &self.version())
            .field("verification_level", &self.verification_level)
            .field("manifest_url", &self.manifest_url())
            .field("url", &self.url())
            .field("target", &self.target())
            .field("category", &self.category())
            .field("tags", &self.tags().collect::<Vec<_>>())
            .field("payment", &self.payment)
            .field("capabilities", &self.capabilities().collect::<Vec<_>>())
            .field("published_at", &self.published_at)
            .field("updated_at", &self.updated_at)
            .field("mcp", &self.mcp)
            .field("urn", &self.urn())
            .field("kind", &self.kind)
            .finish()
    }
}

/// Strings kept end to end in one allocation, with where each ends.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Packed {
    text: Box<str>,
    ends: Box<[u32]>,
}

impl Packed {
    pub fn of<'a>(strings: impl Iterator<Item = &'a str> + Clone) -> Self {
        let mut text = String::with_capacity(strings.clone().map(str::len).sum());
        let ends = strings
            .map(|string| {
                text.push_str(string);
                u32::try_from(text.len()).expect("a listing's text is far under 4 GiB")
            })
            .collect();
        Self {
            text: text.into_boxed_str(),
            ends,
        }
    }

    fn len(&self) -> usize {
        self.ends.len()
    }

    fn get(&self, index: usize) -> &str {
        self.all().nth(index).unwrap_or_default()
    }

    /// The strings from `start` to before `end`.
    pub fn range(&self, start: usize, end: usize) -> Strs<'_> {
        let end = end.min(self.ends.len());
        Strs {
            text: &self.text,
            ends: &self.ends[..end],
            next: start.min(end),
        }
    }

    pub fn all(&self) -> Strs<'_> {
        self.range(0, self.ends.len())
    }
}

/// Some of the strings of a `Packed`, in order.
#[derive(Debug, Clone, Copy)]
pub struct Strs<'a> {
    text: &'a str,
    ends: &'a [u32],
    next: usize,
}

impl<'a> Iterator for Strs<'a> {
    type Item = &'a str;

    #[inline]
    fn next(&mut self) -> Option<&'a str> {
        let end = *self.ends.get(self.next)? as usize;
        let start = match self.next {
            0 => 0,
            before => self.ends[before - 1] as usize,
        };
        self.next += 1;
        self.text.get(start..end)
    }

    #[inline]
    fn nth(&mut self, n: usize) -> Option<&'a str> {
        self.next = self.next.saturating_add(n).min(self.ends.len());
        self.next()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.ends.len() - self.next;
        (left, Some(left))
    }
}

impl ExactSizeIterator for Strs<'_> {}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(draft: serde_json::Value) -> Agent {
        let draft = crate::domain::AgentDraft::parse(&draft).expect("draft");
        Agent::new(
            draft,
            "alice",
            Timestamp::from_micros(1_795_000_000_000_000),
        )
    }

    #[test]
    fn a_listing_gives_back_every_field_it_was_made_of() {
        let full = agent(serde_json::json!({
            "package_name": "com.example.weather",
            "name": "Wéather ☀",
            "description": "Forecasts for any city.",
            "version": "1.2.0",
            "manifest_url": "https://weather.example.com/.well-known/agent-card.json",
            "url": "https://weather.example.com/a2a",
            "target": "a2a",
            "category": "Utilities",
            "tags": ["weather", "forecast"],
            "capabilities": [{"name": "forecast"}, {"name": "alerts"}],
        }));
        let listing = Listing::of(&full);
        assert_eq!(listing.id(), full.id);
        assert_eq!(listing.package_name(), "com.example.weather");
        assert_eq!(listing.name(), "Wéather ☀");
        assert_eq!(listing.description(), "Forecasts for any city.");
        assert_eq!(listing.version(), Some("1.2.0"));
        assert_eq!(
            listing.manifest_url(),
            Some("https://weather.example.com/.well-known/agent-card.json")
        );
        assert_eq!(listing.url(), Some("https://weather.example.com/a2a"));
        assert_eq!(listing.target(), Some("a2a"));
        assert_eq!(listing.category(), Some("Utilities"));
        let tags: Vec<&str> = full.draft.tags.iter().map(String::as_str).collect();
        assert_eq!(listing.tags().collect::<Vec<_>>(), tags);
        assert_eq!(listing.tags().len(), tags.len());
        assert_eq!(
            listing.capabilities().collect::<Vec<_>>(),
            ["forecast", "alerts"]
        );

        // Absent optional fields are absent, not empty; no tags, no capabilities.
        let bare_agent = agent(serde_json::json!({
            "package_name": "com.example.bare",
            "name": "Bare",
            "description": "Nothing else.",
        }));
        let bare = Listing::of(&bare_agent);
        assert_eq!(bare.name(), "Bare");
        assert_eq!(bare.description(), "Nothing else.");
        assert_eq!(bare.version(), bare_agent.draft.version.as_deref());
        assert_eq!((bare.manifest_url(), bare.url()), (None, None));
        assert_eq!((bare.target(), bare.category()), (None, None));
        assert_eq!((bare.tags().len(), bare.capabilities().len()), (0, 0));
        assert_eq!(bare.tags().next(), None);
    }

    #[test]
    fn packed_strings_come_back_in_order_from_any_start() {
        let strings = ["", "a", "ßü", "", "long one", "→"];
        let packed = Packed::of(strings.iter().copied());
        assert_eq!(packed.all().collect::<Vec<_>>(), strings);
        for start in 0..=strings.len() {
            for end in start..=strings.len() + 1 {
                let range = packed.range(start, end);
                let expected = &strings[start..end.min(strings.len())];
                assert_eq!(range.len(), expected.len());
                assert_eq!(range.collect::<Vec<_>>(), expected);
            }
            assert_eq!(packed.all().nth(start), strings.get(start).copied());
        }
        assert_eq!(Packed::of(std::iter::empty()).all().next(), None);
    }
}
