//! Where the hosted agents and the outbound fetcher reach the outside world, and how carefully.

use clap::Args;
use url::Url;

/// Upstream origins of the hosted agents, outbound-fetching policy, and domain verification.
///
/// Each `*_API_URL` is an API's origin: the code appends the public API's own paths, so a fake
/// serving the same paths at another origin (a test server on loopback) stands in for it. These
/// origins are set by the operator, not by callers, so they are reached even when
/// `REGISTRY_OUTBOUND_ALLOW_PRIVATE` is false.
#[derive(Args, Clone, Debug)]
pub struct UpstreamConfig {
    /// Origin of the Wikipedia REST and Action APIs used by `registry.utility.wiki`.
    #[arg(
        long,
        env = "REGISTRY_WIKI_API_URL",
        default_value = "https://en.wikipedia.org"
    )]
    pub wiki_api_url: Url,

    /// Origin of the keyless crypto spot-price API (Coinbase) used by `registry.utility.finance`.
    #[arg(
        long,
        env = "REGISTRY_FINANCE_CRYPTO_API_URL",
        default_value = "https://api.coinbase.com"
    )]
    pub finance_crypto_api_url: Url,

    /// Origin of the stock chart API (Yahoo Finance) used by `registry.utility.finance`.
    #[arg(
        long,
        env = "REGISTRY_FINANCE_STOCK_API_URL",
        default_value = "https://query1.finance.yahoo.com"
    )]
    pub finance_stock_api_url: Url,

    /// Origin of the CoinGecko API, used for crypto prices instead of Coinbase when a key is set.
    #[arg(
        long,
        env = "REGISTRY_FINANCE_COINGECKO_API_URL",
        default_value = "https://api.coingecko.com"
    )]
    pub finance_coingecko_api_url: Url,

    /// CoinGecko demo API key; when set, crypto prices (with 24 h change) come from CoinGecko.
    #[arg(
        long,
        env = "REGISTRY_FINANCE_COINGECKO_API_KEY",
        hide_env_values = true
    )]
    pub finance_coingecko_api_key: Option<String>,

    /// Seconds a price stays cached (0 disables the cache).
    #[arg(long, env = "REGISTRY_FINANCE_CACHE_TTL_SECS", default_value_t = 30)]
    pub finance_cache_ttl_secs: u64,

    /// Seconds a Wikipedia search or summary stays cached (0 disables the cache).
    #[arg(long, env = "REGISTRY_WIKI_CACHE_TTL_SECS", default_value_t = 600)]
    pub wiki_cache_ttl_secs: u64,

    /// Seconds one upstream call may take in total, redirects and body included.
    #[arg(long, env = "REGISTRY_UPSTREAM_TIMEOUT_SECS", default_value_t = 15)]
    pub upstream_timeout_secs: u64,

    /// Seconds to establish a connection to an upstream.
    #[arg(
        long,
        env = "REGISTRY_UPSTREAM_CONNECT_TIMEOUT_SECS",
        default_value_t = 5
    )]
    pub upstream_connect_timeout_secs: u64,

    /// Let user-supplied URLs (the reader, card fetching, domain verification) reach private,
    /// loopback, link-local and other reserved addresses. Only for tests and closed networks.
    #[arg(long, env = "REGISTRY_OUTBOUND_ALLOW_PRIVATE", default_value_t = false, action = clap::ArgAction::Set)]
    pub outbound_allow_private: bool,

    /// Where domain verification looks for the token file; `{domain}` is replaced by the
    /// package's domain (`com.example.weather` → `example.com`).
    #[arg(
        long,
        env = "REGISTRY_VERIFY_URL_TEMPLATE",
        default_value = "https://{domain}/.well-known/agent-registry-verify.txt",
        value_parser = parse_verify_template
    )]
    pub verify_url_template: String,

    /// Also accept a DNS TXT record `agent-registry-verify=<token>` on the domain.
    #[arg(long, env = "REGISTRY_VERIFY_DNS", default_value_t = true, action = clap::ArgAction::Set)]
    pub verify_dns: bool,
}

/// A verification URL template must name `{domain}` and give an http(s) URL once it is filled.
fn parse_verify_template(template: &str) -> Result<String, String> {
    if !template.contains("{domain}") {
        return Err("must contain {domain}".to_owned());
    }
    let url = Url::parse(&template.replace("{domain}", "example.com"))
        .map_err(|err| format!("is not a URL once {{domain}} is filled in: {err}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err("must be an http or https URL".to_owned());
    }
    Ok(template.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verification_template_must_name_the_domain_and_be_an_http_url() {
        assert!(parse_verify_template("https://{domain}/.well-known/x.txt").is_ok());
        assert!(parse_verify_template("http://127.0.0.1:9000/{domain}/x.txt").is_ok());
        assert!(parse_verify_template("https://example.com/x.txt").is_err());
        assert!(parse_verify_template("ftp://{domain}/x").is_err());
        assert!(parse_verify_template("{domain}").is_err());
    }
}
