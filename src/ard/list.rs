//! `GET /ard/agents`: the deterministic listing, filtered by ARD's expression syntax
//! (Appendix A), ordered by `orderBy`, paged by a keyset token.
//!
//! ```text
//! filter  = clause { "AND" clause }
//! clause  = field op value
//! field   = "displayName" | "type" | "publisherId" | "publisher" | "createdAfter" | "updatedAfter"
//! op      = "=" | ":" | ">" | ">="
//! value   = "'" chars "'" | '"' chars '"' | bare-word      (a quote inside doubles it)
//! orderBy = key { "," key } ;  key = ("displayName" | "createdAt" | "updatedAt") [ "ASC" | "DESC" ]
//! ```
//!
//! `displayName` matches names containing the value, ignoring case; `type` and `publisherId`
//! take comma-separated values (OR); `createdAfter` (first published) and `updatedAfter` take an
//! RFC 3339 time or a date, `>` and `=` meaning strictly after and `>=` at or after. Clauses
//! combine with AND; field names and `AND` ignore case. The default order is `displayName ASC`;
//! ties are broken by the agent id, so pages never repeat or skip an agent.

use std::cmp::Ordering;
use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::domain::access::Viewer;
use crate::search::{Filters, Listing, ListingFilter, SearchRequest, Sort};
use crate::timestamp::Timestamp;

use super::Ard;
use super::entry::{self, Detail};
use super::error::ArdError;

pub const DEFAULT_PAGE_SIZE: usize = 20;
pub const MAX_PAGE_SIZE: usize = 100;
/// Longest filter or orderBy expression, in characters.
const MAX_EXPRESSION_CHARS: usize = 2000;
const MAX_CLAUSES: usize = 16;

/// One clause of a filter expression.
#[derive(Debug, Clone)]
enum Clause {
    NameContains(String),
    Types(Vec<String>),
    Publishers(Vec<String>),
    CreatedAfter(Timestamp, bool),
    UpdatedAfter(Timestamp, bool),
}

impl Clause {
    fn matches(&self, listing: &Listing) -> bool {
        let after = |time: Option<Timestamp>, at: Timestamp, inclusive: bool| {
            time.is_some_and(|time| if inclusive { time >= at } else { time > at })
        };
        match self {
            Self::NameContains(part) => listing.name().to_lowercase().contains(part),
            Self::Types(types) => {
                let held = entry::media_type(listing.kind);
                types.iter().any(|t| t.eq_ignore_ascii_case(held))
            }
            Self::Publishers(publishers) => publishers
                .iter()
                .any(|p| p.eq_ignore_ascii_case(listing.publisher())),
            Self::CreatedAfter(at, inclusive) => after(listing.published_at, *at, *inclusive),
            Self::UpdatedAfter(at, inclusive) => after(Some(listing.updated_at), *at, *inclusive),
        }
    }
}

/// A token of the expression: a word, a quoted string, or an operator.
#[derive(Debug, PartialEq)]
enum Token {
    Word(String),
    Quoted(String),
    Op(String),
}

fn tokens(text: &str) -> Result<Vec<Token>, ArdError> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c == '\'' || c == '"' {
            chars.next();
            let mut value = String::new();
            loop {
                match chars.next() {
                    Some(q) if q == c && chars.peek() == Some(&c) => {
                        chars.next();
                        value.push(c);
                    }
                    Some(q) if q == c => break,
                    Some(other) => value.push(other),
                    None => return Err(ArdError::invalid("filter: an unterminated quoted value")),
                }
            }
            out.push(Token::Quoted(value));
        } else if matches!(c, '=' | ':' | '>') {
            chars.next();
            let mut op = c.to_string();
            if c == '>' && chars.peek() == Some(&'=') {
                chars.next();
                op.push('=');
            }
            out.push(Token::Op(op));
        } else {
            let mut word = String::new();
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() || matches!(c, '=' | ':' | '>' | '\'' | '"') {
                    break;
                }
                word.push(c);
                chars.next();
            }
            out.push(Token::Word(word));
        }
    }
    Ok(out)
}

fn time_value(field: &str, value: &str) -> Result<Timestamp, ArdError> {
    use time::format_description::well_known::Rfc3339;
    let parsed = time::OffsetDateTime::parse(value.trim(), &Rfc3339).or_else(|_| {
        time::Date::parse(
            value.trim(),
            time::macros::format_description!("[year]-[month]-[day]"),
        )
        .map(|date| date.midnight().assume_utc())
    });
    let at = parsed.map_err(|_| {
        ArdError::invalid(format!(
            "filter: {field} takes an RFC 3339 time or a date (2026-01-31), not '{}'",
            crate::domain::truncate(value, 60)
        ))
    })?;
    let micros = at.unix_timestamp_nanos() / 1000;
    Ok(Timestamp::from_micros(
        i64::try_from(micros).unwrap_or(i64::MAX),
    ))
}

fn list_values(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
        .collect()
}

/// Parses a filter expression.
fn parse_filter(text: &str) -> Result<Vec<Clause>, ArdError> {
    if text.chars().count() > MAX_EXPRESSION_CHARS || text.contains('\0') {
        return Err(ArdError::invalid(format!(
            "filter: at most {MAX_EXPRESSION_CHARS} characters, no NUL"
        )));
    }
    let tokens = tokens(text)?;
    let mut clauses = Vec::new();
    let mut rest = tokens.iter();
    loop {
        let (Some(field), Some(op), Some(value)) = (rest.next(), rest.next(), rest.next()) else {
            if clauses.is_empty() && tokens.is_empty() {
                return Ok(clauses);
            }
            return Err(ArdError::invalid(
                "filter: expected `field op value` (e.g. type = 'application/a2a-agent-card+json')",
            ));
        };
        let (Token::Word(field), Token::Op(op)) = (field, op) else {
            return Err(ArdError::invalid(
                "filter: expected `field op value` (e.g. displayName = 'weather')",
            ));
        };
        let value = match value {
            Token::Word(value) | Token::Quoted(value) => value.as_str(),
            Token::Op(_) => return Err(ArdError::invalid("filter: a value is missing")),
        };
        let inclusive = op == ">=";
        let clause = match field.to_ascii_lowercase().as_str() {
            "displayname" if op == "=" || op == ":" => Clause::NameContains(value.to_lowercase()),
            "type" if op == "=" || op == ":" => Clause::Types(list_values(value)),
            "publisherid" | "publisher" if op == "=" || op == ":" => {
                Clause::Publishers(list_values(value))
            }
            "createdafter" if op != ":" => {
                Clause::CreatedAfter(time_value(field, value)?, inclusive)
            }
            "updatedafter" if op != ":" => {
                Clause::UpdatedAfter(time_value(field, value)?, inclusive)
            }
            "displayname" | "type" | "publisherid" | "publisher" | "createdafter"
            | "updatedafter" => {
                return Err(ArdError::invalid(format!(
                    "filter: {field} does not take '{op}'"
                )));
            }
            _ => {
                return Err(ArdError::invalid(format!(
                    "filter: unknown field '{}'; fields are displayName, type, publisherId, createdAfter, updatedAfter",
                    crate::domain::truncate(field, 60)
                )));
            }
        };
        clauses.push(clause);
        if clauses.len() > MAX_CLAUSES {
            return Err(ArdError::invalid(format!(
                "filter: at most {MAX_CLAUSES} clauses"
            )));
        }
        match rest.next() {
            None => return Ok(clauses),
            Some(Token::Word(and)) if and.eq_ignore_ascii_case("and") => {}
            Some(_) => {
                return Err(ArdError::invalid(
                    "filter: clauses are joined with AND (OR is written inside a value: type = 'a,b')",
                ));
            }
        }
    }
}

/// A key of the order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
enum OrderKey {
    DisplayName,
    CreatedAt,
    UpdatedAt,
}

/// A listing's value for one key of the order.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(untagged)]
enum KeyValue {
    Time(i64),
    Text(String),
}

fn key_value(key: OrderKey, listing: &Listing) -> KeyValue {
    match key {
        OrderKey::DisplayName => KeyValue::Text(listing.name().to_lowercase()),
        OrderKey::CreatedAt => KeyValue::Time(listing.published_at.map_or(0, Timestamp::micros)),
        OrderKey::UpdatedAt => KeyValue::Time(listing.updated_at.micros()),
    }
}

fn parse_order(text: Option<&str>) -> Result<Vec<(OrderKey, bool)>, ArdError> {
    let Some(text) = text.filter(|t| !t.trim().is_empty()) else {
        return Ok(vec![(OrderKey::DisplayName, false)]);
    };
    if text.chars().count() > 200 {
        return Err(ArdError::invalid("orderBy: at most 200 characters"));
    }
    let mut order = Vec::new();
    for part in text.split(',') {
        let mut words = part.split_whitespace();
        let key = match words.next().map(str::to_ascii_lowercase).as_deref() {
            Some("displayname" | "name" | "display_name") => OrderKey::DisplayName,
            Some("createdat" | "created_at" | "created") => OrderKey::CreatedAt,
            Some("updatedat" | "updated_at" | "updated") => OrderKey::UpdatedAt,
            _ => {
                return Err(ArdError::invalid(format!(
                    "orderBy: unknown key in '{}'; keys are displayName, createdAt, updatedAt, each optionally ASC or DESC",
                    crate::domain::truncate(part, 60)
                )));
            }
        };
        let descending = match words.next().map(str::to_ascii_lowercase).as_deref() {
            None | Some("asc") => false,
            Some("desc") => true,
            Some(_) => return Err(ArdError::invalid("orderBy: a direction is ASC or DESC")),
        };
        if words.next().is_some() {
            return Err(ArdError::invalid(
                "orderBy: `key [ASC|DESC]`, comma-separated",
            ));
        }
        order.push((key, descending));
    }
    Ok(order)
}

/// Where the previous page ended.
#[derive(Debug, Serialize, Deserialize)]
struct ListToken {
    /// The filter and order it continues.
    q: String,
    keys: Vec<KeyValue>,
    id: String,
}

fn fingerprint(filter: &str, order: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(format!("{filter}\u{0}{order}").as_bytes());
    hex::encode(&digest[..12])
}

fn compare(
    order: &[(OrderKey, bool)],
    a: &(Vec<KeyValue>, &str),
    b: &(Vec<KeyValue>, &str),
) -> Ordering {
    for (i, (_, descending)) in order.iter().enumerate() {
        let by = a.0[i].cmp(&b.0[i]);
        let by = if *descending { by.reverse() } else { by };
        if by != Ordering::Equal {
            return by;
        }
    }
    a.1.cmp(b.1)
}

/// The parameters of one listing request.
pub struct ListParams<'a> {
    pub filter: Option<&'a str>,
    pub order_by: Option<&'a str>,
    pub page_size: Option<i64>,
    pub page_token: Option<&'a str>,
}

/// Answer a listing request: `{items, total, pageToken?}`.
pub async fn list(ard: &Ard, params: &ListParams<'_>, viewer: &Viewer) -> Result<Value, ArdError> {
    let clauses = parse_filter(params.filter.unwrap_or_default())?;
    let order = parse_order(params.order_by)?;
    let size = super::search::page_size(params.page_size, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)?;
    let q = fingerprint(
        params.filter.unwrap_or_default(),
        params.order_by.unwrap_or_default(),
    );
    let after = match params.page_token.filter(|t| !t.is_empty()) {
        None => None,
        Some(text) => {
            let invalid = || ArdError::invalid("pageToken: malformed, or from another listing");
            let bytes = URL_SAFE_NO_PAD.decode(text.trim()).map_err(|_| invalid())?;
            let token: ListToken = serde_json::from_slice(&bytes).map_err(|_| invalid())?;
            if token.q != q || token.keys.len() != order.len() {
                return Err(invalid());
            }
            Some(token)
        }
    };
    let filter = (!clauses.is_empty()).then(|| {
        ListingFilter(Arc::new(move |listing: &Listing| {
            clauses.iter().all(|clause| clause.matches(listing))
        }))
    });
    let request = SearchRequest {
        text: String::new(),
        filters: Filters {
            listing: filter,
            collapse_duplicates: false,
            ..Filters::default()
        },
        sort: Some(Sort::Name),
        limit: 1,
        cursor: None,
        offset: 0,
        facets: false,
        viewer: viewer.clone(),
    };
    let hits = ard.registry.all_matches(&request).await?;
    let total = hits.len();
    let mut keyed: Vec<((Vec<KeyValue>, &str), &Listing)> = hits
        .iter()
        .map(|hit| {
            let keys = order
                .iter()
                .map(|(key, _)| key_value(*key, &hit.listing))
                .collect();
            ((keys, hit.listing.id()), hit.listing.as_ref())
        })
        .collect();
    if let Some(token) = &after {
        let last = (token.keys.clone(), token.id.as_str());
        keyed.retain(|(key, _)| compare(&order, key, &last) == Ordering::Greater);
    }
    let more = keyed.len() > size;
    if more {
        keyed.select_nth_unstable_by(size - 1, |a, b| compare(&order, &a.0, &b.0));
        keyed.truncate(size);
    }
    keyed.sort_unstable_by(|a, b| compare(&order, &a.0, &b.0));
    let items: Vec<Value> = keyed
        .iter()
        .map(|(_, listing)| entry::of_listing(listing, &ard.base_url, Detail::Full))
        .collect();
    let mut answer = json!({"items": items, "total": total});
    if let (true, Some(((keys, id), _))) = (more, keyed.last()) {
        let token = ListToken {
            q,
            keys: keys.clone(),
            id: (*id).to_owned(),
        };
        answer["pageToken"] =
            json!(URL_SAFE_NO_PAD.encode(serde_json::to_vec(&token).unwrap_or_default()));
    }
    Ok(answer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_expressions_parse() {
        let clauses = parse_filter(
            "type = 'application/mcp-server-card+json,application/a2a-agent-card+json' AND createdAfter > '2026-01-01' and displayName:weather",
        )
        .expect("parses");
        assert_eq!(clauses.len(), 3);
        assert!(matches!(&clauses[0], Clause::Types(t) if t.len() == 2));
        assert!(matches!(clauses[1], Clause::CreatedAfter(_, false)));
        assert!(matches!(&clauses[2], Clause::NameContains(n) if n == "weather"));
        assert!(parse_filter("").expect("parses").is_empty());
        assert!(
            matches!(&parse_filter("displayName = 'it''s'").expect("parses")[0], Clause::NameContains(n) if n == "it's")
        );
        for bad in [
            "type",
            "type =",
            "color = 'red'",
            "type = 'a' OR type = 'b'",
            "createdAfter > 'yesterday'",
            "displayName = 'open",
            "displayName > 'a'",
        ] {
            assert!(parse_filter(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn orders_parse() {
        assert_eq!(
            parse_order(Some("updatedAt DESC, displayName")).expect("parses"),
            vec![(OrderKey::UpdatedAt, true), (OrderKey::DisplayName, false)]
        );
        assert!(parse_order(Some("score")).is_err());
        assert!(parse_order(Some("name sideways")).is_err());
    }
}
