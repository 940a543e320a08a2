//! An agent as an MCP Registry `server.json` document (schema 2025-09-29): what the MCP
//! Registry read API (`/v0.1/servers`) and the MCP server's `get_agent_card` tool answer.
//! `domain::server_json` reads the other way, a `server.json` as a publish body.

use serde_json::{Map, Value, json};

use crate::domain::reach::Package;
use crate::domain::server_json::{LISTING_META as REGISTRY_META, PUBLISHER_META};
use crate::search::DEFAULT_VERSION;
use crate::store::Agent;

/// The `server.json` schema the documents follow.
pub const SERVER_SCHEMA: &str =
    "https://static.modelcontextprotocol.io/schemas/2025-09-29/server.schema.json";
/// `server.json` limits its description to this many characters.
const MAX_DESCRIPTION_CHARS: usize = 100;

/// Whether an agent (at some version) is an MCP server: it lists a remote or a package.
pub fn is_mcp(agent: &Agent) -> bool {
    !agent.draft.reach.remotes.is_empty() || !agent.draft.reach.packages.is_empty()
}

pub use crate::domain::package_name::mcp_name;

/// An agent as a `server.json` document, within the published schema's rules: a one-slash
/// name, a description of at most 100 characters (the full one is in `_meta`), a version, and
/// only packages that name a version (the schema requires one; the others are listed in
/// `_meta`).
pub fn document(agent: &Agent) -> Value {
    let draft = &agent.draft;
    let reach = &draft.reach;
    let mut server = Map::new();
    server.insert("$schema".to_owned(), json!(SERVER_SCHEMA));
    server.insert("name".to_owned(), json!(mcp_name(agent.package_name())));
    server.insert("title".to_owned(), json!(draft.name));
    server.insert(
        "description".to_owned(),
        json!(short_description(&draft.description)),
    );
    server.insert(
        "version".to_owned(),
        json!(draft.version.as_deref().unwrap_or(DEFAULT_VERSION)),
    );
    // Where the server is described: the field a `server.json` reader maps back to it.
    if let Some(website) = draft.manifest_url.as_deref() {
        server.insert("websiteUrl".to_owned(), json!(website));
    }
    if let Some(repository) = &reach.repository {
        server.insert(
            "repository".to_owned(),
            json!({"url": repository.url, "source": repository.source.as_deref().unwrap_or("unknown")}),
        );
    }
    let (versioned, unversioned): (Vec<&Package>, Vec<&Package>) = reach
        .packages
        .iter()
        .partition(|package| package.version.as_deref().is_some_and(|v| v != "latest"));
    if !versioned.is_empty() {
        server.insert(
            "packages".to_owned(),
            Value::Array(versioned.into_iter().map(package_json).collect()),
        );
    }
    if !reach.remotes.is_empty() {
        let remotes: Vec<Value> = reach
            .remotes
            .iter()
            .map(|remote| json!({"type": remote.kind, "url": remote.url}))
            .collect();
        server.insert("remotes".to_owned(), Value::Array(remotes));
    }
    let mut listing = json!({
        "id": agent.id,
        "package_name": agent.package_name(),
        "description": draft.description,
        "verification_level": agent.verification_level,
    });
    if !unversioned.is_empty() {
        listing["unversioned_packages"] =
            Value::Array(unversioned.into_iter().map(package_json).collect());
    }
    server.insert(
        "_meta".to_owned(),
        json!({PUBLISHER_META: {REGISTRY_META: listing}}),
    );
    Value::Object(server)
}

fn package_json(package: &Package) -> Value {
    let mut out = json!({
        "registryType": package.registry_type,
        "identifier": package.identifier,
        "transport": {"type": package.transport.kind},
    });
    if let Some(version) = &package.version {
        out["version"] = json!(version);
    }
    if let Some(hint) = &package.runtime_hint {
        out["runtimeHint"] = json!(hint);
    }
    if !package.environment_variables.is_empty() {
        let variables: Vec<Value> = package
            .environment_variables
            .iter()
            .map(|variable| {
                let mut out = json!({
                    "name": variable.name,
                    "isRequired": variable.is_required,
                    "isSecret": variable.is_secret,
                });
                if let Some(description) = &variable.description {
                    out["description"] = json!(description);
                }
                out
            })
            .collect();
        out["environmentVariables"] = Value::Array(variables);
    }
    out
}

/// At most 100 characters, cut at a word with `…` when longer.
fn short_description(text: &str) -> String {
    let text = text.trim();
    if text.chars().count() <= MAX_DESCRIPTION_CHARS {
        return text.to_owned();
    }
    let cut: String = text.chars().take(MAX_DESCRIPTION_CHARS - 1).collect();
    let at_word = cut.rsplit_once(' ').map_or(cut.as_str(), |(head, _)| head);
    format!("{}…", at_word.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mcp_name_ends_with_the_last_label_after_a_slash() {
        assert_eq!(mcp_name("io.github.acme.weather"), "io.github.acme/weather");
        assert_eq!(mcp_name("io.my_org.tool"), "io.my-org/tool");
    }

    #[test]
    fn long_descriptions_are_cut_at_a_word() {
        let long = "word ".repeat(40);
        let short = short_description(&long);
        assert!(short.chars().count() <= MAX_DESCRIPTION_CHARS, "{short}");
        assert!(short.ends_with("word…"), "{short}");
        assert_eq!(short_description(" tidy "), "tidy");
    }
}
