//! `PackageName`: the unique, reverse-domain name of an agent (`com.example.weather`).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Most characters a package name may have.
const MAX_LEN: usize = 200;
/// Fewest dot-separated labels.
const MIN_LABELS: usize = 2;
/// Most dot-separated labels.
const MAX_LABELS: usize = 16;

/// A valid, lowercase, reverse-domain package name such as `com.example.weather`.
///
/// Rules: 2–16 dot-separated labels, each made of `[a-z0-9]` with `-` or `_`
/// allowed inside (never first or last), at most 200 characters in all.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, utoipa::ToSchema)]
#[schema(value_type = String, example = "com.example.weather")]
pub struct PackageName(String);

impl PackageName {
    /// Parses a package name, trimming it and lowercasing ASCII letters first
    /// (`Com.Example.Weather` is `com.example.weather`). The error is a human message.
    pub fn parse(input: &str) -> Result<Self, String> {
        let name = input.trim().to_ascii_lowercase();
        if name.is_empty() {
            return Err("must not be empty".to_owned());
        }
        let length = name.chars().count();
        if length > MAX_LEN {
            return Err(format!(
                "must be at most {MAX_LEN} characters (got {length})"
            ));
        }
        let labels: Vec<&str> = name.split('.').collect();
        if !(MIN_LABELS..=MAX_LABELS).contains(&labels.len()) {
            return Err(format!(
                "must have {MIN_LABELS} to {MAX_LABELS} dot-separated labels, like com.example.agent"
            ));
        }
        for label in &labels {
            check_label(label)?;
        }
        Ok(Self(name))
    }

    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The DNS domain the package names: its registrable domain, the first two labels
    /// reversed (`com.example.weather` → `example.com`), or three under a suffix where anyone
    /// can hold a name (`io.github.alice.search` → `alice.github.io`; see `domain::urn`).
    pub fn domain(&self) -> String {
        let labels: Vec<&str> = self.0.split('.').collect();
        let split = super::urn::domain_labels(&labels);
        labels[..split]
            .iter()
            .rev()
            .copied()
            .collect::<Vec<_>>()
            .join(".")
    }
}

/// Checks one dot-separated label.
fn check_label(label: &str) -> Result<(), String> {
    if label.is_empty() {
        return Err("must not have empty labels (no leading, trailing or double dots)".to_owned());
    }
    if let Some(bad) = label
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-' || *c == '_'))
    {
        return Err(format!(
            "label '{label}' has the character '{bad}'; only a-z, 0-9, '-' and '_' are allowed"
        ));
    }
    let is_separator = |c: char| c == '-' || c == '_';
    if label.starts_with(is_separator) || label.ends_with(is_separator) {
        return Err(format!(
            "label '{label}' must start and end with a letter or digit"
        ));
    }
    Ok(())
}

impl fmt::Display for PackageName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for PackageName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Serialize for PackageName {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for PackageName {
    /// Deserializing parses, so a stored or received name is valid too.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(deserializer)?;
        Self::parse(&raw).map_err(serde::de::Error::custom)
    }
}

/// The MCP name of a package name (as the MCP Registry names servers): the last label after
/// `/`, `_` in the namespace written `-` (`io.my_org.tool` → `io.my-org/tool`).
pub fn mcp_name(package: &str) -> String {
    match package.rsplit_once('.') {
        Some((namespace, name)) => format!("{}/{name}", namespace.replace('_', "-")),
        None => package.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(input: &str) -> Result<PackageName, String> {
        PackageName::parse(input)
    }

    #[test]
    fn a_reverse_domain_name_parses() {
        assert_eq!(
            parse("com.example.weather")
                .expect("should succeed")
                .as_str(),
            "com.example.weather"
        );
    }

    #[test]
    fn input_is_trimmed_and_lowercased() {
        assert_eq!(
            parse("  Com.Example.Weather ")
                .expect("should succeed")
                .as_str(),
            "com.example.weather"
        );
    }

    #[test]
    fn two_labels_are_enough_and_one_is_not() {
        assert!(parse("example.com").is_ok());
        assert!(parse("example").is_err());
    }

    #[test]
    fn sixteen_labels_are_allowed_and_seventeen_are_not() {
        let sixteen = vec!["a"; 16].join(".");
        let seventeen = vec!["a"; 17].join(".");
        assert!(parse(&sixteen).is_ok());
        assert!(parse(&seventeen).is_err());
    }

    #[test]
    fn two_hundred_characters_are_allowed_and_more_are_not() {
        let ok = format!("com.{}", "a".repeat(196));
        let too_long = format!("com.{}", "a".repeat(197));
        assert_eq!(ok.len(), 200);
        assert!(parse(&ok).is_ok());
        assert!(parse(&too_long).expect_err("should fail").contains("200"));
    }

    #[test]
    fn inner_dashes_and_underscores_are_allowed() {
        assert!(parse("com.my-company.weather_bot2").is_ok());
    }

    #[test]
    fn labels_cannot_start_or_end_with_a_separator() {
        assert!(parse("com.-example.weather").is_err());
        assert!(parse("com.example-.weather").is_err());
        assert!(parse("com._example.weather").is_err());
        assert!(parse("com.example.weather_").is_err());
    }

    #[test]
    fn empty_labels_are_rejected() {
        assert!(parse("com..weather").is_err());
        assert!(parse(".com.example").is_err());
        assert!(parse("com.example.").is_err());
    }

    #[test]
    fn other_characters_are_rejected() {
        for bad in [
            "com.exa mple.x",
            "com.example/x",
            "com.exämple.x",
            "com.ex@mple.x",
        ] {
            assert!(parse(bad).is_err(), "{bad} should be rejected");
        }
    }

    #[test]
    fn a_unicode_letter_that_lowercases_to_ascii_is_still_rejected() {
        // U+212A KELVIN SIGN lowercases to 'k' under Unicode rules.
        assert!(parse("com.\u{212A}ite.x").is_err());
    }

    #[test]
    fn empty_and_blank_input_is_rejected() {
        assert!(parse("").is_err());
        assert!(parse("   ").is_err());
    }

    #[test]
    fn domain_reverses_the_registrable_labels() {
        assert_eq!(
            parse("com.example.weather")
                .expect("should succeed")
                .domain(),
            "example.com"
        );
        assert_eq!(
            parse("io.github.owner.repo")
                .expect("should succeed")
                .domain(),
            "owner.github.io"
        );
        assert_eq!(
            parse("io.github").expect("should succeed").domain(),
            "github.io"
        );
        assert_eq!(
            parse("org.example").expect("should succeed").domain(),
            "example.org"
        );
    }

    #[test]
    fn display_and_as_ref_give_the_canonical_name() {
        let name = parse("Com.Example.X").expect("should succeed");
        assert_eq!(name.to_string(), "com.example.x");
        assert_eq!(name.as_ref(), "com.example.x");
    }

    #[test]
    fn it_serializes_as_a_plain_string() {
        let name = parse("com.example.x").expect("should succeed");
        assert_eq!(
            serde_json::to_value(&name).expect("should succeed"),
            serde_json::json!("com.example.x")
        );
    }

    #[test]
    fn deserializing_parses() {
        let name: PackageName = serde_json::from_str("\"Com.Example.X\"").expect("should succeed");
        assert_eq!(name.as_str(), "com.example.x");
        assert!(serde_json::from_str::<PackageName>("\"nope\"").is_err());
    }
}
