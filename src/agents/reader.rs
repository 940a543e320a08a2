//! Web Reader Agent (`registry.utility.reader`): a web page as clean Markdown.

use serde_json::{Value, json};

use super::HostedAgent;

pub struct ReaderAgent;

impl HostedAgent for ReaderAgent {
    fn slug(&self) -> &'static str {
        "reader"
    }

    fn package_name(&self) -> &'static str {
        "registry.utility.reader"
    }

    fn name(&self) -> &'static str {
        "Web Reader Agent"
    }

    fn description(&self) -> &'static str {
        "Reads live web content: fetches a URL and returns its main content as cleaned Markdown. \
         A reference agent for testing agent-to-agent calls."
    }

    fn category(&self) -> &'static str {
        "Web"
    }

    fn tags(&self) -> &'static [&'static str] {
        &["test", "web", "reader", "markdown", "scraping"]
    }

    fn capabilities(&self) -> Value {
        json!([
            {"name": "extract_content",
             "description": "Fetch a web page and return its readable content as Markdown.",
             "input_schema": {"type": "object",
                              "properties": {"url": {"type": "string", "format": "uri", "description": "URL of the page to read"}},
                              "required": ["url"]}}
        ])
    }
}
