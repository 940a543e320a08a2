//! `ard=ORIGIN`: an ARD publisher. Its manifest is found where ARD says to look:
//! `/.well-known/ard.json`, else the `rel="ard"` link of the origin's home page, else
//! `/.well-known/ai-catalog.json`. Nested catalogues (`application/ai-catalog+json` entries,
//! which is also how a manifest pages) are followed on the same origin, breadth first, within
//! `MAX_PAGES`. Each page is asked for conditionally (`If-None-Match`, `If-Modified-Since`): a
//! page that has not changed costs no write, and its entries and nested catalogues are taken
//! from the position. An entry gone from every page is removed when the crawl ends.
//!
//! An entry becomes an agent by its fields: `identifier` (a package name, or `urn:air:…` which
//! it keeps), `displayName` (or `name`), `description`, `tags`, `version`,
//! `representativeQueries`, `metadata.packageName` (preferred as the package name when valid),
//! and its `url` as where the agent is described; an inline A2A card (`data`) is its card.
//! Registry entries (`application/ai-registry+json`) are not agents and are left out.

use std::collections::{BTreeMap, HashSet, VecDeque};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use url::Url;

use crate::domain::AgentDraft;
use crate::outbound::{HTML_OR_TEXT, JSON};
use crate::timestamp::Timestamp;

use super::Pass;
use super::fetch::{self, MirrorError, Validators};
use super::plan::{Entry, Read, Skip, Status};

/// Most catalogue pages read in one crawl.
const MAX_PAGES: usize = 2_000;

/// What the crawl remembers of each page, by URL.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Position {
    /// The manifest's URL, once found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    manifest: Option<String>,
    #[serde(default)]
    pages: BTreeMap<String, PageMemo>,
}

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
struct PageMemo {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    etag: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    last_modified: Option<String>,
    /// The package names of its entries.
    #[serde(default)]
    names: Vec<String>,
    /// The nested catalogues it names.
    #[serde(default)]
    children: Vec<String>,
}

pub(super) async fn pass(pass: &mut Pass<'_>) -> Result<(), MirrorError> {
    let mut position: Position = pass.stored_position();
    let manifest = match position
        .manifest
        .as_deref()
        .and_then(|url| Url::parse(url).ok())
    {
        Some(url) => url,
        None => find_manifest(pass).await?,
    };
    position.manifest = Some(manifest.to_string());
    pass.track_seen();
    let mut queue = VecDeque::from([manifest.clone()]);
    let mut visited: HashSet<String> = HashSet::new();
    let mut pages: BTreeMap<String, PageMemo> = BTreeMap::new();
    while let Some(url) = queue.pop_front() {
        if !visited.insert(url.to_string()) {
            continue;
        }
        if visited.len() > MAX_PAGES {
            return Err(MirrorError::Malformed(format!(
                "{manifest}: more than {MAX_PAGES} catalogue pages"
            )));
        }
        let memo = position
            .pages
            .get(url.as_str())
            .cloned()
            .unwrap_or_default();
        let validators = Validators {
            etag: memo.etag.clone(),
            last_modified: memo.last_modified.clone(),
        };
        let fetched = fetch::get(pass.outbound(), url.clone(), JSON, &validators).await?;
        let (reads, memo) = if fetched.status == axum::http::StatusCode::NOT_MODIFIED {
            // Unchanged: its entries stay as written, and are still listed.
            if let Some(seen) = &mut pass.seen {
                seen.extend(memo.names.iter().cloned());
            }
            (Vec::new(), memo)
        } else {
            let page: Value = fetched
                .json()
                .map_err(|err| MirrorError::Malformed(format!("{url}: {err}")))?;
            let entries = page
                .get("entries")
                .and_then(Value::as_array)
                .ok_or_else(|| MirrorError::Malformed(format!("{url}: no `entries` array")))?;
            let mut reads = Vec::with_capacity(entries.len());
            let mut memo = PageMemo {
                etag: fetched.etag.clone(),
                last_modified: fetched.last_modified.clone(),
                ..PageMemo::default()
            };
            for entry in entries {
                match entry.get("type").and_then(Value::as_str) {
                    Some(crate::ard::CATALOG_TYPE) => {
                        if let Some(child) = nested(&url, entry) {
                            memo.children.push(child.to_string());
                        }
                    }
                    Some(crate::ard::REGISTRY_TYPE) => {}
                    _ => {
                        let read = read_entry(&url, entry);
                        if let Read::Entry(entry) = &read {
                            memo.names
                                .push(entry.draft.package_name.as_str().to_owned());
                        }
                        reads.push(read);
                    }
                }
            }
            (reads, memo)
        };
        for child in &memo.children {
            if let Ok(child) = Url::parse(child) {
                queue.push_back(child);
            }
        }
        pages.insert(url.to_string(), memo);
        // The position is written once the crawl is over: a crawl stopped midway starts again
        // from the manifest, asking conditionally by the last finished crawl's validators, and
        // what it writes again is what is stored already.
        if !reads.is_empty() {
            pass.write(reads, None, pass.walked).await?;
        }
    }
    // Pages no longer linked are forgotten.
    let text = serde_json::to_string(&Position {
        manifest: position.manifest.clone(),
        pages,
    })
    .unwrap_or_default();
    pass.write(Vec::new(), Some(text.clone()), true).await?;
    pass.sweep(text).await
}

/// Where the origin's manifest is: `/.well-known/ard.json`, the home page's `rel="ard"` link,
/// or `/.well-known/ai-catalog.json`, the first that answers.
async fn find_manifest(pass: &Pass<'_>) -> Result<Url, MirrorError> {
    let origin = &pass.source.url;
    let well_known = origin
        .join(crate::ard::MANIFEST_PATH)
        .map_err(|err| MirrorError::Malformed(err.to_string()))?;
    let missing = |err: &MirrorError| {
        matches!(
            err,
            MirrorError::Status {
                status: 404 | 410,
                ..
            }
        )
    };
    match fetch::get(
        pass.outbound(),
        well_known.clone(),
        JSON,
        &Validators::default(),
    )
    .await
    {
        Ok(_) => return Ok(well_known),
        Err(err) if missing(&err) => {}
        Err(err) => return Err(err),
    }
    if let Ok(home) = fetch::get(
        pass.outbound(),
        origin.clone(),
        HTML_OR_TEXT,
        &Validators::default(),
    )
    .await
        && let Some(link) = ard_link(&home.text()).and_then(|href| home.url.join(&href).ok())
        && same_origin(origin, &link)
    {
        return Ok(link);
    }
    origin
        .join(crate::ard::AI_CATALOG_PATH)
        .map_err(|err| MirrorError::Malformed(err.to_string()))
}

/// The `href` of the first `<link rel="ard" …>` of an HTML page.
fn ard_link(html: &str) -> Option<String> {
    let lower = html.to_ascii_lowercase();
    let mut from = 0;
    while let Some(at) = lower[from..].find("<link") {
        let start = from + at;
        let end = lower[start..]
            .find('>')
            .map_or(lower.len(), |end| start + end);
        let tag = &html[start..end];
        let tag_lower = &lower[start..end];
        if attribute(tag, tag_lower, "rel").is_some_and(|rel| {
            rel.split_ascii_whitespace()
                .any(|value| value.eq_ignore_ascii_case("ard"))
        }) {
            return attribute(tag, tag_lower, "href");
        }
        from = end;
    }
    None
}

fn attribute(tag: &str, lower: &str, name: &str) -> Option<String> {
    let mut from = 0;
    while let Some(at) = lower[from..].find(name) {
        let start = from + at;
        let rest = lower[start + name.len()..].trim_start();
        let before_ok = start == 0 || lower.as_bytes()[start - 1].is_ascii_whitespace();
        if before_ok && rest.starts_with('=') {
            let offset = tag.len() - rest.len() + 1;
            let value = tag[offset..].trim_start();
            let (quote, body) = match value.chars().next() {
                Some(q @ ('"' | '\'')) => (Some(q), &value[1..]),
                _ => (None, value),
            };
            let end = match quote {
                Some(q) => body.find(q),
                None => body.find(|c: char| c.is_ascii_whitespace()),
            }
            .unwrap_or(body.len());
            return Some(body[..end].to_owned());
        }
        from = start + name.len();
    }
    None
}

fn same_origin(a: &Url, b: &Url) -> bool {
    a.scheme() == b.scheme()
        && a.host_str() == b.host_str()
        && a.port_or_known_default() == b.port_or_known_default()
}

/// A nested catalogue's URL, when it is on the page's origin (a catalogue elsewhere is another
/// publisher's, configured as its own source if wanted).
fn nested(page: &Url, entry: &Value) -> Option<Url> {
    let url = page.join(entry.get("url")?.as_str()?).ok()?;
    same_origin(page, &url).then_some(url)
}

/// One ARD entry as an agent.
fn read_entry(page: &Url, entry: &Value) -> Read {
    let identifier = entry
        .get("identifier")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let package = entry
        .pointer("/metadata/packageName")
        .and_then(Value::as_str)
        .and_then(|name| crate::domain::PackageName::parse(name).ok())
        .or_else(|| crate::domain::urn::package_name_of(identifier));
    let Some(package) = package else {
        return Read::Skipped(Skip::new(
            identifier,
            Skip::IDENTIFIER,
            "the identifier is neither a package name nor urn:air:…",
        ));
    };
    let text = |keys: &[&str]| {
        keys.iter()
            .find_map(|key| entry.get(*key).and_then(Value::as_str))
            .map(str::to_owned)
    };
    let mut body = json!({
        "package_name": package.as_str(),
        "name": text(&["displayName", "name"]).unwrap_or_else(|| package.as_str().to_owned()),
        "description": text(&["description"]).unwrap_or_default(),
    });
    if crate::domain::urn::is_urn(identifier) {
        body["identifier"] = json!(identifier);
    }
    for (from, to) in [
        ("tags", "tags"),
        ("version", "version"),
        ("representativeQueries", "representative_queries"),
    ] {
        if let Some(value) = entry.get(from).filter(|value| !value.is_null()) {
            body[to] = value.clone();
        }
    }
    if let Some(url) = entry
        .get("url")
        .and_then(Value::as_str)
        .and_then(|url| page.join(url).ok())
    {
        body["manifest_url"] = json!(url.to_string());
    }
    if entry.get("type").and_then(Value::as_str) == Some(crate::ard::A2A_TYPE)
        && let Some(card) = entry.get("data").filter(|data| data.is_object())
    {
        body["card"] = card.clone();
    }
    match AgentDraft::parse(&body) {
        Ok(draft) => Read::Entry(Box::new(Entry {
            upstream_id: identifier.to_owned(),
            draft,
            // An entry whose metadata says it is deprecated (as this registry's entries do).
            status: if entry.pointer("/metadata/deprecated") == Some(&json!(true)) {
                Status::Deprecated
            } else {
                Status::Active
            },
            is_latest: true,
            published_at: entry
                .get("updatedAt")
                .cloned()
                .and_then(|value| serde_json::from_value::<Timestamp>(value).ok()),
        })),
        Err(errors) => Read::Skipped(Skip::fields(identifier, &errors)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ard_link_of_a_page_is_found_in_any_attribute_order() {
        let html = r#"<html><head><link rel="stylesheet" href="/s.css"><LINK href='/cat.json' REL="alternate ard"></head></html>"#;
        assert_eq!(ard_link(html).as_deref(), Some("/cat.json"));
        assert_eq!(ard_link("<link rel=icon href=/x>"), None);
        assert_eq!(
            ard_link("<link rel=ard href=/m.json>").as_deref(),
            Some("/m.json")
        );
    }

    #[test]
    fn an_entry_reads_as_an_agent_and_a_foreign_catalogue_is_not_followed() {
        let page = Url::parse("https://acme.dev/.well-known/ard.json").expect("url");
        let entry = json!({"identifier": "urn:air:acme.dev:agents:weather", "displayName": "Weather",
            "type": crate::ard::A2A_TYPE, "url": "/cards/weather.json", "description": "Forecasts.",
            "tags": ["weather"], "representativeQueries": ["will it rain tomorrow", "forecast for Paris"]});
        let Read::Entry(read) = read_entry(&page, &entry) else {
            panic!("an entry");
        };
        assert_eq!(read.draft.package_name.as_str(), "dev.acme.agents.weather");
        assert_eq!(
            read.draft.manifest_url.as_deref(),
            Some("https://acme.dev/cards/weather.json")
        );
        assert_eq!(read.draft.representative_queries.len(), 2);
        let foreign =
            json!({"type": crate::ard::CATALOG_TYPE, "url": "https://other.example/ard.json"});
        assert_eq!(nested(&page, &foreign), None);
        let local = json!({"type": crate::ard::CATALOG_TYPE, "url": "/ard.json?page=2"});
        assert!(nested(&page, &local).is_some());
    }

    #[test]
    fn entries_of_publishers_on_subdomains_read_as_agents() {
        // Real A2A publishers serve their manifests from subdomains of their domain.
        for (host, name, package) in [
            (
                "hub.lifie.ai",
                "travel-planner",
                "ai.lifie.hub.travel-planner",
            ),
            (
                "governance.taskhawktech.com",
                "audit",
                "com.taskhawktech.governance.audit",
            ),
            (
                "www.luminarylane.app",
                "concierge",
                "app.luminarylane.www.concierge",
            ),
            ("lucid.itsgloria.ai", "gloria", "ai.itsgloria.lucid.gloria"),
            (
                "hello.a2aregistry.org",
                "registry-bot",
                "org.a2aregistry.hello.registry-bot",
            ),
        ] {
            let page = Url::parse(&format!("https://{host}/.well-known/ard.json")).expect("url");
            let identifier = format!("urn:air:{host}:{name}");
            let entry = json!({"identifier": identifier, "displayName": name,
                "type": crate::ard::A2A_TYPE, "url": format!("/agents/{name}.json"),
                "description": "An agent."});
            let read = read_entry(&page, &entry);
            let Read::Entry(read) = read else {
                panic!("{host}: {read:?}");
            };
            assert_eq!(read.draft.package_name.as_str(), package);
            assert_eq!(
                read.draft.identifier.as_ref().map(|urn| urn.as_str()),
                Some(identifier.as_str())
            );
        }
        // A package name of the domain itself does not claim a subdomain's identifier.
        let page = Url::parse("https://hub.lifie.ai/.well-known/ard.json").expect("url");
        let entry = json!({"identifier": "urn:air:hub.lifie.ai:tasks", "type": crate::ard::A2A_TYPE,
            "metadata": {"packageName": "ai.lifie.tasks"}, "url": "/t.json"});
        assert!(matches!(read_entry(&page, &entry), Read::Skipped { .. }));
    }
}
