//! Web Reader Agent (`registry.utility.reader`): a web page as clean Markdown. The page is
//! fetched through the SSRF-guarded outbound fetcher, its main content picked by a Readability
//! port (`dom_smoothie`) and written as Markdown by `dom_query`'s serializer.

use std::sync::Arc;

use async_trait::async_trait;
use dom_smoothie::{Config as ReadabilityConfig, Readability, TextMode};
use reqwest::StatusCode;
use serde_json::{Map, Value, json};
use url::Url;

use super::{About, AgentError, HostedAgent, Output, required_str};
use crate::outbound::{Fetch, HTML_OR_TEXT, Outbound};
use crate::timestamp::Timestamp;

const EXTRACT_CONTENT: &str = "extract_content";
/// Pages above this are refused.
const MAX_PAGE_BYTES: usize = 2 * 1024 * 1024;
/// Bounds the work of content scoring on pathological pages.
const MAX_ELEMENTS: usize = 60_000;
/// Elements that are never the content, dropped before Readability scores the page.
const NEVER_CONTENT: &str =
    "script, style, noscript, template, iframe, svg, nav, [role=navigation], form, button";
/// Tags dropped when no main content is found and the whole body is converted.
const BOILERPLATE_TAGS: [&str; 14] = [
    "script", "style", "meta", "head", "nav", "header", "footer", "aside", "form", "noscript",
    "iframe", "svg", "template", "button",
];

pub struct ReaderAgent {
    outbound: Arc<Outbound>,
}

impl ReaderAgent {
    pub fn new(outbound: Arc<Outbound>) -> Self {
        Self { outbound }
    }
}

const ABOUT: About = About {
    slug: "reader",
    package_name: "registry.utility.reader",
    name: "Web Reader Agent",
    description: "Reads live web content: fetches a URL and returns its main content as cleaned Markdown. \
     A reference agent for testing agent-to-agent calls.",
    category: "Web",
    tags: &["test", "web", "reader", "markdown", "scraping"],
    text_field: "url",
};

#[async_trait]
impl HostedAgent for ReaderAgent {
    fn about(&self) -> &'static About {
        &ABOUT
    }

    fn capabilities(&self) -> Value {
        json!([
            {"name": EXTRACT_CONTENT,
             "description": "Fetch a public web page and return its readable content as Markdown: {url, title, byline?, markdown, fetched_at}.",
             "input_schema": {"type": "object",
                              "properties": {"url": {"type": "string", "format": "uri", "description": "http(s) URL of the page to read"}},
                              "required": ["url"]}}
        ])
    }

    async fn execute(
        &self,
        _capability: &str,
        input: &Map<String, Value>,
    ) -> Result<Output, AgentError> {
        let url = parse_page_url(required_str(input, "url", 2_048)?)?;
        let fetched = self
            .outbound
            .get(&Fetch::get(url.clone(), HTML_OR_TEXT, MAX_PAGE_BYTES))
            .await?;
        match fetched.status {
            status if status.is_success() => {}
            StatusCode::NOT_FOUND | StatusCode::GONE => {
                return Err(AgentError::NotFound(format!(
                    "{url} answered HTTP {}",
                    fetched.status.as_u16()
                )));
            }
            status => {
                return Err(AgentError::Upstream(format!(
                    "{url} answered HTTP {}",
                    status.as_u16()
                )));
            }
        }
        let final_url = fetched.url.clone();
        let is_plain_text = fetched.media_type == "text/plain";
        let text = fetched.text();
        let page_url = final_url.to_string();
        let page = tokio::task::spawn_blocking(move || {
            if is_plain_text {
                Page::plain(text)
            } else {
                Page::from_html(text, &page_url)
            }
        })
        .await
        .map_err(|err| AgentError::Internal(format!("page extraction failed: {err}")))?;
        let summary = format!(
            "{}: {} characters of Markdown.",
            page.title.as_deref().unwrap_or(final_url.as_str()),
            page.markdown.chars().count()
        );
        let mut data = json!({
            "url": final_url.as_str(),
            "title": page.title,
            "markdown": page.markdown,
            "fetched_at": Timestamp::now(),
        });
        for (key, value) in [
            ("byline", page.byline),
            ("excerpt", page.excerpt),
            ("site_name", page.site_name),
            ("lang", page.lang),
        ] {
            if let Some(value) = value.filter(|value| !value.trim().is_empty()) {
                data[key] = json!(value.trim());
            }
        }
        if final_url != url {
            data["requested_url"] = json!(url.as_str());
        }
        Ok(Output { data, summary })
    }
}

/// An absolute http(s) URL.
fn parse_page_url(raw: &str) -> Result<Url, AgentError> {
    let url = Url::parse(raw)
        .map_err(|err| AgentError::invalid("url", format!("must be an absolute URL ({err})")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(AgentError::invalid(
            "url",
            format!("must be an http or https URL, not {}", url.scheme()),
        ));
    }
    Ok(url)
}

/// What was read from a page.
#[derive(Debug, Default)]
struct Page {
    title: Option<String>,
    byline: Option<String>,
    excerpt: Option<String>,
    site_name: Option<String>,
    lang: Option<String>,
    markdown: String,
}

impl Page {
    fn plain(text: String) -> Self {
        Self {
            markdown: text.trim().to_owned(),
            ..Self::default()
        }
    }

    /// The main content by Readability; when none stands out, the whole body without
    /// scripts, styles, navigation and other boilerplate.
    fn from_html(html: String, url: &str) -> Self {
        let config = ReadabilityConfig {
            text_mode: TextMode::Markdown,
            max_elements_to_parse: MAX_ELEMENTS,
            ..ReadabilityConfig::default()
        };
        let document = dom_query::Document::from(html.as_str());
        document.select(NEVER_CONTENT).remove();
        let article = Readability::with_document(document, Some(url), Some(config))
            .and_then(|mut readability| readability.parse());
        match article {
            Ok(article) if !article.text_content.trim().is_empty() => Self {
                title: Some(article.title).filter(|title| !title.trim().is_empty()),
                byline: article.byline,
                excerpt: article.excerpt,
                site_name: article.site_name,
                lang: article.lang,
                markdown: article.text_content.trim().to_owned(),
            },
            _ => Self::whole_body(&html),
        }
    }

    fn whole_body(html: &str) -> Self {
        let document = dom_query::Document::from(html);
        let title = document.select("title").text().trim().to_owned();
        let body = document.select("body");
        let markdown = match body.nodes().first() {
            Some(node) => node.md(Some(&BOILERPLATE_TAGS)),
            None => document.md(Some(&BOILERPLATE_TAGS)),
        };
        Self {
            title: Some(title).filter(|title| !title.is_empty()),
            markdown: markdown.trim().to_owned(),
            ..Self::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ARTICLE: &str = r#"<!doctype html><html lang="en"><head><title>The Analytical Engine | History Today</title>
<meta name="author" content="Jane Historian">
<script>window.tracking = true;</script><style>body { color: red }</style></head>
<body><nav><a href="/">Home</a> <a href="/about">About</a></nav>
<article><h1>The Analytical Engine</h1><p class="byline">By Jane Historian</p>
<p>The Analytical Engine was a proposed digital mechanical general-purpose computer designed by
the English mathematician and computer pioneer Charles Babbage. It was first described in 1837 as
the successor to Babbage's Difference Engine, which was a design for a simpler mechanical calculator.</p>
<p>Ada Lovelace wrote the first algorithm intended to be carried out by such a machine, and she is
often regarded as the first computer programmer. Her notes on the engine include a method for
calculating a sequence of Bernoulli numbers, described in <a href="/notes">Note G</a>.</p>
<h2>Design</h2><ul><li>A store holding 1,000 numbers of 40 decimal digits</li><li>A mill for arithmetic</li></ul>
</article><footer>Copyright 2026 History Today. All rights reserved.</footer></body></html>"#;

    #[test]
    fn an_article_becomes_markdown_without_scripts_styles_or_navigation() {
        let page = Page::from_html(ARTICLE.to_owned(), "https://history.example/engine");
        assert!(
            page.markdown.contains("Analytical Engine"),
            "{}",
            page.markdown
        );
        assert!(page.markdown.contains("Bernoulli numbers"));
        assert!(
            page.markdown.contains("- A store holding"),
            "{}",
            page.markdown
        );
        assert!(!page.markdown.contains("window.tracking"));
        assert!(!page.markdown.contains("color: red"));
        assert!(!page.markdown.contains("About"), "{}", page.markdown);
        assert!(
            page.title
                .as_deref()
                .is_some_and(|title| title.starts_with("The Analytical Engine")),
            "{:?}",
            page.title
        );
        assert_eq!(page.byline.as_deref(), Some("Jane Historian"));
    }

    #[test]
    fn a_page_without_main_content_falls_back_to_its_body() {
        let page = Page::from_html(
            "<html><head><title>Tiny</title></head><body><nav>Menu</nav><p>Just this.</p></body></html>"
                .to_owned(),
            "https://tiny.example/",
        );
        assert!(page.markdown.contains("Just this."), "{}", page.markdown);
        assert!(!page.markdown.contains("Menu"), "{}", page.markdown);
        assert_eq!(page.title.as_deref(), Some("Tiny"));
    }

    #[test]
    fn only_absolute_http_urls_are_read() {
        assert!(parse_page_url("https://example.com/a").is_ok());
        for bad in [
            "example.com",
            "/relative",
            "ftp://example.com/",
            "javascript:alert(1)",
        ] {
            assert!(parse_page_url(bad).is_err(), "{bad}");
        }
    }
}
