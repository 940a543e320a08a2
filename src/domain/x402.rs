//! An agent's payment terms in x402's words: the offers (x402 "payment requirements") it makes,
//! and the filter the x402 discovery paths apply to them.
//!
//! An agent makes offers when its payment protocols include `x402`: one per rail usable with
//! x402 (bound to `x402` or to no protocol) that the rail table (`super::rails`) can name,
//! with the agent's scheme (`exact` unless it says otherwise), its `pay_to`, and its price's
//! amount on the rails of the price's asset.

use super::payment::{
    FilterError, MAX_PAY_TO_LEN, MAX_SCHEME_LEN, Payment, Rail, canonical_amount, canonical_asset,
    compare_amounts, is_address,
};
use super::rails;

/// The protocol slug of x402.
pub const PROTOCOL: &str = "x402";
/// The scheme of an agent that names none.
pub const DEFAULT_SCHEME: &str = "exact";

/// One way to pay an agent over x402.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offer<'a> {
    /// `exact` unless the agent names another scheme.
    pub scheme: &'a str,
    /// CAIP-2 network id.
    pub network: &'static str,
    /// The asset as x402 names it (the token contract on EVM chains).
    pub asset: &'static str,
    /// The payee, when the agent gave one.
    pub pay_to: Option<&'a str>,
    /// The price in the asset's smallest unit, when the agent's price is in this asset.
    pub amount: Option<&'a str>,
    /// The rail the offer comes from.
    pub rail: &'a Rail,
}

/// Whether the agent takes x402 payments at all.
pub fn accepts_x402(payment: &Payment) -> bool {
    payment
        .protocols
        .iter()
        .any(|protocol| protocol == PROTOCOL)
}

/// The agent's x402 offers, in rail order, one per network and asset. Rails the table cannot
/// name, or bound to another protocol, make none; an agent without `x402` makes none.
pub fn offers(payment: &Payment) -> Vec<Offer<'_>> {
    if !accepts_x402(payment) {
        return Vec::new();
    }
    let scheme = payment.scheme.as_deref().unwrap_or(DEFAULT_SCHEME);
    let mut offers: Vec<Offer<'_>> = Vec::new();
    for rail in &payment.rails {
        if rail
            .protocol
            .as_deref()
            .is_some_and(|bound| bound != PROTOCOL)
        {
            continue;
        }
        let Some(id) = rails::lookup(&rail.network, &rail.asset) else {
            continue;
        };
        if offers
            .iter()
            .any(|offer| offer.network == id.caip2 && offer.asset == id.x402_asset)
        {
            continue;
        }
        offers.push(Offer {
            scheme,
            network: id.caip2,
            asset: id.x402_asset,
            pay_to: payment.pay_to.as_deref(),
            amount: payment
                .price
                .as_ref()
                .filter(|price| price.asset == rail.asset)
                .map(|price| price.amount.as_str()),
            rail,
        });
    }
    offers
}

/// The discovery filter parameters as received (Bazaar spelling in the comments).
#[derive(Debug, Default, Clone)]
pub struct X402FilterInput {
    /// `network`: a CAIP-2 id or a registry network slug.
    pub network: Option<String>,
    /// `asset`: an x402 asset identifier (a token contract) or a registry asset slug.
    pub asset: Option<String>,
    /// `scheme`.
    pub scheme: Option<String>,
    /// `payTo`.
    pub pay_to: Option<String>,
    /// `maxAmount`: the highest price, in the asset's smallest unit.
    pub max_amount: Option<String>,
}

/// How a `network` value names networks.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Network {
    /// A CAIP-2 id, compared ASCII case-insensitively.
    Caip2(String),
    /// A registry network slug, lowercase.
    Slug(String),
}

/// Only agents that take x402 payments, and with any constraint, only those with an offer
/// that meets every constraint.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct X402Filter {
    network: Option<Network>,
    asset: Option<String>,
    scheme: Option<String>,
    pay_to: Option<String>,
    max_amount: Option<String>,
}

/// Longest accepted `asset` filter value.
const MAX_ASSET_FILTER_LEN: usize = 128;

fn invalid(parameter: &'static str, message: String) -> FilterError {
    FilterError { parameter, message }
}

/// The value of a parameter, `None` when absent or empty.
fn given(value: Option<&String>) -> Option<&str> {
    value.map(String::as_str).filter(|value| !value.is_empty())
}

/// `namespace:reference` as CAIP-2 spells it (the namespace's case is not enforced).
fn is_caip2(value: &str) -> bool {
    let Some((namespace, reference)) = value.split_once(':') else {
        return false;
    };
    (3..=8).contains(&namespace.len())
        && namespace
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        && (1..=32).contains(&reference.len())
        && reference
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// A network slug in either case: `[A-Za-z0-9][A-Za-z0-9-]{0,63}`.
fn is_network_slug(value: &str) -> bool {
    (1..=64).contains(&value.len())
        && value.as_bytes()[0].is_ascii_alphanumeric()
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// An asset identifier or slug: `[A-Za-z0-9][A-Za-z0-9._:-]{0,127}`.
fn is_asset_name(value: &str) -> bool {
    (1..=MAX_ASSET_FILTER_LEN).contains(&value.len())
        && value.as_bytes()[0].is_ascii_alphanumeric()
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._:-".contains(&b))
}

/// A scheme slug in either case: `[A-Za-z0-9][A-Za-z0-9_-]{0,31}`.
fn is_scheme(value: &str) -> bool {
    (1..=MAX_SCHEME_LEN).contains(&value.len())
        && value.as_bytes()[0].is_ascii_alphanumeric()
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Two payee addresses are the same when equal, or, for `0x` hex addresses (whose letter
/// case is only a checksum), equal ignoring ASCII case.
fn same_address(a: &str, b: &str) -> bool {
    let hex = |s: &str| s.starts_with("0x") || s.starts_with("0X");
    a == b || (hex(a) && hex(b) && a.eq_ignore_ascii_case(b))
}

impl X402Filter {
    /// Reads the parameters: each is one value (empty means absent); a value that cannot name
    /// what its parameter names is an error naming the parameter. Well-formed values nothing
    /// carries (an unknown CAIP-2 id) simply match nothing.
    pub fn parse(input: &X402FilterInput) -> Result<Self, FilterError> {
        let network = given(input.network.as_ref())
            .map(|value| {
                if is_caip2(value) {
                    // A known id stands for its network; an unknown one is compared as given.
                    Ok(rails::network_of(value).map_or_else(
                        || Network::Caip2(value.to_owned()),
                        |slug| Network::Slug(slug.to_owned()),
                    ))
                } else if is_network_slug(value) {
                    Ok(Network::Slug(value.to_ascii_lowercase()))
                } else {
                    Err(invalid(
                        "network",
                        format!(
                            "'{}' is neither a CAIP-2 network id (`eip155:8453`) nor a network name (`base`)",
                            super::truncate(value, 40)
                        ),
                    ))
                }
            })
            .transpose()?;
        let asset = given(input.asset.as_ref())
            .map(|value| {
                if is_asset_name(value) {
                    Ok(value.to_owned())
                } else {
                    Err(invalid(
                        "asset",
                        format!(
                            "'{}' is neither an asset identifier (a token contract such as `0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913`) nor an asset name (`usdc`): 1 to {MAX_ASSET_FILTER_LEN} of A-Z, a-z, 0-9, '.', '_', ':', '-', starting with a letter or digit",
                            super::truncate(value, 40)
                        ),
                    ))
                }
            })
            .transpose()?;
        let scheme = given(input.scheme.as_ref())
            .map(|value| {
                if is_scheme(value) {
                    Ok(value.to_ascii_lowercase())
                } else {
                    Err(invalid(
                        "scheme",
                        format!(
                            "'{}' is not a scheme such as `exact`: 1 to {MAX_SCHEME_LEN} of letters, digits, '-', '_'",
                            super::truncate(value, 40)
                        ),
                    ))
                }
            })
            .transpose()?;
        let pay_to = given(input.pay_to.as_ref())
            .map(|value| {
                if is_address(value) {
                    Ok(value.to_owned())
                } else {
                    Err(invalid(
                        "payTo",
                        format!(
                            "must be an address: 1 to {MAX_PAY_TO_LEN} printable ASCII characters without spaces"
                        ),
                    ))
                }
            })
            .transpose()?;
        let max_amount = given(input.max_amount.as_ref())
            .map(|value| {
                canonical_amount(value).ok_or_else(|| {
                    invalid(
                        "maxAmount",
                        format!(
                            "'{}' is not an amount: 1 to {} digits 0-9, in the asset's smallest unit",
                            super::truncate(value, 40),
                            super::payment::MAX_AMOUNT_DIGITS
                        ),
                    )
                })
            })
            .transpose()?;
        Ok(Self {
            network,
            asset,
            scheme,
            pay_to,
            max_amount,
        })
    }

    /// True when only the x402 protocol itself is asked for.
    pub fn is_unconstrained(&self) -> bool {
        self == &Self::default()
    }

    /// Whether an agent with these terms takes x402 payments and, with constraints, makes an
    /// offer meeting them all. An agent without payment terms never passes.
    pub fn matches(&self, payment: Option<&Payment>) -> bool {
        let Some(payment) = payment.filter(|payment| accepts_x402(payment)) else {
            return false;
        };
        self.is_unconstrained() || offers(payment).iter().any(|offer| self.admits(offer))
    }

    /// Whether one offer meets every constraint.
    pub fn admits(&self, offer: &Offer<'_>) -> bool {
        let network = self.network.as_ref().is_none_or(|network| match network {
            Network::Caip2(caip2) => offer.network.eq_ignore_ascii_case(caip2),
            Network::Slug(slug) => offer.rail.network == *slug,
        });
        let asset = self.asset.as_ref().is_none_or(|asset| {
            offer.asset.eq_ignore_ascii_case(asset) || offer.rail.asset == canonical_asset(asset)
        });
        let scheme = self
            .scheme
            .as_ref()
            .is_none_or(|scheme| offer.scheme == scheme);
        let pay_to = self.pay_to.as_ref().is_none_or(|wanted| {
            offer
                .pay_to
                .is_some_and(|pay_to| same_address(pay_to, wanted))
        });
        let price = self.max_amount.as_ref().is_none_or(|max| {
            offer
                .amount
                .is_some_and(|amount| compare_amounts(amount, max).is_le())
        });
        network && asset && scheme && pay_to && price
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn payment(value: Value) -> Payment {
        Payment::parse(&value).expect("valid payment")
    }

    fn x402_agent() -> Payment {
        payment(json!({
            "model": "paid", "protocols": ["x402", "l402"],
            "rails": ["base:usdc", "solana:usdc", {"network": "lightning", "asset": "btc", "protocol": "l402"},
                      "base:eurc", {"network": "polygon", "asset": "usdc", "protocol": "x402"}],
            "pay_to": "0x209693Bc6afc0C5328bA36FaF03C514EF312287C",
            "price": {"amount": "10000", "asset": "usdc"}
        }))
    }

    fn filter(input: X402FilterInput) -> X402Filter {
        X402Filter::parse(&input).expect("valid filter")
    }

    fn by_network(network: &str) -> X402Filter {
        filter(X402FilterInput {
            network: Some(network.to_owned()),
            ..Default::default()
        })
    }

    #[test]
    fn offers_come_from_the_x402_rails_the_table_names() {
        let agent = x402_agent();
        let found: Vec<(&str, &str, Option<&str>)> = offers(&agent)
            .iter()
            .map(|offer| (offer.network, offer.asset, offer.amount))
            .collect();
        assert_eq!(
            found,
            [
                (
                    "eip155:8453",
                    "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
                    Some("10000")
                ),
                (
                    "eip155:137",
                    "0x3c499c542cEF5E3811e1192ce70d8cC03d5c3359",
                    Some("10000")
                ),
                (
                    "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp",
                    "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v",
                    Some("10000")
                ),
            ]
        );
        assert!(offers(&agent).iter().all(|offer| offer.scheme == "exact"
            && offer.pay_to == Some("0x209693Bc6afc0C5328bA36FaF03C514EF312287C")));
    }

    #[test]
    fn an_agent_without_x402_makes_no_offers() {
        let agent =
            payment(json!({"model": "paid", "protocols": ["l402"], "rails": ["base:usdc"]}));
        assert!(offers(&agent).is_empty());
        assert!(!X402Filter::default().matches(Some(&agent)));
        assert!(!X402Filter::default().matches(None));
    }

    #[test]
    fn the_amount_is_only_offered_on_rails_of_the_price_asset() {
        let agent = payment(json!({
            "model": "paid", "protocols": ["x402"], "rails": ["base:usdc", "nano:xno"],
            "price": {"amount": "1000000000000000000000000000", "asset": "xno"}
        }));
        let amounts: Vec<Option<&str>> = offers(&agent).iter().map(|offer| offer.amount).collect();
        assert_eq!(amounts, [None, Some("1000000000000000000000000000")]);
    }

    #[test]
    fn a_named_scheme_replaces_exact() {
        let agent = payment(json!({
            "model": "paid", "protocols": ["x402"], "rails": ["base:usdc"], "scheme": "UPTO"
        }));
        assert_eq!(offers(&agent)[0].scheme, "upto");
    }

    #[test]
    fn an_x402_agent_without_nameable_rails_passes_only_the_unconstrained_filter() {
        let agent =
            payment(json!({"model": "paid", "protocols": ["x402"], "rails": ["base:eurc"]}));
        assert!(offers(&agent).is_empty());
        assert!(X402Filter::default().matches(Some(&agent)));
        assert!(!by_network("base").matches(Some(&agent)));
    }

    #[test]
    fn network_by_caip2_or_by_name() {
        let agent = x402_agent();
        for network in [
            "eip155:8453",
            "EIP155:8453",
            "base",
            "Base",
            "polygon",
            "solana",
        ] {
            assert!(by_network(network).matches(Some(&agent)), "{network}");
        }
        assert!(by_network("solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp").matches(Some(&agent)));
        for network in [
            "eip155:1",
            "ethereum",
            "eip155:999999999",
            "lightning",
            "base-sepolia",
        ] {
            assert!(!by_network(network).matches(Some(&agent)), "{network}");
        }
    }

    #[test]
    fn asset_by_contract_or_by_name() {
        let agent = x402_agent();
        let by_asset = |asset: &str| {
            filter(X402FilterInput {
                asset: Some(asset.to_owned()),
                ..Default::default()
            })
        };
        for asset in [
            "usdc",
            "USDC",
            "0x833589fcd6edb6e08f4c7c32d4f71b54bda02913",
            "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v",
        ] {
            assert!(by_asset(asset).matches(Some(&agent)), "{asset}");
        }
        // A rail the table cannot name makes no offer to match.
        for asset in ["eurc", "btc", "0x0000000000000000000000000000000000000001"] {
            assert!(!by_asset(asset).matches(Some(&agent)), "{asset}");
        }
    }

    #[test]
    fn network_and_asset_must_meet_on_one_offer() {
        let agent = payment(json!({
            "model": "paid", "protocols": ["x402"], "rails": ["base:usdc", "nano:xno"]
        }));
        let both = |network: &str, asset: &str| {
            filter(X402FilterInput {
                network: Some(network.to_owned()),
                asset: Some(asset.to_owned()),
                ..Default::default()
            })
            .matches(Some(&agent))
        };
        assert!(both("base", "usdc"));
        assert!(both("nano:mainnet", "XNO"));
        assert!(!both("base", "xno"));
    }

    #[test]
    fn pay_to_compares_hex_addresses_ignoring_case_and_others_exactly() {
        let agent = x402_agent();
        let by_pay_to = |pay_to: &str| {
            filter(X402FilterInput {
                pay_to: Some(pay_to.to_owned()),
                ..Default::default()
            })
            .matches(Some(&agent))
        };
        assert!(by_pay_to("0x209693bc6afc0c5328ba36faf03c514ef312287c"));
        assert!(!by_pay_to("0x0000000000000000000000000000000000000001"));
        assert!(same_address("nano_abc", "nano_abc"));
        assert!(!same_address("AbC", "abc"));
        let without =
            payment(json!({"model": "paid", "protocols": ["x402"], "rails": ["base:usdc"]}));
        assert!(
            !filter(X402FilterInput {
                pay_to: Some("0x1".to_owned()),
                ..Default::default()
            })
            .matches(Some(&without))
        );
    }

    #[test]
    fn max_amount_compares_integers_and_needs_a_price() {
        let agent = x402_agent();
        let at_most = |max: &str| {
            filter(X402FilterInput {
                max_amount: Some(max.to_owned()),
                ..Default::default()
            })
        };
        assert!(at_most("10000").matches(Some(&agent)));
        assert!(at_most("0010000").matches(Some(&agent)));
        assert!(at_most("99999999999999999999").matches(Some(&agent)));
        assert!(!at_most("9999").matches(Some(&agent)));
        let free_of_price =
            payment(json!({"model": "paid", "protocols": ["x402"], "rails": ["base:usdc"]}));
        assert!(!at_most("99999999999999999999").matches(Some(&free_of_price)));
    }

    #[test]
    fn scheme_is_compared_lowercase() {
        let agent = x402_agent();
        let by_scheme = |scheme: &str| {
            filter(X402FilterInput {
                scheme: Some(scheme.to_owned()),
                ..Default::default()
            })
            .matches(Some(&agent))
        };
        assert!(by_scheme("exact"));
        assert!(by_scheme("EXACT"));
        assert!(!by_scheme("upto"));
    }

    #[test]
    fn malformed_values_are_errors_naming_their_parameter() {
        let cases: [(X402FilterInput, &str); 6] = [
            (
                X402FilterInput {
                    network: Some("!!!".to_owned()),
                    ..Default::default()
                },
                "network",
            ),
            (
                X402FilterInput {
                    network: Some("eip155:".to_owned()),
                    ..Default::default()
                },
                "network",
            ),
            (
                X402FilterInput {
                    asset: Some("us dc".to_owned()),
                    ..Default::default()
                },
                "asset",
            ),
            (
                X402FilterInput {
                    scheme: Some("ex act".to_owned()),
                    ..Default::default()
                },
                "scheme",
            ),
            (
                X402FilterInput {
                    pay_to: Some("0x 1".to_owned()),
                    ..Default::default()
                },
                "payTo",
            ),
            (
                X402FilterInput {
                    max_amount: Some("0.5".to_owned()),
                    ..Default::default()
                },
                "maxAmount",
            ),
        ];
        for (input, parameter) in cases {
            let error = X402Filter::parse(&input).expect_err("malformed");
            assert_eq!(error.parameter, parameter, "{input:?}");
        }
    }

    #[test]
    fn empty_values_are_absent() {
        let parsed = filter(X402FilterInput {
            network: Some(String::new()),
            asset: Some(String::new()),
            scheme: Some(String::new()),
            pay_to: Some(String::new()),
            max_amount: Some(String::new()),
        });
        assert!(parsed.is_unconstrained());
    }
}
