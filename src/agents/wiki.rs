//! Wikipedia Agent (`registry.utility.wiki`): grounded facts from the encyclopedia.

use serde_json::{Value, json};

use super::HostedAgent;

pub struct WikiAgent;

impl HostedAgent for WikiAgent {
    fn slug(&self) -> &'static str {
        "wiki"
    }

    fn package_name(&self) -> &'static str {
        "registry.utility.wiki"
    }

    fn name(&self) -> &'static str {
        "Wikipedia Agent"
    }

    fn description(&self) -> &'static str {
        "Grounded facts from an encyclopedia: searches Wikipedia pages and returns article \
         summaries. A reference agent for testing agent-to-agent calls."
    }

    fn category(&self) -> &'static str {
        "Knowledge"
    }

    fn tags(&self) -> &'static [&'static str] {
        &[
            "test",
            "wikipedia",
            "encyclopedia",
            "knowledge",
            "facts",
            "search",
        ]
    }

    fn capabilities(&self) -> Value {
        json!([
            {"name": "search_page",
             "description": "Search Wikipedia pages by title or free text.",
             "input_schema": {"type": "object",
                              "properties": {"query": {"type": "string", "description": "Article title or search text"},
                                             "limit": {"type": "integer", "minimum": 1, "maximum": 10, "default": 5}},
                              "required": ["query"]}},
            {"name": "get_summary",
             "description": "Summary of one Wikipedia article by page id or title.",
             "input_schema": {"type": "object",
                              "properties": {"page_id": {"type": "string", "description": "Page id or title"}},
                              "required": ["page_id"]}}
        ])
    }
}
