//! The rail table: each rail (`network:asset`) this registry can name in another system's terms,
//! with the CAIP-2 id of its network and the identifier x402 uses for its asset (on EVM chains
//! the token contract, on Solana the mint, elsewhere the ticker the chain's x402 scheme names).
//!
//! One table serves two purposes: the CAIP-2 ids the payment parser and the `payment_rail`
//! filter accept as network names, and the `accepts` entries of the x402 discovery paths.
//! docs/payments.md prints it with the sources of each row.

/// One row of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RailId {
    /// The registry's network slug, e.g. `base`.
    pub network: &'static str,
    /// The registry's asset slug, e.g. `usdc`.
    pub asset: &'static str,
    /// The network's CAIP-2 id, e.g. `eip155:8453`.
    pub caip2: &'static str,
    /// The asset as x402 names it in payment requirements.
    pub x402_asset: &'static str,
}

const fn row(
    network: &'static str,
    asset: &'static str,
    caip2: &'static str,
    x402_asset: &'static str,
) -> RailId {
    RailId {
        network,
        asset,
        caip2,
        x402_asset,
    }
}

/// Solana mainnet: `solana:` and the first 32 characters of its genesis hash.
const SOLANA: &str = "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp";
/// Solana devnet.
const SOLANA_DEVNET: &str = "solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1";

/// Every rail the registry can name in CAIP-2 and x402 terms, sorted by network then asset.
/// Rows of one network share its CAIP-2 id; a CAIP-2 id names exactly one network.
pub const RAIL_IDS: &[RailId] = &[
    row(
        "arbitrum",
        "usdc",
        "eip155:42161",
        "0xaf88d065e77c8cC2239327C5EDb3A432268e5831",
    ),
    row(
        "arbitrum-sepolia",
        "usdc",
        "eip155:421614",
        "0x75faf114eafb1BDbe2F0316DF893fd58CE46AA4d",
    ),
    row(
        "avalanche",
        "usdc",
        "eip155:43114",
        "0xB97EF9Ef8734C71904D8002F8b6Bc66Dd9c48a6E",
    ),
    row(
        "base",
        "usdc",
        "eip155:8453",
        "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
    ),
    row(
        "base-sepolia",
        "usdc",
        "eip155:84532",
        "0x036CbD53842c5426634e7929541eC2318f3dCF7e",
    ),
    row(
        "bitcoin",
        "btc",
        "bip122:000000000019d6689c085ae165831e93",
        "BTC",
    ),
    row(
        "ethereum",
        "usdc",
        "eip155:1",
        "0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48",
    ),
    row("nano", "xno", "nano:mainnet", "XNO"),
    row(
        "optimism",
        "usdc",
        "eip155:10",
        "0x0b2C639c533813f4Aa9D7837CAf62653d097Ff85",
    ),
    row(
        "polygon",
        "usdc",
        "eip155:137",
        "0x3c499c542cEF5E3811e1192ce70d8cC03d5c3359",
    ),
    row(
        "polygon",
        "usdc.e",
        "eip155:137",
        "0x2791Bca1f2de4661ED88A30C99A7a9449Aa84174",
    ),
    row(
        "solana",
        "usdc",
        SOLANA,
        "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v",
    ),
    row(
        "solana-devnet",
        "usdc",
        SOLANA_DEVNET,
        "4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU",
    ),
];

/// The row of the rail `network:asset` (canonical slugs), if the table has one.
pub fn lookup(network: &str, asset: &str) -> Option<&'static RailId> {
    RAIL_IDS
        .iter()
        .find(|id| id.network == network && id.asset == asset)
}

/// The network slug a CAIP-2 id names, ASCII case ignored (values reach the parser lowercased,
/// while a Solana id is mixed case).
pub fn network_of(caip2: &str) -> Option<&'static str> {
    RAIL_IDS
        .iter()
        .find(|id| id.caip2.eq_ignore_ascii_case(caip2))
        .map(|id| id.network)
}

/// The CAIP-2 id of a network slug.
pub fn caip2_of(network: &str) -> Option<&'static str> {
    RAIL_IDS
        .iter()
        .find(|id| id.network == network)
        .map(|id| id.caip2)
}

/// Every known CAIP-2 id once, in table order.
pub fn known_caip2() -> Vec<&'static str> {
    let mut ids: Vec<&'static str> = Vec::new();
    for id in RAIL_IDS {
        if !ids.contains(&id.caip2) {
            ids.push(id.caip2);
        }
    }
    ids
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rails_named_in_the_docs_map_to_their_caip2_network_and_x402_asset() {
        let base = lookup("base", "usdc").expect("base:usdc");
        assert_eq!(base.caip2, "eip155:8453");
        assert_eq!(
            base.x402_asset,
            "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"
        );
        let solana = lookup("solana", "usdc").expect("solana:usdc");
        assert_eq!(solana.caip2, "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp");
        assert_eq!(
            solana.x402_asset,
            "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v"
        );
        assert_eq!(lookup("nano", "xno").map(|id| id.x402_asset), Some("XNO"));
        assert_eq!(lookup("base", "eurc"), None);
        assert_eq!(lookup("lightning", "btc"), None);
    }

    #[test]
    fn usdc_is_listed_on_the_main_evm_networks_and_solana() {
        for network in [
            "base",
            "base-sepolia",
            "ethereum",
            "polygon",
            "arbitrum",
            "optimism",
            "avalanche",
            "solana",
        ] {
            assert!(lookup(network, "usdc").is_some(), "{network}:usdc");
        }
    }

    #[test]
    fn rows_are_sorted_and_unique() {
        let keys: Vec<(&str, &str)> = RAIL_IDS.iter().map(|id| (id.network, id.asset)).collect();
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(keys, sorted);
    }

    #[test]
    fn a_caip2_id_names_one_network_and_a_network_has_one_caip2_id() {
        for id in RAIL_IDS {
            assert_eq!(network_of(id.caip2), Some(id.network), "{}", id.caip2);
            assert_eq!(caip2_of(id.network), Some(id.caip2), "{}", id.network);
        }
    }

    #[test]
    fn caip2_ids_are_well_formed() {
        for caip2 in known_caip2() {
            let (namespace, reference) = caip2.split_once(':').expect("namespace:reference");
            assert!(
                (3..=8).contains(&namespace.len())
                    && namespace
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
                "{caip2}"
            );
            assert!(
                (1..=32).contains(&reference.len())
                    && reference
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
                "{caip2}"
            );
        }
    }

    #[test]
    fn evm_assets_are_contract_addresses_of_their_chain() {
        for id in RAIL_IDS.iter().filter(|id| id.caip2.starts_with("eip155:")) {
            let hex = id.x402_asset.strip_prefix("0x").expect("0x address");
            assert_eq!(hex.len(), 40, "{}", id.x402_asset);
            assert!(
                hex.chars().all(|c| c.is_ascii_hexdigit()),
                "{}",
                id.x402_asset
            );
        }
    }

    #[test]
    fn caip2_ids_are_read_case_insensitively() {
        assert_eq!(
            network_of("solana:5eykt4usfv8p8njdtrepy1vzqkqzkvdp"),
            Some("solana")
        );
        assert_eq!(network_of("EIP155:8453"), Some("base"));
        assert_eq!(network_of("eip155:999999999"), None);
    }
}
