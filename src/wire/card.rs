//! A2A v1.0 agent cards: built for published agents and for the registry itself.

use serde_json::{Map, Value, json};

use crate::domain::agent::{CAPABILITIES_EXTENSION_URI, REGISTRY_EXTENSION_URI};
use crate::domain::{AgentDraft, Capability, FieldError, Health, Payment};
use crate::store::Agent;

/// URI of the card extension carrying the agent's health as the registry last probed it.
pub const HEALTH_EXTENSION_URI: &str = "https://a2a-registry.org/extensions/health/v1";
/// What the registry's scanner found in the agent's texts and in what its endpoint shows.
pub const SECURITY_EXTENSION_URI: &str = "https://a2a-registry.org/extensions/security/v1";
/// The publisher's deprecation of the agent.
pub const DEPRECATION_EXTENSION_URI: &str = "https://a2a-registry.org/extensions/deprecation/v1";
/// Where a mirrored agent came from.
pub const PROVENANCE_EXTENSION_URI: &str = "https://a2a-registry.org/extensions/provenance/v1";

/// The A2A protocol version every interface the registry builds speaks.
pub const PROTOCOL_VERSION: &str = "1.0";
/// The protocol binding of every interface the registry builds.
pub const PROTOCOL_BINDING: &str = "JSONRPC";
/// The registry's own `agent_id`.
pub const REGISTRY_AGENT_ID: &str = "registry";
/// The package name of the registry's own entry in its catalogue (MCP name
/// `registry/agent-registry`).
pub const REGISTRY_PACKAGE: &str = "registry.agent-registry";
/// The registry's display name.
pub const REGISTRY_NAME: &str = "Agent Registry";
/// The registry's description, shared by both card formats.
pub const REGISTRY_DESCRIPTION: &str = "A registry of A2A agents. Finds agents for a task from \
natural-language intent, filtered by target, category, tags, verification level and payment terms \
(model, protocol, rail, direction), and resolves package names such as com.example.weather to \
their agent cards.";

/// The description of the registry's own entry in its catalogue: what it does, without the
/// card's example package name, so that it is found for what it is (a directory of agents) and
/// not for a topic such as the weather.
const REGISTRY_ENTRY_DESCRIPTION: &str = "This agent registry itself: finds A2A agents and MCP \
servers for a task from natural-language intent, filtered by category, tags, verification level \
and payment terms, and resolves package names to agent cards. It speaks A2A at /a2a/v1 and MCP \
at /mcp.";

/// Media types of agent cards built for published agents.
const DEFAULT_MODES: [&str; 2] = ["application/json", "text/plain"];
/// Media types of skills built from capabilities, whose input is a JSON object.
const CAPABILITY_SKILL_MODES: [&str; 1] = ["application/json"];

/// What an agent card is built from; borrowed from an agent record.
#[derive(Debug, Clone)]
pub struct CardInput<'a> {
    /// Display name.
    pub name: &'a str,
    /// Description.
    pub description: &'a str,
    /// Agent version (A2A requires one).
    pub version: &'a str,
    /// The agent's JSON-RPC endpoint. A2A v1.0 requires at least one interface, so a card built
    /// without it has an empty `supportedInterfaces`, which strict clients reject: callers should
    /// pass one whenever the agent has an endpoint.
    pub url: Option<&'a str>,
    /// A URL with more documentation.
    pub documentation_url: Option<&'a str>,
    /// The provider as (organization, url).
    pub provider: Option<(&'a str, &'a str)>,
    /// Capabilities, one skill each.
    pub capabilities: &'a [Capability],
    /// The agent's tags, given to every skill.
    pub tags: &'a [String],
    /// Payment terms, published in the registry extension.
    pub payment: Option<&'a Payment>,
    /// Requests a user might make that the agent serves, published in the registry extension.
    pub representative_queries: &'a [String],
    /// Further `AgentExtension` objects, appended after the registry's own.
    pub extensions: Vec<Value>,
}

/// Builds a valid A2A v1.0 AgentCard: one skill per capability, the registry extension when there
/// are payment terms, and the capabilities extension when any capability has an input schema
/// (so that a card read back gives the same capabilities).
pub fn agent_card(input: &CardInput<'_>) -> Value {
    let mut extensions = Vec::new();
    if input.payment.is_some() || !input.representative_queries.is_empty() {
        extensions.push(registry_extension(
            input.payment,
            input.representative_queries,
        ));
    }
    if input
        .capabilities
        .iter()
        .any(|capability| capability.input_schema.is_some())
    {
        extensions.push(capabilities_extension(input.capabilities));
    }
    extensions.extend(input.extensions.iter().cloned());
    let skills: Vec<Value> = input
        .capabilities
        .iter()
        .map(|capability| capability_skill(capability, input.tags))
        .collect();
    let mut card = card_skeleton(input.name, input.description, input.version, input.url);
    card.insert("capabilities".to_owned(), capabilities_object(extensions));
    card.insert("skills".to_owned(), Value::Array(skills));
    if let Some((organization, url)) = input.provider {
        card.insert("provider".to_owned(), provider(organization, url));
    }
    if let Some(url) = input.documentation_url {
        card.insert("documentationUrl".to_owned(), json!(url));
    }
    Value::Object(card)
}

/// The fields every card shares: identity, interface, default modes and security.
fn card_skeleton(
    name: &str,
    description: &str,
    version: &str,
    url: Option<&str>,
) -> Map<String, Value> {
    let interfaces: Vec<Value> = url
        .map(|url| {
            json!({
                "url": url,
                "protocolBinding": PROTOCOL_BINDING,
                "protocolVersion": PROTOCOL_VERSION
            })
        })
        .into_iter()
        .collect();
    let mut card = Map::new();
    card.insert("name".to_owned(), json!(name));
    card.insert("description".to_owned(), json!(description));
    card.insert("version".to_owned(), json!(version));
    card.insert("supportedInterfaces".to_owned(), Value::Array(interfaces));
    card.insert("defaultInputModes".to_owned(), json!(DEFAULT_MODES));
    card.insert("defaultOutputModes".to_owned(), json!(DEFAULT_MODES));
    card.insert(
        "securitySchemes".to_owned(),
        json!({"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}}),
    );
    card.insert(
        "securityRequirements".to_owned(),
        json!([{"schemes": {"bearer": {"list": []}}}]),
    );
    card
}

/// The `capabilities` object: no streaming, push or extended card; the given extensions.
fn capabilities_object(extensions: Vec<Value>) -> Value {
    json!({
        "streaming": false,
        "pushNotifications": false,
        "extendedAgentCard": false,
        "extensions": extensions
    })
}

fn provider(organization: &str, url: &str) -> Value {
    json!({"organization": organization, "url": url})
}

/// One skill per capability; A2A requires a description, so an empty one falls back to the name.
fn capability_skill(capability: &Capability, tags: &[String]) -> Value {
    let description = if capability.description.trim().is_empty() {
        capability.name.as_str()
    } else {
        capability.description.as_str()
    };
    json!({
        "id": capability.name,
        "name": capability.name,
        "description": description,
        "tags": tags,
        "inputModes": CAPABILITY_SKILL_MODES,
        "outputModes": CAPABILITY_SKILL_MODES
    })
}

/// The registry extension carrying the canonical payment terms and the representative
/// queries, each when known.
fn registry_extension(payment: Option<&Payment>, representative_queries: &[String]) -> Value {
    let mut params = Map::new();
    if let Some(payment) = payment {
        params.insert("payment".to_owned(), json!(payment));
    }
    if !representative_queries.is_empty() {
        params.insert(
            "representative_queries".to_owned(),
            json!(representative_queries),
        );
    }
    json!({
        "uri": REGISTRY_EXTENSION_URI,
        "description": "This agent as listed in the agent registry: its payment terms and the requests it serves.",
        "required": false,
        "params": params
    })
}

/// The registry extension carrying what the liveness prober last found.
pub fn health_extension(health: &Health) -> Value {
    json!({
        "uri": HEALTH_EXTENSION_URI,
        "description": "Whether this agent's endpoint answered the agent registry's last liveness probe.",
        "required": false,
        "params": {"health": health}
    })
}

/// The registry extension with what its scanner found (`status`, `max_severity`, `findings`,
/// and what changed at the endpoint since it was listed).
pub fn security_extension(report: &crate::domain::scan::Report) -> Value {
    json!({
        "uri": SECURITY_EXTENSION_URI,
        "description": "What the agent registry's scanner found in this agent's texts and in what its endpoint shows a model: hidden instructions, invisible characters, pasted credentials, changes since it was listed.",
        "required": false,
        "params": {"security": report}
    })
}

/// The registry extension carrying the publisher's deprecation.
pub fn deprecation_extension(deprecation: &crate::domain::deprecation::Deprecation) -> Value {
    json!({
        "uri": DEPRECATION_EXTENSION_URI,
        "description": "The publisher deprecated this agent: the message says why, the successor (when named) what to use instead.",
        "required": false,
        "params": {"deprecation": deprecation}
    })
}

/// The registry extension saying where a mirrored agent came from.
pub fn provenance_extension(provenance: &crate::store::Provenance) -> Value {
    json!({
        "uri": PROVENANCE_EXTENSION_URI,
        "description": "This agent is mirrored by the agent registry from another catalogue: the source, the entry there, and when it was fetched.",
        "required": false,
        "params": {"provenance": provenance}
    })
}

/// The extension carrying capabilities with their input schemas, losslessly.
fn capabilities_extension(capabilities: &[Capability]) -> Value {
    json!({
        "uri": CAPABILITIES_EXTENSION_URI,
        "description": "Capabilities of this agent with the JSON Schemas of their inputs.",
        "required": false,
        "params": {"capabilities": capabilities}
    })
}

/// One of the registry's own skills; both card formats are derived from this list.
struct RegistrySkill {
    id: &'static str,
    name: &'static str,
    description: &'static str,
    tags: &'static [&'static str],
    examples: &'static [&'static str],
    input_schema: fn() -> Option<Value>,
}

const REGISTRY_SKILLS: [RegistrySkill; 2] = [
    RegistrySkill {
        id: "search_agents",
        name: "Search agents",
        description: "Finds agents from natural-language intent, best match first. Send the \
query as text, or a data part {query, limit} that may also carry the filters target, category, \
tags, verification_level, payment_model, payment_protocol, payment_rail and payment_direction.",
        tags: &["search", "discovery", "agents", "registry"],
        examples: &[
            "I need the current price of bitcoin",
            "weather forecast agents that accept x402 payments",
        ],
        input_schema: search_agents_schema,
    },
    RegistrySkill {
        id: "resolve_package",
        name: "Resolve package",
        description: "Returns the agent card of a published agent from its package name, a \
reverse-domain name such as com.example.agent. Send the package name as text or as a data part \
{package_name}.",
        tags: &["resolve", "agent-card", "package", "registry"],
        examples: &["com.example.weather"],
        input_schema: no_schema,
    },
];

fn search_agents_schema() -> Option<Value> {
    Some(json!({
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "description": "What the agent should do, in natural language."
            },
            "limit": {
                "type": "integer",
                "description": "Maximum number of agents to return.",
                "default": 5,
                "minimum": 1,
                "maximum": 100
            }
        },
        "required": ["query"]
    }))
}

/// The registry's own shape gives `resolve_package` no input schema.
fn no_schema() -> Option<Value> {
    None
}

/// The registry's capabilities in its own shape: `{name, description, input_schema?}`.
pub fn registry_capabilities() -> Vec<Capability> {
    REGISTRY_SKILLS
        .iter()
        .map(|skill| Capability {
            name: skill.id.to_owned(),
            description: skill.description.to_owned(),
            input_schema: (skill.input_schema)(),
        })
        .collect()
}

fn registry_skill(skill: &RegistrySkill) -> Value {
    json!({
        "id": skill.id,
        "name": skill.name,
        "description": skill.description,
        "tags": skill.tags,
        "examples": skill.examples,
        "inputModes": ["text/plain", "application/json"],
        "outputModes": ["application/json", "text/plain"]
    })
}

/// The registry's own A2A v1.0 card, served at `/.well-known/agent-card.json`.
///
/// It carries only A2A v1.0 AgentCard fields, so strict parsers accept it; the registry's
/// `agent_id` and its own capability list travel in a non-required extension at
/// `{site_url}/extensions/registry-capabilities/v1`.
pub fn registry_card(site_url: &str, base_url: &str, version: &str) -> Value {
    let site_url = site_url.trim_end_matches('/');
    let base_url = base_url.trim_end_matches('/');
    let endpoint = format!("{base_url}/a2a/v1");
    let mut card = card_skeleton(
        REGISTRY_NAME,
        REGISTRY_DESCRIPTION,
        version,
        Some(&endpoint),
    );
    let extension = json!({
        "uri": format!("{site_url}/extensions/registry-capabilities/v1"),
        "description": "The registry's capabilities with their input schemas.",
        "required": false,
        "params": {"agent_id": REGISTRY_AGENT_ID, "capabilities": registry_capabilities()}
    });
    let mcp = json!({
        "uri": format!("{site_url}/extensions/mcp-server/v1"),
        "description": "The registry is also an MCP server (Streamable HTTP): the tools \
    search_agents, get_agent, get_agent_card and list_categories, and its agents' records and cards \
    as resources.",
        "required": false,
        "params": {
            "url": format!("{base_url}{}", super::mcp::ENDPOINT),
            "transport": "streamable-http",
            "protocolVersions": super::mcp::Revision::supported(),
        }
    });
    card.insert(
        "capabilities".to_owned(),
        capabilities_object(vec![extension, mcp]),
    );
    card.insert(
        "skills".to_owned(),
        REGISTRY_SKILLS.iter().map(registry_skill).collect(),
    );
    card.insert("provider".to_owned(), provider(REGISTRY_NAME, site_url));
    card.insert(
        "documentationUrl".to_owned(),
        json!(format!("{base_url}/docs")),
    );
    // The registry's JSON-RPC endpoint wants a token with scope `a2a`. Naming it keeps the
    // requirement in the card as served signed, which leaves out empty lists.
    card.insert(
        "securityRequirements".to_owned(),
        json!([{"schemes": {"bearer": {"list": ["a2a"]}}}]),
    );
    Value::Object(card)
}

/// The registry's own entry in its catalogue, as a publish body would describe it: ACTIVE from
/// start-up like the hosted agents, with its A2A endpoint and its MCP endpoint (a
/// `streamable-http` remote, so `/v0.1/servers` lists it for MCP aggregators), and its own card.
pub fn registry_entry(base_url: &str) -> Result<AgentDraft, Vec<FieldError>> {
    let base_url = base_url.trim_end_matches('/');
    let card = registry_card(base_url, base_url, env!("CARGO_PKG_VERSION"));
    AgentDraft::parse(&json!({
        "package_name": REGISTRY_PACKAGE,
        "name": REGISTRY_NAME,
        "description": REGISTRY_ENTRY_DESCRIPTION,
        "version": env!("CARGO_PKG_VERSION"),
        "manifest_url": format!("{base_url}/.well-known/agent-card.json"),
        "url": format!("{base_url}/a2a/v1"),
        "remotes": [{"type": "streamable-http", "url": format!("{base_url}{}", super::mcp::ENDPOINT)}],
        "target": "Developers",
        "category": "Discovery",
        "tags": ["registry", "discovery", "search", "a2a", "mcp"],
        "capabilities": registry_capabilities(),
        // Not the card's skill examples (a bitcoin price, a weather forecast): those are what the
        // registry finds, not what it is.
        "representative_queries": [
            "find an agent that can do a task",
            "search a directory of AI agents and MCP servers",
            "resolve a package name to its agent card",
        ],
        "payment": {"model": "free"},
        "card": card,
    }))
}

/// The registry's card in its own shape, served with `?format=registry`:
/// exactly `{agent_id, name, description, capabilities: [{name, description, input_schema?}]}`.
///
/// It takes the same arguments as [`registry_card`] so that both formats are served alike;
/// the registry's own shape has no place for their URLs or versions, so they are not used.
pub fn registry_card_legacy(_site_url: &str, _base_url: &str, _version: &str) -> Value {
    json!({
        "agent_id": REGISTRY_AGENT_ID,
        "name": REGISTRY_NAME,
        "description": REGISTRY_DESCRIPTION,
        "capabilities": registry_capabilities()
    })
}

/// The A2A card of a registered agent: the card its owner published, or one built from the record.
///
/// Once the agent has been probed, the card carries its health in the registry's health
/// extension, and a mirrored agent's card its provenance in the provenance extension, unless
/// the publisher signed their card: adding to it would break their signatures, so the record
/// alone shows them then. A flagged agent's card carries the scanner's report; `worst` is its
/// worst severity when known (the index's), so a clean agent's card costs no scan.
pub fn card_of(agent: &Agent, worst: Option<crate::domain::scan::Severity>) -> Value {
    let mut card = card_of_draft(&agent.draft);
    let signed_by_publisher = card.get("signatures").is_some_and(|s| !s.is_null());
    if signed_by_publisher {
        return card;
    }
    let operated = agent.owner == crate::domain::access::SYSTEM_OWNER;
    let added = [
        agent.health.as_ref().map(health_extension),
        agent.provenance.as_ref().map(provenance_extension),
        // Only when there is something to say: a clean card is served as its publisher wrote it.
        (!operated)
            .then(|| agent.security_given(worst))
            .filter(|report| report.status == "flagged" || report.drift.is_some())
            .map(|report| security_extension(&report)),
        agent
            .shown_deprecation()
            .as_ref()
            .map(deprecation_extension),
    ];
    for extension in added.into_iter().flatten() {
        if let Some(capabilities) = card.get_mut("capabilities").and_then(Value::as_object_mut) {
            match capabilities
                .get_mut("extensions")
                .and_then(Value::as_array_mut)
            {
                Some(extensions) => extensions.push(extension),
                None => {
                    capabilities.insert("extensions".to_owned(), Value::Array(vec![extension]));
                }
            }
        }
    }
    card
}

/// The card of an agent's writable fields: the published card, or one built from them.
pub fn card_of_draft(draft: &AgentDraft) -> Value {
    if let Some(card) = &draft.card {
        return card.clone();
    }
    let mut card = agent_card(&CardInput {
        name: &draft.name,
        description: &draft.description,
        version: draft.version.as_deref().unwrap_or("1.0.0"),
        url: draft.url.as_deref(),
        documentation_url: None,
        provider: None,
        capabilities: &draft.capabilities,
        tags: &draft.tags,
        payment: draft.payment.as_ref(),
        representative_queries: &draft.representative_queries,
        extensions: Vec::new(),
    });
    // Every A2A interface the publisher listed, the first being `url`.
    if !draft.reach.interfaces.is_empty() {
        card["supportedInterfaces"] = serde_json::json!(draft.reach.interfaces);
    }
    card
}

#[cfg(test)]
mod tests {
    use super::*;

    const REQUIRED_KEYS: [&str; 8] = [
        "name",
        "description",
        "version",
        "supportedInterfaces",
        "capabilities",
        "defaultInputModes",
        "defaultOutputModes",
        "skills",
    ];

    const SITE: &str = "https://registry.example.com";
    const BASE: &str = "https://api.registry.example.com/";

    fn capabilities() -> Vec<Capability> {
        vec![
            Capability {
                name: "get_forecast".to_owned(),
                description: "Forecast for a city".to_owned(),
                input_schema: Some(
                    json!({"type": "object", "properties": {"city": {"type": "string"}}}),
                ),
            },
            Capability {
                name: "ping".to_owned(),
                description: String::new(),
                input_schema: None,
            },
        ]
    }

    fn payment() -> Payment {
        Payment::parse(&json!({
            "model": "paid", "protocols": ["x402"],
            "rails": [{"network": "base", "asset": "usdc", "protocol": "x402", "caip2": "eip155:8453"}]
        }))
        .expect("valid payment")
    }

    fn weather_card(capabilities: &[Capability], payment: Option<&Payment>) -> Value {
        let tags = vec!["forecast".to_owned(), "realtime".to_owned()];
        agent_card(&CardInput {
            name: "Weather Agent",
            description: "Forecasts and current conditions for any city.",
            version: "1.2.0",
            url: Some("https://weather.example.com/a2a/v1"),
            documentation_url: Some("https://weather.example.com/docs"),
            provider: Some(("Example Inc.", "https://example.com")),
            capabilities,
            tags: &tags,
            payment,
            representative_queries: &[],
            extensions: Vec::new(),
        })
    }

    fn assert_valid_card(card: &Value) {
        for key in REQUIRED_KEYS {
            assert!(card.get(key).is_some(), "missing {key} in {card}");
        }
        assert!(
            card["capabilities"].is_object(),
            "capabilities must be an object"
        );
        assert!(card["capabilities"]["extensions"].is_array());
        assert!(card["skills"].is_array());
        for skill in card["skills"].as_array().into_iter().flatten() {
            for key in ["id", "name", "description", "tags"] {
                assert!(skill.get(key).is_some(), "skill misses {key}");
            }
            assert_ne!(skill["description"], json!(""));
        }
        assert_eq!(
            card["securitySchemes"],
            json!({"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}})
        );
        assert!(
            card["securityRequirements"][0]["schemes"]["bearer"]["list"].is_array(),
            "{card}"
        );
    }

    #[test]
    fn the_registry_card_snapshot() {
        insta::assert_json_snapshot!(registry_card(SITE, BASE, "0.1.0"));
    }

    #[test]
    fn the_registry_card_names_its_mcp_endpoint() {
        let card = registry_card(SITE, BASE, "0.1.0");
        let mcp = card["capabilities"]["extensions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|extension| extension["params"]["transport"] == "streamable-http")
            .expect("an MCP extension");
        assert_eq!(mcp["params"]["url"], "https://api.registry.example.com/mcp");
        assert_eq!(mcp["required"], false);
    }

    #[test]
    fn the_registry_entry_lists_its_a2a_and_mcp_endpoints_and_carries_its_card() {
        let draft = registry_entry("http://registry.test/").expect("a valid entry");
        assert_eq!(draft.package_name.as_str(), REGISTRY_PACKAGE);
        assert_eq!(draft.url.as_deref(), Some("http://registry.test/a2a/v1"));
        assert_eq!(draft.reach.remotes.len(), 1);
        assert_eq!(draft.reach.remotes[0].kind, "streamable-http");
        assert_eq!(draft.reach.remotes[0].url, "http://registry.test/mcp");
        assert!(
            draft
                .representative_queries
                .iter()
                .all(|query| !query.contains("weather") && !query.contains("bitcoin")),
            "{:?}",
            draft.representative_queries
        );
        assert_eq!(
            draft.card,
            Some(registry_card(
                "http://registry.test",
                "http://registry.test",
                env!("CARGO_PKG_VERSION")
            ))
        );
    }

    #[test]
    fn the_legacy_registry_card_snapshot() {
        insta::assert_json_snapshot!(registry_card_legacy(SITE, BASE, "0.1.0"));
    }

    #[test]
    fn a_built_agent_card_snapshot() {
        insta::assert_json_snapshot!(weather_card(&capabilities(), Some(&payment())));
    }

    #[test]
    fn every_card_has_the_required_keys_and_an_object_capabilities() {
        assert_valid_card(&registry_card(
            "http://127.0.0.1:8080",
            "http://127.0.0.1:8080",
            "0.1.0",
        ));
        assert_valid_card(&weather_card(&capabilities(), Some(&payment())));
        assert_valid_card(&weather_card(&[], None));
    }

    #[test]
    fn the_legacy_card_has_exactly_the_spec_keys() {
        let legacy = registry_card_legacy(SITE, BASE, "0.1.0");
        let mut keys: Vec<&str> = legacy
            .as_object()
            .into_iter()
            .flat_map(|object| object.keys().map(String::as_str))
            .collect();
        keys.sort_unstable();
        assert_eq!(keys, ["agent_id", "capabilities", "description", "name"]);
        assert!(legacy["capabilities"].is_array());
        assert_eq!(
            legacy["capabilities"][0]["input_schema"]["properties"]["limit"]["default"],
            5
        );
        assert!(legacy["capabilities"][1].get("input_schema").is_none());
    }

    #[test]
    fn both_registry_formats_list_the_same_capabilities() {
        let card = registry_card("https://r.example", "https://r.example", "1.0.0");
        let legacy = registry_card_legacy(SITE, BASE, "0.1.0");
        let extension = &card["capabilities"]["extensions"][0];
        assert_eq!(
            extension["uri"],
            "https://r.example/extensions/registry-capabilities/v1"
        );
        assert_eq!(extension["required"], false);
        assert_eq!(extension["params"]["agent_id"], "registry");
        assert_eq!(extension["params"]["capabilities"], legacy["capabilities"]);
        let skill_ids: Vec<&Value> = card["skills"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|skill| &skill["id"])
            .collect();
        assert_eq!(
            skill_ids,
            [&json!("search_agents"), &json!("resolve_package")]
        );
        for (skill, capability) in card["skills"]
            .as_array()
            .into_iter()
            .flatten()
            .zip(registry_capabilities())
        {
            assert_eq!(skill["description"], json!(capability.description));
        }
        assert!(card.get("agent_id").is_none(), "not an AgentCard field");
        assert_eq!(extension["params"]["agent_id"], legacy["agent_id"]);
        assert_eq!(card["name"], legacy["name"]);
        assert_eq!(card["description"], legacy["description"]);
    }

    #[test]
    fn the_registry_interface_is_json_rpc_under_the_base_url() {
        let card = registry_card(
            "https://site.example/",
            "https://api.example/root/",
            "1.0.0",
        );
        assert_eq!(
            card["supportedInterfaces"],
            json!([{"url": "https://api.example/root/a2a/v1", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}])
        );
        assert_eq!(card["provider"]["url"], "https://site.example");
    }

    #[test]
    fn a_card_without_payment_or_schemas_has_no_extensions() {
        let plain = [Capability {
            name: "ping".to_owned(),
            description: "Ping".to_owned(),
            input_schema: None,
        }];
        assert_eq!(
            weather_card(&plain, None)["capabilities"]["extensions"],
            json!([])
        );
    }

    #[test]
    fn a_card_without_a_url_has_no_interfaces() {
        let card = agent_card(&CardInput {
            name: "n",
            description: "d",
            version: "0.0.0",
            url: None,
            documentation_url: None,
            provider: None,
            capabilities: &[],
            tags: &[],
            payment: None,
            representative_queries: &[],
            extensions: vec![json!({"uri": "https://example.org/ext", "required": false})],
        });
        assert_eq!(card["supportedInterfaces"], json!([]));
        assert!(card.get("provider").is_none());
        assert!(card.get("documentationUrl").is_none());
        assert_eq!(
            card["capabilities"]["extensions"][0]["uri"],
            "https://example.org/ext"
        );
    }

    #[test]
    fn skills_carry_the_agent_tags_and_fall_back_to_the_name_for_a_description() {
        let card = weather_card(&capabilities(), None);
        assert_eq!(card["skills"][0]["tags"], json!(["forecast", "realtime"]));
        assert_eq!(card["skills"][1]["description"], "ping");
    }

    #[test]
    fn a_built_card_read_back_gives_the_same_draft_fields() {
        let capabilities = capabilities();
        let payment = payment();
        let card = weather_card(&capabilities, Some(&payment));
        let draft =
            AgentDraft::parse(&json!({"package_name": "com.example.weather", "card": card}))
                .expect("a built card is a valid publish body");
        assert_eq!(draft.name, "Weather Agent");
        assert_eq!(draft.version.as_deref(), Some("1.2.0"));
        assert_eq!(
            draft.url.as_deref(),
            Some("https://weather.example.com/a2a/v1")
        );
        assert_eq!(draft.capabilities, capabilities);
        assert_eq!(draft.payment, Some(payment));
    }
}
