//! `AirUrn`: an agent's discovery identifier in the domain-anchored form ARD uses,
//! `urn:air:<publisher-domain>:<segment>[:<segment>…]`, and the one mapping between it and a
//! reverse-domain package name.
//!
//! A package name is a domain written backwards, then the agent's own labels:
//! `com.example.weather` is the agent `weather` of `example.com`, so `urn:air:example.com:weather`.
//! Where the domain ends is the one thing a package name does not say. The domain is the
//! package's registrable domain: its first two labels (`com.example`), or three when the first
//! two are one of the multi-label suffixes under which anyone can hold a name (`io.github`,
//! `uk.co`, `app.vercel`, … in [`SHARED_SUFFIXES`]): `io.github.alice.search` is the agent
//! `search` of `alice.github.io` (the naming guide's "free subdomain" pattern: the publisher is
//! the host its owner controls and can prove). Because that list can grow, the identifier is
//! computed once, when the agent is published, and stored with it: a later list never moves an
//! identifier already given.
//!
//! The other way, an identifier names a package: the publisher's labels reversed, then each
//! segment as a label (`urn:air:example.com:tools:weather` → `com.example.tools.weather`).
//! Every identifier this module makes from a package name gives that package name back.

use std::fmt;

use super::PackageName;

/// The URN namespace and its prefix, as written (compared case-insensitively).
pub const PREFIX: &str = "urn:air:";
/// Most characters an identifier may have.
pub const MAX_CHARS: usize = 255;
/// The segment that stands for a package with no labels after its domain (`com.example` →
/// `urn:air:example.com:_`). No package label can be `_`, so it names nothing else.
pub const ROOT_SEGMENT: &str = "_";

/// Suffixes, written as in a package name (reversed), under which the registrable domain is one
/// label longer than two: code and site hosts that give every user a subdomain, and the
/// second-level domains of countries that sell names under them.
pub const SHARED_SUFFIXES: &[&str] = &[
    // Hosts that give each user or project a subdomain.
    "io.github",
    "io.gitlab",
    "app.vercel",
    "app.netlify",
    "dev.pages",
    "dev.workers",
    "dev.deno",
    "dev.fly",
    "com.herokuapp",
    "com.onrender",
    "app.web",
    "com.firebaseapp",
    "com.appspot",
    "net.azurewebsites",
    "space.hf",
    "run.modal",
    "co.repl",
    "app.replit",
    "app.railway",
    "me.glitch",
    "app.ngrok-free",
    "io.ngrok",
    "com.blogspot",
    // Country second-level domains.
    "uk.co",
    "uk.org",
    "uk.ac",
    "uk.gov",
    "uk.me",
    "au.com",
    "au.net",
    "au.org",
    "au.edu",
    "au.gov",
    "nz.co",
    "nz.org",
    "jp.co",
    "jp.ne",
    "jp.or",
    "jp.ac",
    "kr.co",
    "kr.or",
    "br.com",
    "br.org",
    "cn.com",
    "cn.net",
    "cn.org",
    "mx.com",
    "in.co",
    "in.net",
    "in.org",
    "za.co",
    "za.org",
    "sg.com",
    "hk.com",
    "tw.com",
    "il.co",
    "tr.com",
    "ar.com",
    "id.co",
    "my.com",
    "ph.com",
    "vn.com",
    "th.co",
    "ua.com",
];

/// A valid `urn:air:` identifier: a publisher domain and at least one segment after it.
///
/// The publisher is kept lowercase (domains are case-insensitive); segments keep their case,
/// and two identifiers are the same when they are equal ignoring ASCII case, as the registry
/// compares them everywhere.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AirUrn(String);

impl AirUrn {
    /// Parses an identifier. The error is a human message.
    pub fn parse(input: &str) -> Result<Self, String> {
        let raw = input.trim();
        let length = raw.chars().count();
        if length > MAX_CHARS {
            return Err(format!(
                "must be at most {MAX_CHARS} characters (got {length})"
            ));
        }
        let Some(rest) = raw.get(PREFIX.len()..).filter(|_| is_urn(raw)) else {
            return Err(format!(
                "must start with '{PREFIX}' (urn:air:<publisher-domain>:<name>)"
            ));
        };
        let mut parts = rest.split(':');
        let publisher = parts.next().unwrap_or_default();
        check_publisher(publisher)?;
        let segments: Vec<&str> = parts.collect();
        if segments.is_empty() {
            return Err(
                "must name the agent after its publisher domain (urn:air:<publisher-domain>:<name>)"
                    .to_owned(),
            );
        }
        for segment in &segments {
            check_segment(segment)?;
        }
        Ok(Self(format!(
            "{PREFIX}{}:{}",
            publisher.to_ascii_lowercase(),
            segments.join(":")
        )))
    }

    /// The identifier of a package: its registrable domain as the publisher, its other labels
    /// as segments. `_` in a domain label (which no host name has) is written `-`.
    pub fn of_package(package: &PackageName) -> Self {
        let labels: Vec<&str> = package.as_str().split('.').collect();
        let split = domain_labels(&labels);
        let publisher = labels[..split]
            .iter()
            .rev()
            .map(|label| label.replace('_', "-"))
            .collect::<Vec<_>>()
            .join(".");
        let segments = match &labels[split..] {
            [] => ROOT_SEGMENT.to_owned(),
            rest => rest.join(":"),
        };
        Self(format!("{PREFIX}{publisher}:{segments}"))
    }

    /// Whether the identifier's publisher is a host `package` claims: the package's domain, or
    /// a subdomain of it whose labels the package name starts with, reversed
    /// (`ai.lifie.hub.tasks` claims `lifie.ai` and `hub.lifie.ai`, not `other.lifie.ai`).
    /// `_` in a package label stands for `-` in a host name, as in [`Self::of_package`].
    pub fn is_published_by(&self, package: &PackageName) -> bool {
        let labels: Vec<&str> = package.as_str().split('.').collect();
        let publisher: Vec<&str> = self.publisher().split('.').rev().collect();
        publisher.len() >= domain_labels(&labels)
            && publisher.len() <= labels.len()
            && publisher
                .iter()
                .zip(&labels)
                .all(|(host, label)| host.eq_ignore_ascii_case(&label.replace('_', "-")))
    }

    /// The package name an identifier stands for: the publisher's labels reversed, then each
    /// segment as a label, lowercased, with characters a label cannot hold (`.` included)
    /// written `-`; `_` stands for no label. Fails when that is not a valid package name.
    pub fn to_package_name(&self) -> Result<PackageName, String> {
        let mut labels: Vec<String> = self
            .publisher()
            .split('.')
            .rev()
            .map(str::to_owned)
            .collect();
        for segment in self.segments() {
            if segment == ROOT_SEGMENT {
                continue;
            }
            let label: String = segment
                .chars()
                .map(|c| match c.to_ascii_lowercase() {
                    c @ ('a'..='z' | '0'..='9' | '-' | '_') => c,
                    _ => '-',
                })
                .collect();
            labels.push(label.trim_matches(['-', '_']).to_owned());
        }
        PackageName::parse(&labels.join("."))
    }

    /// The publisher domain, lowercase.
    pub fn publisher(&self) -> &str {
        self.after_prefix().split(':').next().unwrap_or_default()
    }

    /// The segments after the publisher.
    pub fn segments(&self) -> impl Iterator<Item = &str> {
        self.after_prefix().split(':').skip(1)
    }

    /// The same identifier with `suffix` added to its last segment (`…:weather` →
    /// `…:weather-01h…`): what the registry gives a package whose identifier another agent
    /// already holds.
    pub fn with_suffix(&self, suffix: &str) -> Self {
        Self(format!("{}-{suffix}", self.0))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The form two identifiers are compared in.
    pub fn key(&self) -> String {
        self.0.to_ascii_lowercase()
    }

    fn after_prefix(&self) -> &str {
        self.0.get(PREFIX.len()..).unwrap_or_default()
    }
}

/// The package name a catalogue entry's identifier gives: a package name as it is, an
/// `urn:air:` identifier by `AirUrn::to_package_name`.
pub fn package_name_of(identifier: &str) -> Option<PackageName> {
    if let Ok(name) = PackageName::parse(identifier) {
        return Some(name);
    }
    AirUrn::parse(identifier).ok()?.to_package_name().ok()
}

/// Whether `text` is written as an identifier (starts with `urn:air:`, in any case), as
/// opposed to an agent id or package name.
pub fn is_urn(text: &str) -> bool {
    text.get(..PREFIX.len())
        .is_some_and(|prefix| prefix.eq_ignore_ascii_case(PREFIX))
}

/// How many of a package's labels (from the first) are its domain: two, or three under a
/// shared suffix, and never more than it has.
pub fn domain_labels(labels: &[&str]) -> usize {
    let shared = labels.len() >= 3
        && SHARED_SUFFIXES.iter().any(|suffix| {
            let mut parts = suffix.split('.');
            parts.next() == Some(labels[0]) && parts.next() == Some(labels[1])
        });
    if shared { 3 } else { 2.min(labels.len()) }
}

/// A publisher: a domain name of dot-separated labels of letters, digits and inner `-`.
fn check_publisher(publisher: &str) -> Result<(), String> {
    let valid_label = |label: &str| {
        !label.is_empty()
            && label.len() <= 63
            && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            && !label.starts_with('-')
            && !label.ends_with('-')
    };
    if publisher.is_empty() || !publisher.split('.').all(valid_label) {
        return Err(format!(
            "publisher '{}' must be a domain name (letters, digits, '-' and '.')",
            super::truncate(publisher, 80)
        ));
    }
    Ok(())
}

/// A segment: letters, digits, `.`, `_` and `-`, not empty.
fn check_segment(segment: &str) -> Result<(), String> {
    if segment.is_empty() {
        return Err("must not have empty segments (no '::' and no trailing ':')".to_owned());
    }
    if let Some(bad) = segment
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(format!(
            "segment '{}' has the character '{bad}'; only letters, digits, '.', '_' and '-' are allowed",
            super::truncate(segment, 80)
        ));
    }
    Ok(())
}

impl fmt::Display for AirUrn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for AirUrn {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl serde::Serialize for AirUrn {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn package(name: &str) -> PackageName {
        PackageName::parse(name).expect("a valid package name")
    }

    fn of(name: &str) -> String {
        AirUrn::of_package(&package(name)).to_string()
    }

    #[test]
    fn a_reverse_domain_name_becomes_its_domain_and_its_labels() {
        assert_eq!(of("com.example.weather"), "urn:air:example.com:weather");
        assert_eq!(
            of("com.example.tools.weather"),
            "urn:air:example.com:tools:weather"
        );
    }

    #[test]
    fn a_shared_host_keeps_the_users_subdomain_as_the_publisher() {
        assert_eq!(
            of("io.github.alice.search"),
            "urn:air:alice.github.io:search"
        );
        assert_eq!(of("uk.co.bbc.weather"), "urn:air:bbc.co.uk:weather");
        assert_eq!(of("app.vercel.my-app"), "urn:air:my-app.vercel.app:_");
    }

    #[test]
    fn a_package_that_is_only_a_domain_gets_the_root_segment() {
        assert_eq!(of("ai.fabi"), "urn:air:fabi.ai:_");
        assert_eq!(of("io.github"), "urn:air:github.io:_");
    }

    #[test]
    fn underscores_in_the_domain_are_written_as_dashes() {
        assert_eq!(of("com.my_company.bot"), "urn:air:my-company.com:bot");
    }

    #[test]
    fn every_mapped_package_name_comes_back() {
        for name in [
            "com.example.weather",
            "com.example.tools.weather_bot",
            "io.github.alice.search",
            "io.github.alice",
            "uk.co.bbc.news.weather",
            "ai.fabi",
            "com.a.b.c.d.e.f.g.h.i.j.k.l.m.n.o",
        ] {
            let urn = AirUrn::of_package(&package(name));
            assert_eq!(
                urn.to_package_name().expect("maps back").as_str(),
                name,
                "{urn}"
            );
            assert_eq!(AirUrn::parse(urn.as_str()).as_ref(), Ok(&urn));
        }
    }

    #[test]
    fn a_package_claims_its_domain_and_the_hosts_its_leading_labels_name() {
        let claims = |urn: &str, name: &str| {
            AirUrn::parse(urn)
                .expect("valid")
                .is_published_by(&package(name))
        };
        // Real A2A publishers on subdomains, with the package names their identifiers give.
        for (urn, name) in [
            (
                "urn:air:hub.lifie.ai:agents:travel",
                "ai.lifie.hub.agents.travel",
            ),
            ("urn:air:hub.lifie.ai:x", "ai.lifie.hub"),
            (
                "urn:air:governance.taskhawktech.com:audit",
                "com.taskhawktech.governance.audit",
            ),
            (
                "urn:air:www.luminarylane.app:concierge",
                "app.luminarylane.www.concierge",
            ),
            (
                "urn:air:lucid.itsgloria.ai:gloria",
                "ai.itsgloria.lucid.gloria",
            ),
            (
                "urn:air:hello.a2aregistry.org:registry",
                "org.a2aregistry.hello.registry",
            ),
            ("urn:air:lifie.ai:tasks", "ai.lifie.hub.tasks"),
            ("urn:air:Hub.Lifie.AI:tasks", "ai.lifie.hub.tasks"),
            ("urn:air:my-co.com:bot", "com.my_co.bot"),
            ("urn:air:alice.github.io:search", "io.github.alice.search"),
        ] {
            assert!(claims(urn, name), "{name} claims {urn}");
            let mapped = AirUrn::parse(urn).expect("valid").to_package_name();
            assert!(
                claims(urn, mapped.expect("maps").as_str()),
                "{urn} maps to a claimant"
            );
        }
        for (urn, name) in [
            // A sibling host, a host above the domain, another domain, a user of a shared host.
            ("urn:air:other.lifie.ai:tasks", "ai.lifie.hub.tasks"),
            ("urn:air:ai:tasks", "ai.lifie.hub.tasks"),
            ("urn:air:lifie.com:tasks", "ai.lifie.hub.tasks"),
            ("urn:air:bob.github.io:search", "io.github.alice.search"),
            ("urn:air:github.io:search", "io.github.alice.search"),
            // Deeper than the package name itself.
            ("urn:air:a.hub.lifie.ai:tasks", "ai.lifie.hub"),
        ] {
            assert!(!claims(urn, name), "{name} must not claim {urn}");
        }
    }

    #[test]
    fn a_foreign_identifier_names_a_package_by_the_documented_rule() {
        let urn = AirUrn::parse("urn:air:Acme.com:server:Weather.Node").expect("valid");
        assert_eq!(urn.as_str(), "urn:air:acme.com:server:Weather.Node");
        assert_eq!(urn.publisher(), "acme.com");
        assert_eq!(
            urn.to_package_name().expect("maps").as_str(),
            "com.acme.server.weather-node"
        );
    }

    #[test]
    fn malformed_identifiers_say_what_is_wrong() {
        for (bad, says) in [
            ("urn:ai:acme.com:x", "must start with"),
            ("acme.com:x", "must start with"),
            ("urn:air:acme.com", "must name the agent"),
            ("urn:air:acme.com:", "empty segments"),
            ("urn:air:acme.com::x", "empty segments"),
            ("urn:air:acme_corp.com:x", "publisher"),
            ("urn:air:-acme.com:x", "publisher"),
            ("urn:air::x", "publisher"),
            ("urn:air:acme.com:we ather", "character ' '"),
            ("urn:air:acme.com:wé", "character 'é'"),
        ] {
            let error = AirUrn::parse(bad).expect_err(bad);
            assert!(error.contains(says), "{bad}: {error}");
        }
        let long = format!("urn:air:acme.com:{}", "a".repeat(300));
        assert!(AirUrn::parse(&long).expect_err("long").contains("255"));
    }

    #[test]
    fn the_prefix_is_read_in_any_case() {
        assert_eq!(
            AirUrn::parse("URN:AIR:Example.COM:Agent")
                .expect("valid")
                .as_str(),
            "urn:air:example.com:Agent"
        );
    }
}
