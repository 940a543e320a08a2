//! Payment terms of an agent: the canonical stored shape, its parser, and the filter.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

use super::FieldError;

/// Most protocols one agent may list.
const MAX_PROTOCOLS: usize = 16;
/// Most rails one agent may list.
const MAX_RAILS: usize = 32;
/// Longest accepted `pay_to` (addresses run to 66 characters: a Lightning node key, a Nano account).
pub const MAX_PAY_TO_LEN: usize = 128;
/// Most digits of a price `amount` (a 256-bit unsigned integer has at most 78).
pub const MAX_AMOUNT_DIGITS: usize = 78;
/// Longest accepted `scheme` slug.
pub const MAX_SCHEME_LEN: usize = 32;
/// Longest accepted `caip2` value (a CAIP-2 id is at most 41 characters; leave room).
const MAX_CAIP2_LEN: usize = 128;

/// Network aliases are the CAIP-2 ids of the rail table (`super::rails`), applied on write and
/// to `net:asset` filter terms, ASCII case ignored.
fn network_alias(value: &str) -> Option<&'static str> {
    super::rails::network_of(value)
}

/// Asset aliases, applied on write and on the filter side.
const ASSET_ALIASES: &[(&str, &str)] = &[
    ("usdce", "usdc.e"),
    ("usdc_e", "usdc.e"),
    ("usdc-e", "usdc.e"),
    ("usd₮", "usdt"),
    ("usd₮0", "usdt0"),
    ("sat", "btc"),
    ("sats", "btc"),
    ("msat", "btc"),
];

/// Protocol aliases, applied on write and on the filter side.
const PROTOCOL_ALIASES: &[(&str, &str)] = &[("lsat", "l402"), ("bolt11", "lightning-invoice")];

/// How an agent charges for its work.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum PaymentModel {
    /// No charge.
    Free,
    /// Every call is paid.
    Paid,
    /// Some calls are free, others paid.
    Freemium,
}

impl PaymentModel {
    /// Every model, in the order error messages list them.
    pub const ALL: [Self; 3] = [Self::Free, Self::Paid, Self::Freemium];

    /// The canonical lowercase spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Free => "free",
            Self::Paid => "paid",
            Self::Freemium => "freemium",
        }
    }

    /// Parses the canonical lowercase spelling.
    pub fn parse(value: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|model| model.as_str() == value)
    }
}

/// Which way money flows for an agent.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// The agent is paid by its callers.
    Inbound,
    /// The agent pays others.
    Outbound,
    /// Both ways.
    Both,
}

impl Direction {
    /// Every direction, in the order error messages list them.
    pub const ALL: [Self; 3] = [Self::Inbound, Self::Outbound, Self::Both];

    /// The canonical lowercase spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Inbound => "inbound",
            Self::Outbound => "outbound",
            Self::Both => "both",
        }
    }

    /// Parses the canonical lowercase spelling.
    pub fn parse(value: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|direction| direction.as_str() == value)
    }

    /// Whether an agent with this direction satisfies the filter token `wanted`:
    /// `inbound` and `outbound` are sets, `both` their union, and `both` is only met by `both`.
    pub fn covers(self, wanted: Self) -> bool {
        match wanted {
            Self::Inbound => self != Self::Outbound,
            Self::Outbound => self != Self::Inbound,
            Self::Both => self == Self::Both,
        }
    }
}

/// One way an agent can be paid: a network and an asset on it, optionally bound to a protocol.
///
/// Field order matters: the derived ordering is the canonical sort (network, asset, protocol, caip2).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ToSchema)]
pub struct Rail {
    /// Lowercase network slug, e.g. `base`, `nano`, `lightning`.
    #[schema(example = "base")]
    pub network: String,
    /// Lowercase asset slug, e.g. `usdc`, `xno`, `btc`.
    #[schema(example = "usdc")]
    pub asset: String,
    /// The agent protocol this rail is used with; always one of the agent's `protocols`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = "x402")]
    pub protocol: Option<String>,
    /// CAIP-2 chain id, stored verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = "eip155:8453")]
    pub caip2: Option<String>,
}

/// The payment terms of an agent, always canonical: lowercase, deduplicated, sorted.
///
/// Build one with [`Payment::parse`]; deserializing is only for reading back stored canonical JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Payment {
    /// `free`, `paid` or `freemium`.
    pub model: PaymentModel,
    /// `inbound`, `outbound` or `both`; absent only for `free` agents that did not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direction: Option<Direction>,
    /// Lowercase protocol slugs, e.g. `x402`, `l402`, `lightning-invoice`, sorted.
    #[serde(default)]
    pub protocols: Vec<String>,
    /// Accepted rails, sorted by (network, asset, protocol, caip2).
    #[serde(default)]
    pub rails: Vec<Rail>,
    /// The x402 payment scheme of the agent's x402 rails, lowercase; absent means `exact`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = "exact")]
    pub scheme: Option<String>,
    /// Where payments go: the payee's address (or account) as its network writes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = "0x209693Bc6afc0C5328bA36FaF03C514EF312287C")]
    pub pay_to: Option<String>,
    /// The price of one call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price: Option<Price>,
}

/// A price: an amount of one asset, in that asset's smallest unit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Price {
    /// A non-negative integer as a decimal string without leading zeros, in the asset's
    /// smallest unit (USDC has 6 decimals: `"10000"` is 0.01 USDC), as x402 writes amounts.
    #[schema(example = "10000")]
    pub amount: String,
    /// The asset slug, one of the assets of the agent's rails when it lists any.
    #[schema(example = "usdc")]
    pub asset: String,
}

impl Payment {
    /// The terms of a free agent with no protocols or rails.
    pub fn free() -> Self {
        Self {
            model: PaymentModel::Free,
            direction: None,
            protocols: Vec::new(),
            rails: Vec::new(),
            scheme: None,
            pay_to: None,
            price: None,
        }
    }

    /// Parses a `payment` object from a request body, reporting every bad field.
    ///
    /// Field names in errors look like `payment.model` or `payment.rails[2].asset`.
    pub fn parse(value: &Value) -> Result<Self, Vec<FieldError>> {
        let Some(object) = value.as_object() else {
            return Err(vec![FieldError::new(
                "payment",
                "must be an object with at least a `model`",
            )]);
        };
        let mut errors = Vec::new();
        let model = parse_model(present(object, "model"), &mut errors);
        let direction = parse_direction(present(object, "direction"), &mut errors);
        let protocols = parse_protocols(present(object, "protocols"), &mut errors);
        let before_rails = errors.len();
        let rails = parse_rails(present(object, "rails"), protocols.as_ref(), &mut errors);
        // A price is checked against the rails only when they could all be read.
        let known_rails = (errors.len() == before_rails).then_some(&rails);
        let direction = default_direction(model, direction, &mut errors);
        let scheme = parse_scheme(present(object, "scheme"), &mut errors);
        let pay_to = parse_pay_to(present(object, "pay_to"), &mut errors);
        let price = parse_price(present(object, "price"), known_rails, &mut errors);
        match model {
            Some(model) if errors.is_empty() => Ok(Self {
                model,
                direction,
                protocols: protocols.unwrap_or_default().into_iter().collect(),
                rails: rails.into_iter().collect(),
                scheme,
                pay_to,
                price,
            }),
            _ => Err(errors),
        }
    }
}

/// The canonical slug of an asset named by a filter: lowercase, aliases applied.
pub fn canonical_asset(value: &str) -> String {
    apply_alias(ASSET_ALIASES, &clean(value))
}

/// Reads an amount written as ASCII digits: leading zeros dropped; `None` unless it is 1 to
/// [`MAX_AMOUNT_DIGITS`] digits.
pub fn canonical_amount(raw: &str) -> Option<String> {
    if raw.is_empty() || raw.len() > MAX_AMOUNT_DIGITS || !raw.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let trimmed = raw.trim_start_matches('0');
    Some(if trimmed.is_empty() { "0" } else { trimmed }.to_owned())
}

/// Compares two canonical amounts as the integers they write.
pub fn compare_amounts(a: &str, b: &str) -> std::cmp::Ordering {
    a.len().cmp(&b.len()).then_with(|| a.cmp(b))
}

fn parse_scheme(value: Option<&Value>, errors: &mut Vec<FieldError>) -> Option<String> {
    let field = "payment.scheme";
    let Some(raw) = value?.as_str() else {
        errors.push(FieldError::new(field, "must be a string"));
        return None;
    };
    let scheme = clean(raw);
    if is_slug(&scheme, MAX_SCHEME_LEN, &['-', '_']) {
        return Some(scheme);
    }
    errors.push(FieldError::new(
        field,
        format!(
            "'{}' is not an x402 scheme such as `exact`: 1-{MAX_SCHEME_LEN} of a-z, 0-9, '-', '_', starting with a letter or digit",
            shown(&scheme)
        ),
    ));
    None
}

/// Whether `value` could be an address: 1 to [`MAX_PAY_TO_LEN`] printable ASCII characters,
/// no spaces.
pub fn is_address(value: &str) -> bool {
    (1..=MAX_PAY_TO_LEN).contains(&value.len()) && value.bytes().all(|b| b.is_ascii_graphic())
}

fn parse_pay_to(value: Option<&Value>, errors: &mut Vec<FieldError>) -> Option<String> {
    let field = "payment.pay_to";
    let Some(raw) = value?.as_str() else {
        errors.push(FieldError::new(field, "must be a string"));
        return None;
    };
    let address = raw.trim();
    if is_address(address) {
        return Some(address.to_owned());
    }
    errors.push(FieldError::new(
        field,
        format!(
            "must be the payee's address: 1 to {MAX_PAY_TO_LEN} printable ASCII characters without spaces"
        ),
    ));
    None
}

/// `{amount, asset}`: each field's error reported on its own.
fn parse_price(
    value: Option<&Value>,
    rails: Option<&BTreeSet<Rail>>,
    errors: &mut Vec<FieldError>,
) -> Option<Price> {
    let field = "payment.price";
    let Some(object) = value?.as_object() else {
        errors.push(FieldError::new(
            field,
            "must be an object {amount, asset}: an amount in the asset's smallest unit",
        ));
        return None;
    };
    let amount = parse_amount(present(object, "amount"), errors);
    let asset = required_slug(object, "asset", field, normalise_asset, errors);
    let asset = asset.and_then(|asset| {
        let Some(rails) = rails.filter(|rails| !rails.is_empty()) else {
            return Some(asset);
        };
        if rails.iter().any(|rail| rail.asset == asset) {
            return Some(asset);
        }
        let listed: BTreeSet<&str> = rails.iter().map(|rail| rail.asset.as_str()).collect();
        errors.push(FieldError::new(
            format!("{field}.asset"),
            format!(
                "'{asset}' is not the asset of any of payment.rails ({})",
                listed.into_iter().collect::<Vec<_>>().join(", ")
            ),
        ));
        None
    });
    Some(Price {
        amount: amount?,
        asset: asset?,
    })
}

/// A price amount: a string of digits (or a JSON integer), leading zeros dropped.
fn parse_amount(value: Option<&Value>, errors: &mut Vec<FieldError>) -> Option<String> {
    let field = "payment.price.amount";
    let parsed = match value {
        None => Err("is required".to_owned()),
        Some(Value::String(raw)) => canonical_amount(raw.trim()).ok_or_else(|| {
            format!(
                "'{}' is not an amount: 1 to {MAX_AMOUNT_DIGITS} digits 0-9, in the asset's smallest unit (no sign, decimal point or exponent)",
                shown(raw.trim())
            )
        }),
        // `10000.0` is an integer to JSON Schema, and read as one here.
        Some(Value::Number(number)) => number
            .as_u64()
            .or_else(|| {
                number
                    .as_f64()
                    .filter(|f| *f >= 0.0 && f.fract() == 0.0 && *f < 18_446_744_073_709_551_616.0)
                    .map(|f| f as u64)
            })
            .map(|n| n.to_string())
            .ok_or_else(|| {
                "must be a non-negative integer below 2^64; write larger amounts as a string of digits"
                    .to_owned()
            }),
        Some(_) => Err("must be a string of digits".to_owned()),
    };
    parsed
        .map_err(|message| errors.push(FieldError::new(field, message)))
        .ok()
}

/// The value under `key`, treating JSON `null` as absent.
fn present<'a>(object: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    object.get(key).filter(|value| !value.is_null())
}

/// Trims and ASCII-lowercases a user-supplied slug.
fn clean(raw: &str) -> String {
    raw.trim().to_ascii_lowercase()
}

/// Looks `value` up in an alias table.
fn alias_of(table: &[(&str, &'static str)], value: &str) -> Option<&'static str> {
    table
        .iter()
        .find(|(alias, _)| *alias == value)
        .map(|(_, canonical)| *canonical)
}

/// Applies an alias table, keeping `value` when it is no alias.
fn apply_alias(table: &[(&str, &'static str)], value: &str) -> String {
    alias_of(table, value).unwrap_or(value).to_owned()
}

/// `^[a-z0-9][rest]{0,max-1}$` where `rest` are the extra characters allowed after the first.
fn is_slug(value: &str, max_len: usize, rest: &[char]) -> bool {
    let mut chars = value.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    first_ok
        && value.len() <= max_len
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || rest.contains(&c))
}

/// A user-supplied value quoted in an error message, cut to 40 characters.
fn shown(value: &str) -> String {
    const MAX_CHARS: usize = 40;
    if value.chars().count() <= MAX_CHARS {
        return value.to_owned();
    }
    let head: String = value.chars().take(MAX_CHARS).collect();
    format!("{head}…")
}

/// Comma-separated canonical spellings, for error messages.
fn allowed<T: Copy>(all: &[T], as_str: fn(T) -> &'static str) -> String {
    all.iter()
        .map(|item| as_str(*item))
        .collect::<Vec<_>>()
        .join(", ")
}

fn parse_model(value: Option<&Value>, errors: &mut Vec<FieldError>) -> Option<PaymentModel> {
    let field = "payment.model";
    let allowed = allowed(&PaymentModel::ALL, PaymentModel::as_str);
    let Some(value) = value else {
        errors.push(FieldError::new(
            field,
            format!("is required: one of {allowed}"),
        ));
        return None;
    };
    let model = value
        .as_str()
        .and_then(|raw| PaymentModel::parse(&clean(raw)));
    if model.is_none() {
        errors.push(FieldError::new(field, format!("must be one of {allowed}")));
    }
    model
}

fn parse_direction(value: Option<&Value>, errors: &mut Vec<FieldError>) -> Option<Direction> {
    let direction = value?
        .as_str()
        .and_then(|raw| Direction::parse(&clean(raw)));
    if direction.is_none() {
        let allowed = allowed(&Direction::ALL, Direction::as_str);
        errors.push(FieldError::new(
            "payment.direction",
            format!("must be one of {allowed}"),
        ));
    }
    direction
}

/// Applies the default direction and rejects paid/freemium agents that only pay out.
fn default_direction(
    model: Option<PaymentModel>,
    direction: Option<Direction>,
    errors: &mut Vec<FieldError>,
) -> Option<Direction> {
    match (model, direction) {
        (Some(PaymentModel::Paid | PaymentModel::Freemium), Some(Direction::Outbound)) => {
            errors.push(FieldError::new(
                "payment.direction",
                "a paid or freemium agent is paid by its callers: direction must be inbound or both",
            ));
            direction
        }
        (Some(PaymentModel::Paid | PaymentModel::Freemium), None) => Some(Direction::Inbound),
        _ => direction,
    }
}

/// Normalises one protocol slug: trim, lowercase, alias, validate.
fn normalise_protocol(raw: &str) -> Result<String, String> {
    let protocol = apply_alias(PROTOCOL_ALIASES, &clean(raw));
    if is_slug(&protocol, 32, &['.', '-']) {
        Ok(protocol)
    } else {
        Err(format!(
            "'{}' is not a protocol slug: 1-32 of a-z, 0-9, '.', '-', starting with a letter or digit",
            shown(&protocol)
        ))
    }
}

/// The canonical protocol set, or `None` when the field had an error.
fn parse_protocols(
    value: Option<&Value>,
    errors: &mut Vec<FieldError>,
) -> Option<BTreeSet<String>> {
    let field = "payment.protocols";
    let Some(value) = value else {
        return Some(BTreeSet::new());
    };
    let Some(items) = value.as_array() else {
        errors.push(FieldError::new(field, "must be an array of strings"));
        return None;
    };
    let items = super::bounded_items(field, items, MAX_PROTOCOLS * super::LIST_SLACK, errors)?;
    let before = errors.len();
    let mut protocols = BTreeSet::new();
    for (index, item) in items.iter().enumerate() {
        let parsed = item
            .as_str()
            .ok_or_else(|| "must be a string".to_owned())
            .and_then(normalise_protocol);
        match parsed {
            Ok(protocol) => {
                protocols.insert(protocol);
            }
            Err(message) => errors.push(FieldError::new(format!("{field}[{index}]"), message)),
        }
    }
    if protocols.len() > MAX_PROTOCOLS {
        errors.push(FieldError::new(
            field,
            format!(
                "at most {MAX_PROTOCOLS} protocols (got {})",
                protocols.len()
            ),
        ));
    }
    (errors.len() == before).then_some(protocols)
}

/// Normalises a network: trim, lowercase, alias, validate.
fn normalise_network(raw: &str) -> Result<String, String> {
    let cleaned = clean(raw);
    if cleaned.is_empty() {
        return Err("network is missing".to_owned());
    }
    let network = network_alias(&cleaned).map_or(cleaned, str::to_owned);
    if is_slug(&network, 64, &['-']) {
        return Ok(network);
    }
    if network.contains(':') {
        return Err(format!(
            "'{}' is not a known network; CAIP-2 style names must be one of {}",
            shown(&network),
            super::rails::known_caip2().join(", ")
        ));
    }
    Err(format!(
        "'{}' is not a network slug: 1-64 of a-z, 0-9, '-', starting with a letter or digit",
        shown(&network)
    ))
}

/// Normalises an asset: trim, lowercase, alias, validate.
fn normalise_asset(raw: &str) -> Result<String, String> {
    let cleaned = clean(raw);
    if cleaned.is_empty() {
        return Err("asset is missing".to_owned());
    }
    let asset = apply_alias(ASSET_ALIASES, &cleaned);
    if is_slug(&asset, 32, &['.', '_', '-']) {
        Ok(asset)
    } else {
        Err(format!(
            "'{}' is not an asset slug: 1-32 of a-z, 0-9, '.', '_', '-', starting with a letter or digit",
            shown(&asset)
        ))
    }
}

/// Parses the string form `"network:asset"`, splitting at the last colon so that
/// `"eip155:8453:usdc"` names asset `usdc` on network alias `eip155:8453`.
fn parse_rail_string(raw: &str) -> Result<Rail, String> {
    let cleaned = clean(raw);
    if let Some(network) = network_alias(&cleaned) {
        return Err(format!(
            "'{cleaned}' names the network '{network}' but no asset: use \"{network}:<asset>\""
        ));
    }
    let Some((network, asset)) = cleaned.rsplit_once(':') else {
        return Err(format!("'{}' must be \"network:asset\"", shown(&cleaned)));
    };
    Ok(Rail {
        network: normalise_network(network)?,
        asset: normalise_asset(asset)?,
        protocol: None,
        caip2: None,
    })
}

/// Parses the object form `{network, asset|token, protocol?, caip2?}`, pushing field errors.
fn parse_rail_object(
    object: &Map<String, Value>,
    field: &str,
    protocols: Option<&BTreeSet<String>>,
    errors: &mut Vec<FieldError>,
) -> Option<Rail> {
    let before = errors.len();
    let network = required_slug(object, "network", field, normalise_network, errors);
    // `token` is a synonym of `asset`; `asset` wins when both are given.
    let asset_key = if present(object, "asset").is_none() && present(object, "token").is_some() {
        "token"
    } else {
        "asset"
    };
    let asset = required_slug(object, asset_key, field, normalise_asset, errors);
    let protocol = parse_rail_protocol(present(object, "protocol"), field, protocols, errors);
    let caip2 = parse_caip2(present(object, "caip2"), field, errors);
    if errors.len() != before {
        return None;
    }
    Some(Rail {
        network: network?,
        asset: asset?,
        protocol,
        caip2,
    })
}

/// A required string member normalised by `normalise`.
fn required_slug(
    object: &Map<String, Value>,
    key: &str,
    field: &str,
    normalise: fn(&str) -> Result<String, String>,
    errors: &mut Vec<FieldError>,
) -> Option<String> {
    let field = format!("{field}.{key}");
    let result = match present(object, key) {
        None => Err("is required".to_owned()),
        Some(value) => value
            .as_str()
            .ok_or_else(|| "must be a string".to_owned())
            .and_then(normalise),
    };
    result
        .map_err(|message| errors.push(FieldError::new(field, message)))
        .ok()
}

/// A rail's optional protocol, which must be one of the agent's protocols.
fn parse_rail_protocol(
    value: Option<&Value>,
    field: &str,
    protocols: Option<&BTreeSet<String>>,
    errors: &mut Vec<FieldError>,
) -> Option<String> {
    let field = format!("{field}.protocol");
    let parsed = value?
        .as_str()
        .ok_or_else(|| "must be a string".to_owned())
        .and_then(normalise_protocol);
    match parsed {
        // When `protocols` itself is invalid its own errors say so; do not pile on.
        Ok(protocol) if protocols.is_none_or(|listed| listed.contains(&protocol)) => Some(protocol),
        Ok(protocol) => {
            errors.push(FieldError::new(
                field,
                format!("'{protocol}' must also be listed in payment.protocols"),
            ));
            None
        }
        Err(message) => {
            errors.push(FieldError::new(field, message));
            None
        }
    }
}

/// A rail's optional CAIP-2 id, kept verbatim.
fn parse_caip2(value: Option<&Value>, field: &str, errors: &mut Vec<FieldError>) -> Option<String> {
    let field = format!("{field}.caip2");
    let Some(caip2) = value?.as_str() else {
        errors.push(FieldError::new(field, "must be a string"));
        return None;
    };
    if caip2.trim().is_empty() || caip2.chars().count() > MAX_CAIP2_LEN {
        errors.push(FieldError::new(
            field,
            format!("must be a non-empty CAIP-2 id of at most {MAX_CAIP2_LEN} characters"),
        ));
        return None;
    }
    Some(caip2.to_owned())
}

/// The canonical rail set (deduplicated and sorted by the derived order).
fn parse_rails(
    value: Option<&Value>,
    protocols: Option<&BTreeSet<String>>,
    errors: &mut Vec<FieldError>,
) -> BTreeSet<Rail> {
    let field = "payment.rails";
    let mut rails = BTreeSet::new();
    let Some(value) = value else {
        return rails;
    };
    let Some(items) = value.as_array() else {
        errors.push(FieldError::new(
            field,
            "must be an array of rails ({network, asset} objects or \"network:asset\" strings)",
        ));
        return rails;
    };
    let Some(items) = super::bounded_items(field, items, MAX_RAILS * super::LIST_SLACK, errors)
    else {
        return rails;
    };
    for (index, item) in items.iter().enumerate() {
        let item_field = format!("{field}[{index}]");
        let rail = match item {
            Value::String(raw) => parse_rail_string(raw)
                .map_err(|message| errors.push(FieldError::new(&item_field, message)))
                .ok(),
            Value::Object(object) => parse_rail_object(object, &item_field, protocols, errors),
            _ => {
                errors.push(FieldError::new(
                    &item_field,
                    "must be a {network, asset} object or a \"network:asset\" string",
                ));
                None
            }
        };
        rails.extend(rail);
    }
    if rails.len() > MAX_RAILS {
        errors.push(FieldError::new(
            field,
            format!("at most {MAX_RAILS} rails (got {})", rails.len()),
        ));
    }
    rails
}

/// The four payment filter parameters as received, before tokenising.
///
/// Transports join JSON arrays and repeated query parameters with `,` before filling this in.
#[derive(Debug, Default, Clone)]
pub struct PaymentFilterInput {
    /// `payment_model`.
    pub model: Option<String>,
    /// `payment_protocol`.
    pub protocol: Option<String>,
    /// `payment_rail`.
    pub rail: Option<String>,
    /// `payment_direction`.
    pub direction: Option<String>,
}

/// A payment filter value that cannot be understood (HTTP 400 `invalid_parameter`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {parameter}: {message}")]
pub struct FilterError {
    /// The parameter at fault, e.g. `payment_model`.
    pub parameter: &'static str,
    /// What is wrong, naming the allowed values.
    pub message: String,
}

/// One `payment_rail` term, parsed once.
#[derive(Debug, Clone, PartialEq, Eq)]
enum RailTerm {
    /// `net:asset`: exact network, asset by prefix.
    NetworkAsset { network: String, asset: String },
    /// `net:` or a whole network alias such as `eip155:8453`: every asset on the network.
    Network(String),
    /// A bare term: prefix of the network (never aliased) or of the asset (asset-aliased).
    Bare { network: String, asset: String },
    /// Malformed (`:usdc`, `a:b:c`): matches nothing.
    Nothing,
}

impl RailTerm {
    fn parse(token: &str) -> Self {
        if let Some(network) = network_alias(token) {
            return Self::Network(network.to_owned());
        }
        let Some((network, asset)) = token.rsplit_once(':') else {
            return Self::Bare {
                network: token.to_owned(),
                asset: apply_alias(ASSET_ALIASES, token),
            };
        };
        let network = if network.contains(':') {
            network_alias(network).map(str::to_owned)
        } else {
            Some(network.to_owned()).filter(|network| !network.is_empty())
        };
        match network {
            None => Self::Nothing,
            Some(network) if asset.is_empty() => Self::Network(network),
            Some(network) => Self::NetworkAsset {
                network,
                asset: apply_alias(ASSET_ALIASES, asset),
            },
        }
    }

    fn matches(&self, rail: &Rail) -> bool {
        match self {
            Self::NetworkAsset { network, asset } => {
                rail.network == *network && rail.asset.starts_with(asset.as_str())
            }
            Self::Network(network) => rail.network == *network,
            Self::Bare { network, asset } => {
                rail.network.starts_with(network.as_str()) || rail.asset.starts_with(asset.as_str())
            }
            Self::Nothing => false,
        }
    }
}

/// The active payment filters of one search; `None` fields are not applied.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PaymentFilter {
    models: Option<BTreeSet<PaymentModel>>,
    directions: Option<BTreeSet<Direction>>,
    protocols: Option<BTreeSet<String>>,
    rails: Option<Vec<RailTerm>>,
}

impl PaymentFilter {
    /// Tokenises and parses the four parameters. Unknown models or directions are errors;
    /// unknown protocols and malformed rail terms simply match nothing.
    pub fn parse(input: &PaymentFilterInput) -> Result<Self, FilterError> {
        Ok(Self {
            models: parse_closed(
                "payment_model",
                input.model.as_deref(),
                &PaymentModel::ALL,
                PaymentModel::as_str,
            )?,
            directions: parse_closed(
                "payment_direction",
                input.direction.as_deref(),
                &Direction::ALL,
                Direction::as_str,
            )?,
            protocols: tokens(input.protocol.as_deref()).map(|tokens| {
                tokens
                    .iter()
                    .map(|token| apply_alias(PROTOCOL_ALIASES, token))
                    .collect()
            }),
            rails: tokens(input.rail.as_deref())
                .map(|tokens| tokens.iter().map(|token| RailTerm::parse(token)).collect()),
        })
    }

    /// True when no payment filter is applied.
    pub fn is_empty(&self) -> bool {
        self.models.is_none()
            && self.directions.is_none()
            && self.protocols.is_none()
            && self.rails.is_none()
    }

    /// Whether an agent with these payment terms passes every active filter.
    /// An agent without payment terms fails every active filter.
    pub fn matches(&self, payment: Option<&Payment>) -> bool {
        if self.is_empty() {
            return true;
        }
        let Some(payment) = payment else {
            return false;
        };
        self.model_matches(payment)
            && self.direction_matches(payment)
            && self.protocol_matches(payment)
            && self.rail_matches(payment)
    }

    fn model_matches(&self, payment: &Payment) -> bool {
        self.models
            .as_ref()
            .is_none_or(|models| models.contains(&payment.model))
    }

    fn direction_matches(&self, payment: &Payment) -> bool {
        self.directions.as_ref().is_none_or(|wanted| {
            payment
                .direction
                .is_some_and(|direction| wanted.iter().any(|token| direction.covers(*token)))
        })
    }

    fn protocol_matches(&self, payment: &Payment) -> bool {
        self.protocols.as_ref().is_none_or(|wanted| {
            payment
                .protocols
                .iter()
                .any(|protocol| wanted.contains(protocol))
        })
    }

    /// Some rail must match a rail term and, with a protocol filter, satisfy it too.
    fn rail_matches(&self, payment: &Payment) -> bool {
        self.rails.as_ref().is_none_or(|terms| {
            payment.rails.iter().any(|rail| {
                terms.iter().any(|term| term.matches(rail))
                    && self.rail_satisfies_protocols(rail, payment)
            })
        })
    }

    /// A rail bound to a protocol satisfies the protocol filter only through that protocol;
    /// an unbound rail through any of the agent's protocols.
    fn rail_satisfies_protocols(&self, rail: &Rail, payment: &Payment) -> bool {
        let Some(wanted) = &self.protocols else {
            return true;
        };
        match &rail.protocol {
            Some(own) => wanted.contains(own),
            None => payment
                .protocols
                .iter()
                .any(|protocol| wanted.contains(protocol)),
        }
    }
}

/// A filter value's terms: ASCII-lowercase, split on `[\s,]+`, drop empty tokens; `None` when none are left.
fn tokens(value: Option<&str>) -> Option<Vec<String>> {
    let tokens: Vec<String> = value?
        .to_ascii_lowercase()
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|token| !token.is_empty())
        .map(str::to_owned)
        .collect();
    (!tokens.is_empty()).then_some(tokens)
}

/// Tokenises a parameter with a closed vocabulary; an unknown token is an error.
fn parse_closed<T: Copy + Ord>(
    parameter: &'static str,
    value: Option<&str>,
    all: &[T],
    as_str: fn(T) -> &'static str,
) -> Result<Option<BTreeSet<T>>, FilterError> {
    let Some(tokens) = tokens(value) else {
        return Ok(None);
    };
    tokens
        .iter()
        .map(|token| {
            all.iter()
                .copied()
                .find(|item| as_str(*item) == token)
                .ok_or_else(|| FilterError {
                    parameter,
                    message: format!(
                        "unknown value '{}'; allowed values: {}",
                        shown(token),
                        allowed(all, as_str)
                    ),
                })
        })
        .collect::<Result<BTreeSet<T>, _>>()
        .map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn payment(value: Value) -> Payment {
        Payment::parse(&value).expect("valid payment")
    }

    fn errors(value: Value) -> Vec<FieldError> {
        Payment::parse(&value).expect_err("invalid payment")
    }

    fn fields(value: Value) -> Vec<String> {
        errors(value).into_iter().map(|error| error.field).collect()
    }

    fn rail(network: &str, asset: &str) -> Rail {
        Rail {
            network: network.to_owned(),
            asset: asset.to_owned(),
            protocol: None,
            caip2: None,
        }
    }

    fn with_rails(rails: Value) -> Payment {
        payment(json!({"model": "paid", "rails": rails}))
    }

    fn filter(model: &str, protocol: &str, rail: &str, direction: &str) -> PaymentFilter {
        let some = |value: &str| Some(value.to_owned()).filter(|value| !value.is_empty());
        PaymentFilter::parse(&PaymentFilterInput {
            model: some(model),
            protocol: some(protocol),
            rail: some(rail),
            direction: some(direction),
        })
        .expect("valid filter")
    }

    fn rail_filter(value: &str) -> PaymentFilter {
        filter("", "", value, "")
    }

    fn rail_matches(agent_rails: Value, value: &str) -> bool {
        rail_filter(value).matches(Some(&with_rails(agent_rails)))
    }

    // ----- the stored shape: parsing and normalisation -----

    #[test]
    fn the_documented_example_parses_to_its_canonical_form() {
        let parsed = payment(json!({
            "model": "freemium",
            "direction": "both",
            "protocols": ["x402", "lightning-invoice"],
            "rails": [
                {"network": "base", "asset": "usdc", "protocol": "x402", "caip2": "eip155:8453"},
                {"network": "nano", "asset": "xno"},
                {"network": "lightning", "asset": "btc", "protocol": "lightning-invoice"}
            ]
        }));
        assert_eq!(
            serde_json::to_value(&parsed).expect("should succeed"),
            json!({
                "model": "freemium",
                "direction": "both",
                "protocols": ["lightning-invoice", "x402"],
                "rails": [
                    {"network": "base", "asset": "usdc", "protocol": "x402", "caip2": "eip155:8453"},
                    {"network": "lightning", "asset": "btc", "protocol": "lightning-invoice"},
                    {"network": "nano", "asset": "xno"}
                ]
            })
        );
    }

    #[test]
    fn model_is_required() {
        assert_eq!(fields(json!({})), ["payment.model"]);
        assert_eq!(fields(json!({"model": null})), ["payment.model"]);
    }

    #[test]
    fn an_unknown_model_is_rejected_naming_the_allowed_values() {
        let error = &errors(json!({"model": "cheap"}))[0];
        assert_eq!(error.field, "payment.model");
        assert!(
            error.message.contains("free, paid, freemium"),
            "{}",
            error.message
        );
    }

    #[test]
    fn a_model_of_the_wrong_json_type_is_a_field_error() {
        assert_eq!(fields(json!({"model": 3})), ["payment.model"]);
    }

    #[test]
    fn model_and_direction_are_read_case_insensitively() {
        let parsed = payment(json!({"model": " PAID ", "direction": "Both"}));
        assert_eq!(parsed.model, PaymentModel::Paid);
        assert_eq!(parsed.direction, Some(Direction::Both));
    }

    #[test]
    fn paid_and_freemium_default_to_inbound() {
        assert_eq!(
            payment(json!({"model": "paid"})).direction,
            Some(Direction::Inbound)
        );
        assert_eq!(
            payment(json!({"model": "freemium", "direction": null})).direction,
            Some(Direction::Inbound)
        );
    }

    #[test]
    fn free_has_no_direction_unless_given() {
        let parsed = payment(json!({"model": "free"}));
        assert_eq!(parsed.direction, None);
        assert_eq!(
            serde_json::to_value(&parsed).expect("should succeed"),
            json!({"model": "free", "protocols": [], "rails": []})
        );
        let outbound = payment(json!({"model": "free", "direction": "outbound"}));
        assert_eq!(outbound.direction, Some(Direction::Outbound));
    }

    #[test]
    fn paid_or_freemium_with_outbound_is_rejected() {
        assert_eq!(
            fields(json!({"model": "paid", "direction": "outbound"})),
            ["payment.direction"]
        );
        assert_eq!(
            fields(json!({"model": "freemium", "direction": "outbound"})),
            ["payment.direction"]
        );
    }

    #[test]
    fn paid_with_both_directions_is_allowed() {
        assert_eq!(
            payment(json!({"model": "paid", "direction": "both"})).direction,
            Some(Direction::Both)
        );
    }

    #[test]
    fn an_unknown_direction_is_rejected() {
        assert_eq!(
            fields(json!({"model": "paid", "direction": "sideways"})),
            ["payment.direction"]
        );
        assert_eq!(
            fields(json!({"model": "paid", "direction": 1})),
            ["payment.direction"]
        );
    }

    #[test]
    fn protocols_are_lowercased_deduplicated_and_sorted() {
        let parsed =
            payment(json!({"model": "paid", "protocols": ["X402", "ap2", " x402 ", "acp"]}));
        assert_eq!(parsed.protocols, ["acp", "ap2", "x402"]);
    }

    #[test]
    fn protocol_aliases_are_applied_on_write_before_deduplication() {
        let parsed = payment(json!({"model": "paid", "protocols": ["LSAT", "l402", "bolt11"]}));
        assert_eq!(parsed.protocols, ["l402", "lightning-invoice"]);
    }

    #[test]
    fn an_invalid_protocol_slug_is_reported_with_its_index() {
        let found = fields(json!({"model": "paid", "protocols": ["x402", "-bad", "has space", 7]}));
        assert_eq!(
            found,
            [
                "payment.protocols[1]",
                "payment.protocols[2]",
                "payment.protocols[3]"
            ]
        );
    }

    #[test]
    fn a_protocol_slug_may_be_32_characters_but_not_33() {
        let ok = "a".repeat(32);
        let too_long = "a".repeat(33);
        assert!(Payment::parse(&json!({"model": "paid", "protocols": [ok]})).is_ok());
        assert_eq!(
            fields(json!({"model": "paid", "protocols": [too_long]})),
            ["payment.protocols[0]"]
        );
    }

    #[test]
    fn at_most_sixteen_distinct_protocols_are_allowed() {
        let sixteen: Vec<String> = (0..16).map(|i| format!("p{i}")).collect();
        let seventeen: Vec<String> = (0..17).map(|i| format!("p{i}")).collect();
        assert!(Payment::parse(&json!({"model": "paid", "protocols": sixteen})).is_ok());
        assert_eq!(
            fields(json!({"model": "paid", "protocols": seventeen})),
            ["payment.protocols"]
        );
    }

    #[test]
    fn protocols_must_be_an_array() {
        assert_eq!(
            fields(json!({"model": "paid", "protocols": "x402"})),
            ["payment.protocols"]
        );
    }

    #[test]
    fn a_string_rail_is_network_colon_asset() {
        assert_eq!(
            with_rails(json!(["Base:USDC"])).rails,
            [rail("base", "usdc")]
        );
    }

    #[test]
    fn a_string_rail_with_a_caip2_network_alias_splits_at_the_last_colon() {
        assert_eq!(
            with_rails(json!(["eip155:8453:usdc"])).rails,
            [rail("base", "usdc")]
        );
        assert_eq!(
            with_rails(json!(["nano:mainnet:xno"])).rails,
            [rail("nano", "xno")]
        );
        assert_eq!(
            with_rails(json!(["bip122:000000000019d6689c085ae165831e93:btc"])).rails,
            [rail("bitcoin", "btc")]
        );
    }

    #[test]
    fn a_string_rail_with_an_unknown_prefixed_network_is_rejected() {
        assert_eq!(
            fields(json!({"model": "paid", "rails": ["a:b:c"]})),
            ["payment.rails[0]"]
        );
    }

    #[test]
    fn a_string_rail_needs_both_network_and_asset() {
        for bad in ["base:", ":usdc", ":", "base", ""] {
            assert_eq!(
                fields(json!({"model": "paid", "rails": [bad]})),
                ["payment.rails[0]"],
                "{bad:?} should be rejected"
            );
        }
    }

    #[test]
    fn a_string_rail_that_is_only_a_network_alias_is_rejected() {
        let error = &errors(json!({"model": "paid", "rails": ["eip155:8453"]}))[0];
        assert_eq!(error.field, "payment.rails[0]");
        assert!(error.message.contains("no asset"), "{}", error.message);
    }

    #[test]
    fn token_is_a_synonym_of_asset() {
        assert_eq!(
            with_rails(json!([{"network": "nano", "token": "XNO"}])).rails,
            [rail("nano", "xno")]
        );
    }

    #[test]
    fn asset_wins_over_token_when_both_are_given() {
        assert_eq!(
            with_rails(json!([{"network": "base", "asset": "usdc", "token": "usdt"}])).rails,
            [rail("base", "usdc")]
        );
    }

    #[test]
    fn network_aliases_are_applied_to_object_rails() {
        let parsed = with_rails(json!([
            {"network": "eip155:8453", "asset": "usdc"},
            {"network": "EIP155:84532", "asset": "usdc"},
            {"network": "eip155:1", "asset": "eth"},
            {"network": "eip155:137", "asset": "usdc"},
            {"network": "eip155:42161", "asset": "usdc"},
            {"network": "eip155:10", "asset": "usdc"},
            {"network": "nano:mainnet", "asset": "xno"}
        ]));
        let networks: Vec<&str> = parsed.rails.iter().map(|r| r.network.as_str()).collect();
        assert_eq!(
            networks,
            [
                "arbitrum",
                "base",
                "base-sepolia",
                "ethereum",
                "nano",
                "optimism",
                "polygon"
            ]
        );
    }

    #[test]
    fn asset_aliases_are_applied_on_write() {
        let cases = [
            ("usdce", "usdc.e"),
            ("usdc_e", "usdc.e"),
            ("USDC-E", "usdc.e"),
            ("USD₮", "usdt"),
            ("usd₮0", "usdt0"),
            ("sat", "btc"),
            ("sats", "btc"),
            ("msat", "btc"),
        ];
        for (given, canonical) in cases {
            let parsed = with_rails(json!([{"network": "x", "asset": given}]));
            assert_eq!(parsed.rails[0].asset, canonical, "{given}");
        }
    }

    #[test]
    fn rail_networks_and_assets_are_validated_after_lowercasing() {
        let found = fields(json!({"model": "paid", "rails": [
            {"network": "my_net", "asset": "usdc"},
            {"network": "base", "asset": "a".repeat(33)},
            {"network": "-base", "asset": "usdc"},
            {"network": "base", "asset": ".usdc"}
        ]}));
        assert_eq!(
            found,
            [
                "payment.rails[0].network",
                "payment.rails[1].asset",
                "payment.rails[2].network",
                "payment.rails[3].asset"
            ]
        );
    }

    #[test]
    fn an_object_rail_network_with_an_unknown_colon_prefix_is_rejected() {
        assert_eq!(
            fields(json!({"model": "paid", "rails": [{"network": "eip155:999", "asset": "x"}]})),
            ["payment.rails[0].network"]
        );
    }

    #[test]
    fn an_object_rail_reports_missing_network_and_asset() {
        assert_eq!(
            fields(json!({"model": "paid", "rails": [{"protocol": null}]})),
            ["payment.rails[0].network", "payment.rails[0].asset"]
        );
    }

    #[test]
    fn a_bad_token_is_reported_under_token() {
        assert_eq!(
            fields(json!({"model": "paid", "rails": [{"network": "base", "token": "!"}]})),
            ["payment.rails[0].token"]
        );
    }

    #[test]
    fn a_rail_protocol_must_be_listed_in_protocols() {
        let found = fields(json!({
            "model": "paid", "protocols": ["x402"],
            "rails": [{"network": "base", "asset": "usdc", "protocol": "l402"}]
        }));
        assert_eq!(found, ["payment.rails[0].protocol"]);
    }

    #[test]
    fn a_rail_protocol_is_aliased_before_the_listing_check() {
        let parsed = payment(json!({
            "model": "paid", "protocols": ["l402"],
            "rails": [{"network": "lightning", "asset": "sats", "protocol": "LSAT"}]
        }));
        assert_eq!(parsed.rails[0].protocol.as_deref(), Some("l402"));
        assert_eq!(parsed.rails[0].asset, "btc");
    }

    #[test]
    fn caip2_is_stored_verbatim() {
        let parsed =
            with_rails(json!([{"network": "Base", "asset": "USDC", "caip2": "EIP155:8453"}]));
        assert_eq!(parsed.rails[0].caip2.as_deref(), Some("EIP155:8453"));
    }

    #[test]
    fn caip2_must_be_a_non_empty_string() {
        let found = fields(json!({"model": "paid", "rails": [
            {"network": "base", "asset": "usdc", "caip2": ""},
            {"network": "base", "asset": "usdc", "caip2": 8453}
        ]}));
        assert_eq!(found, ["payment.rails[0].caip2", "payment.rails[1].caip2"]);
    }

    #[test]
    fn duplicate_rails_are_stored_once_after_normalisation() {
        let parsed = with_rails(json!([
            "base:usdc",
            {"network": "BASE", "token": "usdc"},
            "eip155:8453:USDC",
            {"network": "base", "asset": "usdc", "caip2": "eip155:8453"}
        ]));
        assert_eq!(parsed.rails.len(), 2);
    }

    #[test]
    fn rails_are_sorted_by_network_asset_protocol_and_caip2() {
        let parsed = payment(json!({
            "model": "paid", "protocols": ["x402", "mpp"],
            "rails": [
                {"network": "base", "asset": "usdc", "protocol": "x402"},
                "polygon:usdc",
                {"network": "base", "asset": "usdc", "protocol": "mpp"},
                "base:usdc",
                "base:eurc",
                {"network": "base", "asset": "usdc", "caip2": "eip155:8453"}
            ]
        }));
        let order: Vec<(&str, &str, Option<&str>, Option<&str>)> = parsed
            .rails
            .iter()
            .map(|r| {
                (
                    r.network.as_str(),
                    r.asset.as_str(),
                    r.protocol.as_deref(),
                    r.caip2.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            order,
            [
                ("base", "eurc", None, None),
                ("base", "usdc", None, None),
                ("base", "usdc", None, Some("eip155:8453")),
                ("base", "usdc", Some("mpp"), None),
                ("base", "usdc", Some("x402"), None),
                ("polygon", "usdc", None, None),
            ]
        );
    }

    #[test]
    fn at_most_thirty_two_distinct_rails_are_allowed() {
        let rails = |n: usize| (0..n).map(|i| format!("net{i}:usdc")).collect::<Vec<_>>();
        assert!(Payment::parse(&json!({"model": "paid", "rails": rails(32)})).is_ok());
        assert_eq!(
            fields(json!({"model": "paid", "rails": rails(33)})),
            ["payment.rails"]
        );
    }

    #[test]
    fn wrong_json_types_are_field_errors() {
        assert_eq!(fields(json!("paid")), ["payment"]);
        assert_eq!(fields(json!(null)), ["payment"]);
        assert_eq!(
            fields(json!({"model": "paid", "rails": {}})),
            ["payment.rails"]
        );
        assert_eq!(
            fields(json!({"model": "paid", "rails": [42, [], {"network": 1, "asset": true}]})),
            [
                "payment.rails[0]",
                "payment.rails[1]",
                "payment.rails[2].network",
                "payment.rails[2].asset"
            ]
        );
    }

    #[test]
    fn every_error_is_reported_at_once() {
        let found = fields(json!({
            "model": "gratis", "direction": "up", "protocols": ["!"],
            "rails": ["base:", {"network": "base", "asset": "usdc", "protocol": "?"}]
        }));
        assert_eq!(
            found,
            [
                "payment.model",
                "payment.direction",
                "payment.protocols[0]",
                "payment.rails[0]",
                "payment.rails[1].protocol"
            ]
        );
    }

    #[test]
    fn unknown_keys_and_null_optionals_are_ignored() {
        let parsed = payment(json!({
            "model": "free", "direction": null, "protocols": null, "rails": null, "note": "hi"
        }));
        assert_eq!(parsed, Payment::free());
    }

    #[test]
    fn stored_canonical_json_deserializes_back_unchanged() {
        let parsed = payment(json!({
            "model": "paid", "protocols": ["x402"],
            "rails": [{"network": "base", "asset": "usdc", "protocol": "x402", "caip2": "eip155:8453"}]
        }));
        let stored = serde_json::to_string(&parsed).expect("should succeed");
        let read_back: Payment = serde_json::from_str(&stored).expect("should succeed");
        assert_eq!(read_back, parsed);
    }

    #[test]
    fn pay_to_price_and_scheme_are_stored_in_canonical_form() {
        let parsed = payment(json!({
            "model": "paid", "protocols": ["x402"], "rails": ["base:usdc", "lightning:sats"],
            "scheme": " Exact ", "pay_to": "  0x209693Bc6afc0C5328bA36FaF03C514EF312287C ",
            "price": {"amount": " 0010000 ", "asset": "USDC", "note": "ignored"}
        }));
        assert_eq!(parsed.scheme.as_deref(), Some("exact"));
        assert_eq!(
            parsed.pay_to.as_deref(),
            Some("0x209693Bc6afc0C5328bA36FaF03C514EF312287C")
        );
        assert_eq!(
            parsed.price,
            Some(Price {
                amount: "10000".to_owned(),
                asset: "usdc".to_owned()
            })
        );
        let sats = payment(json!({
            "model": "paid", "rails": ["lightning:btc"], "price": {"amount": 0, "asset": "sats"}
        }));
        assert_eq!(
            sats.price,
            Some(Price {
                amount: "0".to_owned(),
                asset: "btc".to_owned()
            })
        );
    }

    #[test]
    fn without_pay_to_price_or_scheme_the_stored_form_is_unchanged() {
        let parsed =
            payment(json!({"model": "paid", "pay_to": null, "price": null, "scheme": null}));
        assert_eq!(
            serde_json::to_value(&parsed).expect("should succeed"),
            json!({"model": "paid", "direction": "inbound", "protocols": [], "rails": []})
        );
        let stored: Payment =
            serde_json::from_value(json!({"model": "free", "protocols": [], "rails": []}))
                .expect("older stored payment");
        assert_eq!(stored, Payment::free());
    }

    #[test]
    fn an_amount_is_digits_in_the_smallest_unit() {
        for (amount, field_ok) in [
            (json!("1"), true),
            (json!("0"), true),
            (json!("9".repeat(78)), true),
            (json!(18_446_744_073_709_551_615_u64), true),
            (json!(10000.0), true),
            (json!(1e30), false),
            (json!("9".repeat(79)), false),
            (json!("1.5"), false),
            (json!("-1"), false),
            (json!("+1"), false),
            (json!("1e3"), false),
            (json!("1 000"), false),
            (json!(""), false),
            (json!("١٢"), false),
            (json!(1.5), false),
            (json!(-1), false),
            (json!(true), false),
        ] {
            let body = json!({"model": "paid", "price": {"amount": amount, "asset": "usdc"}});
            let result = Payment::parse(&body);
            assert_eq!(result.is_ok(), field_ok, "{amount}: {result:?}");
            if let Err(errors) = result {
                assert_eq!(errors[0].field, "payment.price.amount", "{amount}");
            }
        }
    }

    #[test]
    fn a_price_needs_an_amount_and_an_asset_of_the_rails() {
        assert_eq!(
            fields(json!({"model": "paid", "price": {}})),
            ["payment.price.amount", "payment.price.asset"]
        );
        assert_eq!(
            fields(json!({"model": "paid", "price": "0.01 USDC"})),
            ["payment.price"]
        );
        let error = &errors(json!({
            "model": "paid", "rails": ["base:usdc", "nano:xno"],
            "price": {"amount": "1", "asset": "eurc"}
        }))[0];
        assert_eq!(error.field, "payment.price.asset");
        assert!(error.message.contains("usdc, xno"), "{}", error.message);
        assert_eq!(
            fields(json!({"model": "paid", "price": {"amount": "1", "asset": "not an asset"}})),
            ["payment.price.asset"]
        );
        // Without rails any asset slug will do; with unreadable rails only theirs are reported.
        assert!(
            Payment::parse(&json!({"model": "paid", "price": {"amount": "1", "asset": "eurc"}}))
                .is_ok()
        );
        assert_eq!(
            fields(
                json!({"model": "paid", "rails": ["base:"], "price": {"amount": "1", "asset": "eurc"}})
            ),
            ["payment.rails[0]"]
        );
    }

    #[test]
    fn pay_to_is_printable_ascii_without_spaces() {
        let long = "x".repeat(MAX_PAY_TO_LEN + 1);
        for bad in [
            json!(""),
            json!("0x12 34"),
            json!("nänö"),
            json!(long),
            json!(7),
        ] {
            assert_eq!(
                fields(json!({"model": "paid", "pay_to": bad})),
                ["payment.pay_to"],
                "{bad}"
            );
        }
        let nano = "nano_3ah94brzdm3e5nzzpstzcyxgkddt3ydgzi4478jshawrh7gtof5sb8twxqxt";
        assert_eq!(
            payment(json!({"model": "paid", "pay_to": nano}))
                .pay_to
                .as_deref(),
            Some(nano)
        );
    }

    #[test]
    fn a_scheme_is_a_slug() {
        for bad in [
            json!("ex act"),
            json!("-exact"),
            json!("a".repeat(33)),
            json!(1),
        ] {
            assert_eq!(
                fields(json!({"model": "paid", "scheme": bad})),
                ["payment.scheme"],
                "{bad}"
            );
        }
        assert_eq!(
            payment(json!({"model": "paid", "scheme": "batch-settlement"}))
                .scheme
                .as_deref(),
            Some("batch-settlement")
        );
    }

    #[test]
    fn bad_pay_to_price_and_scheme_are_reported_with_every_other_error() {
        let found = fields(json!({
            "model": "gratis", "rails": ["base:"], "scheme": "?", "pay_to": " ",
            "price": {"amount": "1.5", "asset": "usdc"}
        }));
        assert_eq!(
            found,
            [
                "payment.model",
                "payment.rails[0]",
                "payment.scheme",
                "payment.pay_to",
                "payment.price.amount"
            ]
        );
    }

    #[test]
    fn a_serialized_payment_parses_back_to_itself() {
        // What export writes, import reads: the record's payment is a valid payment body.
        let parsed = payment(json!({
            "model": "freemium", "direction": "both", "protocols": ["x402", "l402"],
            "rails": [{"network": "base", "asset": "usdc", "protocol": "x402", "caip2": "eip155:8453"}, "nano:xno"],
            "scheme": "exact", "pay_to": "0xAbC0000000000000000000000000000000000001",
            "price": {"amount": "2500", "asset": "usdc"}
        }));
        let written = serde_json::to_value(&parsed).expect("should succeed");
        assert_eq!(payment(written.clone()), parsed);
        let read_back: Payment = serde_json::from_value(written).expect("should succeed");
        assert_eq!(read_back, parsed);
    }

    #[test]
    fn every_caip2_id_of_the_rail_table_names_its_network() {
        for id in super::super::rails::RAIL_IDS {
            let rail = format!("{}:{}", id.caip2, id.asset);
            assert_eq!(
                with_rails(json!([rail])).rails[0].network,
                id.network,
                "{rail}"
            );
            let upper = format!("{}:{}", id.caip2.to_ascii_uppercase(), id.asset);
            assert_eq!(
                with_rails(json!([upper])).rails[0].network,
                id.network,
                "{upper}"
            );
        }
        assert!(rail_matches(json!(["avalanche:usdc"]), "eip155:43114"));
        assert!(rail_matches(
            json!(["solana:usdc"]),
            "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp:usdc"
        ));
    }

    #[test]
    fn enums_print_and_parse_their_canonical_spelling() {
        for model in PaymentModel::ALL {
            assert_eq!(PaymentModel::parse(model.as_str()), Some(model));
        }
        for direction in Direction::ALL {
            assert_eq!(Direction::parse(direction.as_str()), Some(direction));
        }
        assert_eq!(PaymentModel::parse("Paid"), None);
    }

    // ----- filters: tokenising -----

    #[test]
    fn no_input_is_an_empty_filter_that_matches_every_agent() {
        let none = PaymentFilter::parse(&PaymentFilterInput::default()).expect("should succeed");
        assert!(none.is_empty());
        assert!(none.matches(None));
        assert!(none.matches(Some(&Payment::free())));
    }

    #[test]
    fn blank_values_are_not_applied() {
        for blank in ["", ",", " ", " , ,\t\n"] {
            let input = PaymentFilterInput {
                model: Some(blank.to_owned()),
                protocol: Some(blank.to_owned()),
                rail: Some(blank.to_owned()),
                direction: Some(blank.to_owned()),
            };
            let parsed = PaymentFilter::parse(&input).expect("should succeed");
            assert!(parsed.is_empty(), "{blank:?}");
            assert!(parsed.matches(None), "{blank:?}");
        }
    }

    #[test]
    fn tokens_are_lowercased_and_split_on_commas_and_whitespace() {
        let parsed = filter(" FREE,,Paid  ", "", "", "");
        assert!(parsed.matches(Some(&payment(json!({"model": "free"})))));
        assert!(parsed.matches(Some(&payment(json!({"model": "paid"})))));
        assert!(!parsed.matches(Some(&payment(json!({"model": "freemium"})))));
    }

    // ----- filters: matching -----

    #[test]
    fn paid_does_not_match_freemium() {
        assert!(!filter("paid", "", "", "").matches(Some(&payment(json!({"model": "freemium"})))));
    }

    #[test]
    fn an_unknown_model_token_is_an_error_naming_the_allowed_values() {
        let input = PaymentFilterInput {
            model: Some("free,cheap".to_owned()),
            ..Default::default()
        };
        let error = PaymentFilter::parse(&input).expect_err("should fail");
        assert_eq!(error.parameter, "payment_model");
        assert!(error.message.contains("cheap"));
        assert!(error.message.contains("free, paid, freemium"));
        assert!(error.to_string().starts_with("invalid payment_model: "));
    }

    #[test]
    fn error_messages_quote_at_most_forty_characters_of_the_input() {
        let input = PaymentFilterInput {
            model: Some("x".repeat(500)),
            ..Default::default()
        };
        let error = PaymentFilter::parse(&input).expect_err("should fail");
        assert!(error.message.contains(&format!("'{}…'", "x".repeat(40))));
        let long_asset = "y".repeat(500);
        let message =
            &errors(json!({"model": "paid", "rails": [format!("base:{long_asset}")]}))[0].message;
        assert!(message.len() < 200, "{message}");
    }

    #[test]
    fn an_unknown_direction_token_is_an_error_naming_the_allowed_values() {
        let input = PaymentFilterInput {
            direction: Some("in".to_owned()),
            ..Default::default()
        };
        let error = PaymentFilter::parse(&input).expect_err("should fail");
        assert_eq!(error.parameter, "payment_direction");
        assert!(error.message.contains("inbound, outbound, both"));
    }

    fn direction_matches(token: &str, agent: &str) -> bool {
        let agent = payment(json!({"model": "free", "direction": agent}));
        filter("", "", "", token).matches(Some(&agent))
    }

    #[test]
    fn inbound_matches_inbound_and_both_agents() {
        assert!(direction_matches("inbound", "inbound"));
        assert!(direction_matches("inbound", "both"));
        assert!(!direction_matches("inbound", "outbound"));
    }

    #[test]
    fn outbound_matches_outbound_and_both_agents() {
        assert!(direction_matches("outbound", "outbound"));
        assert!(direction_matches("outbound", "both"));
        assert!(!direction_matches("outbound", "inbound"));
    }

    #[test]
    fn both_only_matches_agents_going_both_ways() {
        assert!(direction_matches("both", "both"));
        assert!(!direction_matches("both", "inbound"));
        assert!(!direction_matches("both", "outbound"));
    }

    #[test]
    fn several_direction_tokens_are_or_ed() {
        assert!(direction_matches("both outbound", "outbound"));
        assert!(direction_matches("INBOUND,outbound", "inbound"));
    }

    #[test]
    fn a_free_agent_without_a_direction_fails_a_direction_filter() {
        let free = payment(json!({"model": "free"}));
        assert!(!filter("", "", "", "inbound").matches(Some(&free)));
    }

    #[test]
    fn a_paid_agent_without_a_direction_matches_inbound_through_the_default() {
        let paid = payment(json!({"model": "paid"}));
        assert!(filter("", "", "", "inbound").matches(Some(&paid)));
    }

    fn with_protocols(protocols: Value) -> Payment {
        payment(json!({"model": "paid", "protocols": protocols}))
    }

    #[test]
    fn protocol_filter_is_an_exact_match() {
        let agent = with_protocols(json!(["lightning-invoice"]));
        assert!(filter("", "lightning-invoice", "", "").matches(Some(&agent)));
        assert!(!filter("", "lightning", "", "").matches(Some(&agent)));
    }

    #[test]
    fn protocol_aliases_are_applied_on_the_filter_side() {
        assert!(filter("", "LSAT", "", "").matches(Some(&with_protocols(json!(["l402"])))));
        assert!(
            filter("", "bolt11", "", "")
                .matches(Some(&with_protocols(json!(["lightning-invoice"]))))
        );
    }

    #[test]
    fn an_unknown_protocol_matches_nothing_without_an_error() {
        let parsed = filter("", "carrier-pigeon", "", "");
        assert!(!parsed.matches(Some(&with_protocols(json!(["x402"])))));
    }

    #[test]
    fn several_protocol_tokens_are_or_ed() {
        assert!(filter("", "ap2 x402", "", "").matches(Some(&with_protocols(json!(["x402"])))));
    }

    #[test]
    fn network_asset_needs_the_exact_network() {
        assert!(rail_matches(json!(["base:usdc"]), "base:usdc"));
        assert!(!rail_matches(json!(["base-sepolia:usdc"]), "base:usdc"));
    }

    #[test]
    fn network_asset_matches_the_asset_family_by_prefix() {
        assert!(rail_matches(json!(["polygon:usdc.e"]), "polygon:usdc"));
        assert!(!rail_matches(json!(["polygon:usdbc"]), "polygon:usdc"));
        assert!(!rail_matches(json!(["polygon:usdc"]), "polygon:usdc.e"));
    }

    #[test]
    fn network_colon_matches_every_asset_on_that_network_only() {
        assert!(rail_matches(json!(["base:usdc"]), "base:"));
        assert!(rail_matches(json!(["base:eurc"]), "BASE:"));
        assert!(!rail_matches(json!(["base-sepolia:usdc"]), "base:"));
    }

    #[test]
    fn a_whole_network_alias_token_means_every_asset_on_that_network() {
        assert!(rail_matches(json!(["base:eurc"]), "eip155:8453"));
        assert!(rail_matches(json!(["nano:xno"]), "nano:mainnet"));
        assert!(!rail_matches(json!(["base-sepolia:usdc"]), "eip155:8453"));
    }

    #[test]
    fn nano_xno_is_network_and_asset_not_an_alias() {
        assert!(rail_matches(json!(["nano:xno"]), "nano:xno"));
        assert!(!rail_matches(json!(["nano:other"]), "nano:xno"));
    }

    #[test]
    fn a_network_alias_prefix_works_in_network_asset_terms() {
        assert!(rail_matches(json!(["base:usdc"]), "eip155:8453:usdc"));
        assert!(rail_matches(json!(["base:usdc"]), "eip155:8453:"));
        assert!(!rail_matches(json!(["base:usdc"]), "eip155:8453:xno"));
    }

    #[test]
    fn a_bare_term_prefix_matches_the_network_or_the_asset() {
        assert!(rail_matches(json!(["polygon:usdc.e"]), "usdc"));
        assert!(rail_matches(json!(["polygon:usdc.e"]), "poly"));
        assert!(rail_matches(json!(["base-sepolia:usdc"]), "base"));
        assert!(!rail_matches(json!(["polygon:usdc"]), "usdt"));
    }

    #[test]
    fn network_aliases_are_never_applied_to_a_bare_term() {
        assert!(rail_matches(json!(["ethereum:usdc"]), "eth"));
        assert!(!rail_matches(json!(["base:usdc"]), "eip155"));
    }

    #[test]
    fn asset_aliases_are_applied_on_the_filter_side() {
        assert!(rail_matches(json!(["polygon:usdc.e"]), "polygon:usdce"));
        assert!(rail_matches(json!(["lightning:btc"]), "sats"));
        assert!(rail_matches(json!(["tron:usdt"]), "USD₮"));
        assert!(rail_matches(json!(["lightning:btc"]), "lightning:msat"));
    }

    #[test]
    fn malformed_rail_terms_match_nothing_without_an_error() {
        for malformed in [":usdc", "a:b:c", ":", "::"] {
            assert!(
                !rail_matches(json!(["base:usdc"]), malformed),
                "{malformed}"
            );
        }
    }

    #[test]
    fn a_malformed_term_does_not_spoil_the_other_terms() {
        assert!(rail_matches(json!(["base:usdc"]), ":usdc base:usdc"));
    }

    #[test]
    fn rail_terms_are_or_ed_across_commas_and_spaces() {
        assert!(rail_matches(json!(["nano:xno"]), "base:usdc nano"));
        assert!(rail_matches(json!(["polygon:usdc"]), "nano:xno,usdc"));
        assert!(!rail_matches(json!(["polygon:dai"]), "nano:xno, usdc"));
    }

    #[test]
    fn the_examples_table_holds() {
        let table = [
            ("base:usdc", "base:usdc", true),
            ("base-sepolia:usdc", "base:usdc", false),
            ("polygon:usdc.e", "usdc", true),
            ("nano:xno", "NANO:XNO", true),
            ("base:usdc", "nano:xno, base:", true),
        ];
        for (agent, value, expected) in table {
            assert_eq!(
                rail_matches(json!([agent]), value),
                expected,
                "{agent} / {value}"
            );
        }
    }

    fn bound_agent() -> Payment {
        payment(json!({
            "model": "paid", "protocols": ["x402", "manual"],
            "rails": [
                {"network": "base", "asset": "usdc", "protocol": "x402"},
                {"network": "nano", "asset": "xno", "protocol": "manual"}
            ]
        }))
    }

    #[test]
    fn with_protocol_and_rail_the_matching_rail_must_carry_a_wanted_protocol() {
        let agent = bound_agent();
        assert!(filter("", "x402", "base", "").matches(Some(&agent)));
        assert!(filter("", "manual", "nano", "").matches(Some(&agent)));
        assert!(!filter("", "x402", "nano", "").matches(Some(&agent)));
        assert!(!filter("", "manual", "base:usdc", "").matches(Some(&agent)));
    }

    #[test]
    fn an_unbound_rail_satisfies_the_protocol_filter_through_any_agent_protocol() {
        let agent = payment(json!({
            "model": "paid", "protocols": ["x402", "mpp"], "rails": ["base:usdc"]
        }));
        assert!(filter("", "mpp", "base:usdc", "").matches(Some(&agent)));
        assert!(!filter("", "l402", "base:usdc", "").matches(Some(&agent)));
    }

    #[test]
    fn a_rail_filter_alone_ignores_rail_protocol_bindings() {
        assert!(rail_filter("nano").matches(Some(&bound_agent())));
    }

    #[test]
    fn different_parameters_are_and_ed() {
        let agent = bound_agent();
        assert!(filter("paid", "x402", "base", "inbound").matches(Some(&agent)));
        assert!(!filter("free", "x402", "base", "inbound").matches(Some(&agent)));
        assert!(!filter("paid", "x402", "base", "outbound").matches(Some(&agent)));
        assert!(!filter("paid", "l402", "", "").matches(Some(&agent)));
        assert!(!filter("paid", "", "polygon", "").matches(Some(&agent)));
    }

    #[test]
    fn an_agent_without_payment_terms_fails_every_active_filter() {
        for parsed in [
            filter("free", "", "", ""),
            filter("", "x402", "", ""),
            filter("", "", "base", ""),
            filter("", "", "", "inbound"),
        ] {
            assert!(!parsed.is_empty());
            assert!(!parsed.matches(None));
        }
    }

    #[test]
    fn an_agent_without_rails_fails_a_rail_filter() {
        assert!(!rail_filter("base").matches(Some(&Payment::free())));
    }
}
