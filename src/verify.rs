//! Domain verification: the owner of `com.example.weather` proves control of
//! `example.com` by publishing the agent's token as a line of
//! `https://example.com/.well-known/agent-registry-verify.txt` or in a DNS TXT record
//! `agent-registry-verify=<token>`. The file is fetched through the SSRF-guarded fetcher, with no
//! redirects, a 10 s timeout and a 4 KiB cap.

use std::time::Duration;

use url::Url;

use crate::config::UpstreamConfig;
use crate::error::{ApiError, ErrorCode};
use crate::outbound::{Fetch, Outbound, TEXT};

/// The TXT record prefix, and the optional prefix of a line in the file.
pub const TXT_PREFIX: &str = "agent-registry-verify=";
const MAX_FILE_BYTES: usize = 4 * 1024;
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
const DNS_TIMEOUT: Duration = Duration::from_secs(5);

/// How a domain was verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Proof {
    WellKnownFile(String),
    DnsTxt(String),
}

impl Proof {
    /// As a namespace records it: the file's URL, or `dns:<domain>`.
    pub fn describe(&self) -> String {
        match self {
            Self::WellKnownFile(url) => url.clone(),
            Self::DnsTxt(domain) => format!("dns:{domain}"),
        }
    }
}

/// Verification failed: every check that was made, and what each found.
#[derive(Debug, thiserror::Error)]
#[error("could not verify {domain}: {}", checks.join("; "))]
pub struct VerificationFailed {
    pub domain: String,
    pub checks: Vec<String>,
}

impl From<VerificationFailed> for ApiError {
    fn from(err: VerificationFailed) -> Self {
        ApiError::new(ErrorCode::VerificationFailed, err.to_string())
    }
}

/// The URL of the token file for `domain`, from the configured template.
pub fn file_url(template: &str, domain: &str) -> Result<Url, String> {
    let text = template.replace("{domain}", domain);
    Url::parse(&text).map_err(|err| format!("the verification URL '{text}' is invalid: {err}"))
}

/// Check the file, then (when enabled) DNS, for `token` on `domain` (a package's, or a
/// namespace's).
pub async fn verify_domain(
    outbound: &Outbound,
    config: &UpstreamConfig,
    domain: &str,
    token: &str,
) -> Result<Proof, VerificationFailed> {
    let domain = domain.to_owned();
    let mut checks = Vec::new();
    match file_url(&config.verify_url_template, &domain) {
        Ok(url) => match check_file(outbound, &url, token).await {
            Ok(()) => return Ok(Proof::WellKnownFile(url.to_string())),
            Err(finding) => checks.push(format!("{url}: {finding}")),
        },
        Err(finding) => checks.push(finding),
    }
    if config.verify_dns {
        match check_txt(&domain, token).await {
            Ok(()) => return Ok(Proof::DnsTxt(domain)),
            Err(finding) => checks.push(format!("DNS TXT of {domain}: {finding}")),
        }
    }
    Err(VerificationFailed { domain, checks })
}

/// Does the file at `url` hold the token on a line of its own (or as `agent-registry-verify=`)?
async fn check_file(outbound: &Outbound, url: &Url, token: &str) -> Result<(), String> {
    let fetch = Fetch::get(url.clone(), TEXT, MAX_FILE_BYTES)
        .redirects(0)
        .timeout(FETCH_TIMEOUT);
    let fetched = outbound.get(&fetch).await.map_err(|err| err.to_string())?;
    if !fetched.status.is_success() {
        return Err(format!("answered HTTP {}", fetched.status.as_u16()));
    }
    if contains_token(&fetched.text(), token) {
        Ok(())
    } else {
        Err("the file does not contain this agent's verification token".to_owned())
    }
}

fn contains_token(text: &str, token: &str) -> bool {
    text.lines()
        .map(str::trim)
        .any(|line| line == token || line.strip_prefix(TXT_PREFIX).map(str::trim) == Some(token))
}

/// Is there a TXT record `agent-registry-verify=<token>` on `domain`?
async fn check_txt(domain: &str, token: &str) -> Result<(), String> {
    let mut builder = hickory_resolver::TokioResolver::builder_tokio()
        .map_err(|err| format!("no DNS resolver configured ({err})"))?;
    builder.options_mut().timeout = DNS_TIMEOUT;
    builder.options_mut().attempts = 1;
    let resolver = builder.build();
    let records = resolver
        .txt_lookup(format!("{domain}."))
        .await
        .map_err(|err| format!("no TXT record found ({err})"))?;
    let found = records.iter().any(|record| {
        // A long TXT record arrives as several character-strings: they are one value.
        let text: Vec<u8> = record.txt_data().iter().flatten().copied().collect();
        txt_proves(&String::from_utf8_lossy(&text), token)
    });
    if found {
        Ok(())
    } else {
        Err(format!("no record {TXT_PREFIX}<this agent's token>"))
    }
}

/// Is this TXT value `agent-registry-verify=<token>`?
fn txt_proves(value: &str, token: &str) -> bool {
    value.trim().strip_prefix(TXT_PREFIX).map(str::trim) == Some(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_txt_record_proves_the_domain_only_with_the_prefix_and_the_exact_token() {
        assert!(txt_proves("agent-registry-verify=arv_abc", "arv_abc"));
        assert!(txt_proves(" agent-registry-verify= arv_abc ", "arv_abc"));
        assert!(!txt_proves("arv_abc", "arv_abc"));
        assert!(!txt_proves("agent-registry-verify=arv_abcd", "arv_abc"));
        assert!(!txt_proves("v=spf1 -all", "arv_abc"));
    }

    #[test]
    fn the_token_counts_alone_on_a_line_or_after_the_prefix() {
        assert!(contains_token("arv_abc\n", "arv_abc"));
        assert!(contains_token("other\r\n  arv_abc  \r\n", "arv_abc"));
        assert!(contains_token("agent-registry-verify=arv_abc", "arv_abc"));
        assert!(!contains_token("arv_abcd", "arv_abc"));
        assert!(!contains_token("xarv_abc", "arv_abc"));
        assert!(!contains_token("", "arv_abc"));
    }

    #[test]
    fn the_file_url_comes_from_the_template() {
        let url = file_url(
            "https://{domain}/.well-known/agent-registry-verify.txt",
            "example.com",
        )
        .expect("valid");
        assert_eq!(
            url.as_str(),
            "https://example.com/.well-known/agent-registry-verify.txt"
        );
        assert!(file_url("not a url {domain}", "example.com").is_err());
    }
}
