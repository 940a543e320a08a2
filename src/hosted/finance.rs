//! Finance Agent (`registry.utility.finance`): the current price of a cryptocurrency (Coinbase
//! spot prices, or CoinGecko when a key is configured) or a stock (Yahoo Finance charts),
//! normalised to `{symbol, price, currency, change_24h?, as_of, source}` and cached briefly.

use std::sync::Arc;

use async_trait::async_trait;
use reqwest::StatusCode;
use reqwest::header::{HeaderName, USER_AGENT};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::cache::TtlCache;
use super::upstream::Api;
use super::{About, AgentError, HostedAgent, Output, required_str};
use crate::config::UpstreamConfig;
use crate::outbound::Outbound;
use crate::timestamp::Timestamp;

const GET_CURRENT_PRICE: &str = "get_current_price";
/// Yahoo Finance answers 429 to clients that do not look like a browser.
const BROWSER_USER_AGENT: &str = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like \
Gecko) Chrome/126.0.0.0 Safari/537.36";

pub struct FinanceAgent {
    coinbase: Api,
    coingecko: Option<(Api, String)>,
    yahoo: Api,
    cache: TtlCache<Value>,
}

impl FinanceAgent {
    pub fn new(config: &UpstreamConfig, outbound: Arc<Outbound>) -> Self {
        let coingecko = config
            .finance_coingecko_api_key
            .as_deref()
            .map(str::trim)
            .filter(|key| !key.is_empty())
            .map(|key| {
                (
                    Api::new(
                        Arc::clone(&outbound),
                        &config.finance_coingecko_api_url,
                        "CoinGecko",
                    ),
                    key.to_owned(),
                )
            });
        Self {
            coinbase: Api::new(
                Arc::clone(&outbound),
                &config.finance_crypto_api_url,
                "Coinbase",
            ),
            coingecko,
            yahoo: Api::new(outbound, &config.finance_stock_api_url, "Yahoo Finance"),
            cache: TtlCache::new(config.finance_cache_ttl_secs, 1_000),
        }
    }
}

const ABOUT: About = About {
    slug: "finance",
    package_name: "registry.utility.finance",
    name: "Finance Agent",
    description: "Real-time financial data: the current price of a cryptocurrency or a stock. A reference \
     agent for testing agent-to-agent calls.",
    category: "Finance",
    tags: &["test", "finance", "crypto", "stocks", "prices", "realtime"],
    text_field: "symbol",
};

#[async_trait]
impl HostedAgent for FinanceAgent {
    fn about(&self) -> &'static About {
        &ABOUT
    }

    fn capabilities(&self) -> Value {
        json!([
            {"name": GET_CURRENT_PRICE,
             "description": "Current price of a crypto or stock symbol: {symbol, price, currency, change_24h (percent, when known), as_of, source}.",
             "input_schema": {"type": "object",
                              "properties": {"symbol": {"type": "string", "description": "Ticker or crypto symbol, e.g. BTC or AAPL"},
                                             "market": {"type": "string", "enum": ["auto", "crypto", "stock"], "default": "auto",
                                                        "description": "Where to look; auto tries crypto, then stocks"}},
                              "required": ["symbol"]}}
        ])
    }

    async fn execute(
        &self,
        _capability: &str,
        input: &Map<String, Value>,
    ) -> Result<Output, AgentError> {
        let symbol = Symbol::parse(required_str(input, "symbol", 40)?)?;
        let market = Market::parse(input.get("market"))?;
        let key = format!("{market:?}:{}", symbol.0);
        let quote = match self.cache.get(&key) {
            Some(quote) => quote,
            None => {
                let quote = self.price(&symbol, market).await?;
                self.cache.insert(key, quote.clone());
                quote
            }
        };
        let summary = format!(
            "{} is {} {} ({}).",
            quote["symbol"].as_str().unwrap_or_default(),
            quote["price"],
            quote["currency"].as_str().unwrap_or_default(),
            quote["source"].as_str().unwrap_or_default()
        );
        Ok(Output {
            data: quote,
            summary,
        })
    }
}

/// An upper-case ticker: letters, digits and `. - ^ =`, e.g. `BTC`, `BRK.B`, `^GSPC`, `EURUSD=X`.
#[derive(Debug, Clone, PartialEq)]
struct Symbol(String);

impl Symbol {
    fn parse(raw: &str) -> Result<Self, AgentError> {
        let symbol = raw.trim().trim_start_matches('$').to_ascii_uppercase();
        let valid = !symbol.is_empty()
            && symbol.len() <= 20
            && symbol
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '^' | '='));
        if !valid {
            return Err(AgentError::invalid(
                "symbol",
                "must be a ticker or crypto symbol of at most 20 letters, digits, '.', '-', '^' \
                 or '=' (e.g. BTC, AAPL, BRK.B)",
            ));
        }
        Ok(Self(symbol))
    }

    /// The crypto base currency this symbol can name: `BTC` or `BTC-USD` → `BTC`.
    fn crypto_base(&self) -> Option<&str> {
        let base = self.0.strip_suffix("-USD").unwrap_or(&self.0);
        (base.len() <= 10 && base.chars().all(|c| c.is_ascii_alphanumeric())).then_some(base)
    }
}

/// Where to look a symbol up.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Market {
    Auto,
    Crypto,
    Stock,
}

impl Market {
    fn parse(value: Option<&Value>) -> Result<Self, AgentError> {
        match value.and_then(Value::as_str).map(str::trim) {
            None if value.is_none_or(Value::is_null) => Ok(Self::Auto),
            Some("" | "auto") => Ok(Self::Auto),
            Some("crypto") => Ok(Self::Crypto),
            Some("stock" | "stocks") => Ok(Self::Stock),
            _ => Err(AgentError::invalid(
                "market",
                "must be one of auto, crypto, stock",
            )),
        }
    }
}

impl FinanceAgent {
    async fn price(&self, symbol: &Symbol, market: Market) -> Result<Value, AgentError> {
        match (market, symbol.crypto_base()) {
            (Market::Crypto, None) => Err(not_a_crypto(symbol)),
            (Market::Crypto, Some(base)) => self.crypto(base).await,
            (Market::Stock, _) | (Market::Auto, None) => self.stock(symbol).await,
            // Crypto first, then stocks: when both fail, the error names both upstreams.
            (Market::Auto, Some(base)) => match self.crypto(base).await {
                Ok(quote) => Ok(quote),
                Err(crypto_error) => match self.stock(symbol).await {
                    Ok(quote) => Ok(quote),
                    Err(AgentError::NotFound(_))
                        if matches!(crypto_error, AgentError::NotFound(_)) =>
                    {
                        Err(AgentError::NotFound(format!(
                            "unknown symbol '{}': no cryptocurrency or stock has it",
                            symbol.0
                        )))
                    }
                    Err(stock_error) => {
                        Err(AgentError::all_failed(vec![crypto_error, stock_error]))
                    }
                },
            },
        }
    }

    async fn crypto(&self, base: &str) -> Result<Value, AgentError> {
        match &self.coingecko {
            Some((api, key)) => coingecko_price(api, key, base).await,
            None => coinbase_price(&self.coinbase, base).await,
        }
    }

    async fn stock(&self, symbol: &Symbol) -> Result<Value, AgentError> {
        yahoo_price(&self.yahoo, &symbol.0).await
    }
}

fn not_a_crypto(symbol: &Symbol) -> AgentError {
    AgentError::NotFound(format!(
        "unknown symbol '{}': not a cryptocurrency",
        symbol.0
    ))
}

/// `GET /v2/prices/{BASE}-USD/spot` → `{"data": {"amount": "…", "base", "currency"}}`.
#[derive(Deserialize)]
struct CoinbaseSpot {
    data: CoinbaseAmount,
}

#[derive(Deserialize)]
struct CoinbaseAmount {
    amount: String,
    base: String,
    currency: String,
}

async fn coinbase_price(api: &Api, base: &str) -> Result<Value, AgentError> {
    let pair = format!("{base}-USD");
    let url = api.url(&["v2", "prices", &pair, "spot"], &[])?;
    let fetched = api.get(url, &[]).await?;
    match fetched.status {
        StatusCode::OK => {}
        StatusCode::NOT_FOUND | StatusCode::BAD_REQUEST => {
            return Err(AgentError::NotFound(format!(
                "unknown symbol '{base}': Coinbase has no {base}-USD price"
            )));
        }
        _ => return Err(api.status_error(&fetched)),
    }
    let spot: CoinbaseSpot = api.parse(&fetched)?;
    let price = spot.data.amount.trim().parse::<f64>().map_err(|_| {
        AgentError::Upstream(format!(
            "Coinbase sent a price that is not a number: '{}'",
            crate::domain::truncate(&spot.data.amount, 40)
        ))
    })?;
    Ok(json!({
        "symbol": spot.data.base,
        "price": price,
        "currency": spot.data.currency,
        "as_of": Timestamp::now(),
        "source": "coinbase",
        "market": "crypto",
    }))
}

async fn coingecko_price(api: &Api, key: &str, base: &str) -> Result<Value, AgentError> {
    let symbol = base.to_ascii_lowercase();
    let url = api.url(
        &["api", "v3", "simple", "price"],
        &[
            ("symbols", &symbol),
            ("vs_currencies", "usd"),
            ("include_24hr_change", "true"),
            ("include_last_updated_at", "true"),
        ],
    )?;
    let headers = [(HeaderName::from_static("x-cg-demo-api-key"), key.to_owned())];
    let fetched = api.get(url, &headers).await?;
    if fetched.status != StatusCode::OK {
        return Err(api.status_error(&fetched));
    }
    let prices: Map<String, Value> = api.parse(&fetched)?;
    let entry = prices
        .get(&symbol)
        .or_else(|| prices.values().next())
        .ok_or_else(|| {
            AgentError::NotFound(format!(
                "unknown symbol '{base}': CoinGecko has no price for it"
            ))
        })?;
    let price = entry["usd"]
        .as_f64()
        .ok_or_else(|| AgentError::Upstream("CoinGecko sent no USD price".to_owned()))?;
    let as_of = entry["last_updated_at"]
        .as_i64()
        .and_then(Timestamp::from_unix_secs)
        .unwrap_or_else(Timestamp::now);
    let mut quote = json!({
        "symbol": base,
        "price": price,
        "currency": "USD",
        "as_of": as_of,
        "source": "coingecko",
        "market": "crypto",
    });
    if let Some(change) = entry["usd_24h_change"].as_f64() {
        quote["change_24h"] = json!(round(change, 4));
    }
    Ok(quote)
}

/// `GET /v8/finance/chart/{SYMBOL}` → `{"chart": {"result": [{"meta": {…}}], "error": null}}`.
#[derive(Deserialize)]
struct YahooChart {
    chart: YahooChartBody,
}

#[derive(Deserialize)]
struct YahooChartBody {
    #[serde(default)]
    result: Option<Vec<YahooResult>>,
    #[serde(default)]
    error: Option<YahooError>,
}

#[derive(Deserialize)]
struct YahooResult {
    meta: YahooMeta,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct YahooMeta {
    symbol: String,
    #[serde(default)]
    currency: Option<String>,
    #[serde(default)]
    regular_market_price: Option<f64>,
    #[serde(default)]
    regular_market_time: Option<i64>,
    #[serde(default)]
    chart_previous_close: Option<f64>,
    #[serde(default)]
    previous_close: Option<f64>,
    #[serde(default)]
    long_name: Option<String>,
    #[serde(default)]
    short_name: Option<String>,
    #[serde(default)]
    full_exchange_name: Option<String>,
}

#[derive(Deserialize)]
struct YahooError {
    #[serde(default)]
    code: String,
    #[serde(default)]
    description: String,
}

async fn yahoo_price(api: &Api, symbol: &str) -> Result<Value, AgentError> {
    let url = api.url(
        &["v8", "finance", "chart", symbol],
        &[("interval", "1d"), ("range", "1d")],
    )?;
    let headers = [(USER_AGENT, BROWSER_USER_AGENT.to_owned())];
    let fetched = api.get(url, &headers).await?;
    let unknown = || {
        AgentError::NotFound(format!(
            "unknown symbol '{symbol}': Yahoo Finance has no chart for it"
        ))
    };
    match fetched.status {
        StatusCode::OK => {}
        StatusCode::NOT_FOUND => return Err(unknown()),
        _ => return Err(api.status_error(&fetched)),
    }
    let chart: YahooChart = api.parse(&fetched)?;
    if let Some(error) = chart.chart.error {
        return Err(if error.code.eq_ignore_ascii_case("not found") {
            unknown()
        } else {
            AgentError::Upstream(format!(
                "Yahoo Finance refused the query: {} {}",
                error.code, error.description
            ))
        });
    }
    let meta = chart
        .chart
        .result
        .and_then(|results| results.into_iter().next())
        .map(|result| result.meta)
        .ok_or_else(unknown)?;
    let price = meta.regular_market_price.ok_or_else(|| {
        AgentError::Upstream(format!("Yahoo Finance sent no price for '{symbol}'"))
    })?;
    let as_of = meta
        .regular_market_time
        .and_then(Timestamp::from_unix_secs)
        .unwrap_or_else(Timestamp::now);
    let mut quote = json!({
        "symbol": meta.symbol,
        "price": price,
        "currency": meta.currency.unwrap_or_else(|| "USD".to_owned()),
        "as_of": as_of,
        "source": "yahoo",
        "market": "stock",
    });
    let previous = meta.chart_previous_close.or(meta.previous_close);
    if let Some(previous) = previous.filter(|previous| *previous > 0.0) {
        quote["change_24h"] = json!(round((price - previous) / previous * 100.0, 4));
    }
    if let Some(name) = meta.long_name.or(meta.short_name) {
        quote["name"] = json!(name);
    }
    if let Some(exchange) = meta.full_exchange_name {
        quote["exchange"] = json!(exchange);
    }
    Ok(quote)
}

fn round(value: f64, decimals: i32) -> f64 {
    let factor = 10f64.powi(decimals);
    (value * factor).round() / factor
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symbols_are_upper_cased_and_checked() {
        assert_eq!(Symbol::parse(" btc ").ok(), Some(Symbol("BTC".to_owned())));
        assert_eq!(Symbol::parse("$aapl").ok(), Some(Symbol("AAPL".to_owned())));
        assert_eq!(
            Symbol::parse("BRK.B").ok(),
            Some(Symbol("BRK.B".to_owned()))
        );
        for bad in ["", "BTC USD", "a/b", "<script>", &"X".repeat(21)] {
            assert!(Symbol::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn only_plain_alphanumeric_symbols_can_be_crypto() {
        let base = |raw: &str| {
            Symbol::parse(raw)
                .ok()
                .and_then(|s| s.crypto_base().map(str::to_owned))
        };
        assert_eq!(base("BTC").as_deref(), Some("BTC"));
        assert_eq!(base("eth-usd").as_deref(), Some("ETH"));
        assert_eq!(base("BRK.B"), None);
        assert_eq!(base("^GSPC"), None);
    }

    #[test]
    fn the_market_defaults_to_auto() {
        assert_eq!(Market::parse(None).ok(), Some(Market::Auto));
        assert_eq!(
            Market::parse(Some(&json!("stock"))).ok(),
            Some(Market::Stock)
        );
        assert!(Market::parse(Some(&json!("forex"))).is_err());
        assert!(Market::parse(Some(&json!(1))).is_err());
    }
}
