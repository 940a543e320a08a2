//! The page shell and the one escaping function every server-rendered value goes through.

use axum::http::{HeaderMap, HeaderValue, header};

/// Which top-level section a page belongs to, for `aria-current` in the navigation.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Nav {
    Search,
    Playground,
    Console,
    None,
}

/// One page: its `<title>`, its section, its script module (under `/assets/`) and its `<main>`.
pub struct Page<'a> {
    pub title: &'a str,
    pub nav: Nav,
    pub script: &'static str,
    /// Already-escaped HTML.
    pub body: String,
}

impl Page<'_> {
    pub fn render(&self) -> String {
        let link = |nav: Nav, href: &str, label: &str| {
            let current = if nav == self.nav {
                " aria-current=\"page\""
            } else {
                ""
            };
            format!("<li><a href=\"{href}\"{current}>{label}</a></li>")
        };
        let nav = [
            link(Nav::Search, "/", "Search"),
            link(Nav::Playground, "/playground", "Playground"),
            link(Nav::Console, "/console", "Console"),
            "<li><a href=\"/docs\">API</a></li>".to_owned(),
        ]
        .concat();
        render(
            LAYOUT,
            &[("title", self.title), ("script", self.script)],
            &[("nav", &nav), ("main", &self.body)],
        )
    }
}

const LAYOUT: &str = include_str!("assets/layout.html");

/// `body` (trusted page markup) with its `{{{token_panel}}}` replaced by the form where a
/// visitor keeps the API token this page needs: `scope` is named in its hint, `shared_with` is
/// the other page that reads the same stored token.
pub fn with_token_panel(body: &str, scope: &str, shared_with: &str) -> String {
    let panel = fill(
        include_str!("assets/token-panel.html"),
        &[("scope", scope), ("shared_with", shared_with)],
    );
    render(body, &[], &[("token_panel", &panel)])
}

/// `template` with each `{{key}}` replaced by its value, HTML-escaped.
pub fn fill(template: &str, values: &[(&str, &str)]) -> String {
    render(template, values, &[])
}

/// One pass over `template`: `{{key}}` takes an escaped value from `text`, `{{{key}}}` trusted
/// markup from `markup`. Inserted text is never scanned again, so a value that looks like a
/// placeholder stays literal. Unknown placeholders are kept as they are.
fn render(template: &str, text: &[(&str, &str)], markup: &[(&str, &str)]) -> String {
    let lookup = |table: &[(&str, &str)], key: &str| {
        table
            .iter()
            .find(|(name, _)| *name == key)
            .map(|(_, value)| value.to_string())
    };
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(at) = rest.find("{{") {
        out.push_str(&rest[..at]);
        let after = &rest[at..];
        let (open, close) = if after.starts_with("{{{") {
            ("{{{", "}}}")
        } else {
            ("{{", "}}")
        };
        let Some(end) = after[open.len()..].find(close) else {
            out.push_str(after);
            return out;
        };
        let key = &after[open.len()..open.len() + end];
        let replacement = if open == "{{{" {
            lookup(markup, key)
        } else {
            lookup(text, key).map(|value| escape(&value))
        };
        let whole = &after[..open.len() + end + close.len()];
        out.push_str(replacement.as_deref().unwrap_or(whole));
        rest = &after[whole.len()..];
    }
    out.push_str(rest);
    out
}

/// Escape text for an HTML text node or a quoted attribute value.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Headers that keep injected markup inert even if escaping were ever missed: only this
/// origin's scripts and styles run, nothing frames the page, responses are not sniffed.
pub fn secure(headers: &mut HeaderMap) {
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
             connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; \
             frame-ancestors 'none'",
        ),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_neutralises_markup_and_attribute_breakouts() {
        assert_eq!(
            escape(r#"<script>alert("x")</script> & 'y'"#),
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;y&#39;"
        );
    }

    #[test]
    fn fill_escapes_values_and_leaves_unknown_slots() {
        let filled = fill("<h1>{{name}}</h1>{{{main}}} {{other}}", &[("name", "<b>")]);
        assert_eq!(filled, "<h1>&lt;b&gt;</h1>{{{main}}} {{other}}");
        assert_eq!(fill("a {{ b", &[]), "a {{ b");
    }

    #[test]
    fn a_value_cannot_inject_a_placeholder() {
        let filled = render(
            "{{a}} {{b}} {{{m}}}",
            &[("a", "{{b}} {{{m}}}"), ("b", "<x>")],
            &[("m", "<hr>")],
        );
        assert_eq!(filled, "{{b}} {{{m}}} &lt;x&gt; <hr>");
    }

    #[test]
    fn a_page_title_cannot_pull_in_the_navigation() {
        let page = Page {
            title: "{{{nav}}}",
            nav: Nav::Search,
            script: "search.js",
            body: String::new(),
        };
        let html = page.render();
        assert!(
            html.contains("<title>{{{nav}}} · Agent Registry</title>"),
            "{html}"
        );
        assert_eq!(html.matches("aria-current").count(), 1);
    }
}
