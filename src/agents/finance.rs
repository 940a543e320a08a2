//! Finance Agent (`registry.utility.finance`): current crypto and stock prices.

use serde_json::{Value, json};

use super::HostedAgent;

pub struct FinanceAgent;

impl HostedAgent for FinanceAgent {
    fn slug(&self) -> &'static str {
        "finance"
    }

    fn package_name(&self) -> &'static str {
        "registry.utility.finance"
    }

    fn name(&self) -> &'static str {
        "Finance Agent"
    }

    fn description(&self) -> &'static str {
        "Real-time financial data: the current price of a cryptocurrency or a stock. A reference \
         agent for testing agent-to-agent calls."
    }

    fn category(&self) -> &'static str {
        "Finance"
    }

    fn tags(&self) -> &'static [&'static str] {
        &["test", "finance", "crypto", "stocks", "prices", "realtime"]
    }

    fn capabilities(&self) -> Value {
        json!([
            {"name": "get_current_price",
             "description": "Current price of a crypto or stock symbol, in USD.",
             "input_schema": {"type": "object",
                              "properties": {"symbol": {"type": "string", "description": "Ticker or crypto symbol, e.g. BTC or AAPL"}},
                              "required": ["symbol"]}}
        ])
    }
}
