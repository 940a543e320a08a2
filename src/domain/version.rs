//! Agent versions: the default, semantic-version precedence, and what version a change gets.
//!
//! A version is the publisher's string. When it is a semantic version (`MAJOR.MINOR.PATCH`, an
//! optional `-pre.release` and `+build`, as semver.org 2.0.0 spells it; no leading `v`), the
//! registry can order it and bump it; any other string is kept as given and never compared.

use std::cmp::Ordering;
use std::fmt;

/// The version of an agent published without one.
pub const DEFAULT_VERSION: &str = "1.0.0";

/// A parsed semantic version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Semver {
    pub major: u64,
    pub minor: u64,
    pub patch: u64,
    /// Pre-release identifiers; empty for a release.
    pre: Vec<PreId>,
    /// Build metadata, without its `+`; ignored by precedence.
    build: Option<String>,
}

/// One dot-separated pre-release identifier.
#[derive(Debug, Clone, PartialEq, Eq)]
enum PreId {
    Numeric(u64),
    Alpha(String),
}

impl Semver {
    /// `text` as a semantic version, or `None` when it is not one.
    pub fn parse(text: &str) -> Option<Self> {
        let (rest, build) = match text.split_once('+') {
            Some((rest, build)) => {
                let valid = build
                    .split('.')
                    .all(|id| !id.is_empty() && id.bytes().all(is_id_byte));
                if !valid {
                    return None;
                }
                (rest, Some(build.to_owned()))
            }
            None => (text, None),
        };
        let (core, pre) = match rest.split_once('-') {
            Some((core, pre)) => (core, Some(pre)),
            None => (rest, None),
        };
        let mut numbers = core.split('.').map(number);
        let (major, minor, patch) = (numbers.next()??, numbers.next()??, numbers.next()??);
        if numbers.next().is_some() {
            return None;
        }
        let pre = match pre {
            None => Vec::new(),
            Some(pre) => pre.split('.').map(pre_id).collect::<Option<Vec<_>>>()?,
        };
        Some(Self {
            major,
            minor,
            patch,
            pre,
            build,
        })
    }

    /// Semantic-version precedence: numbers in order, a pre-release below its release,
    /// pre-release identifiers compared one by one; build metadata does not count.
    pub fn precedence(&self, other: &Self) -> Ordering {
        (self.major, self.minor, self.patch)
            .cmp(&(other.major, other.minor, other.patch))
            .then_with(|| match (self.pre.is_empty(), other.pre.is_empty()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                (false, false) => compare_pre(&self.pre, &other.pre),
            })
    }

    /// The next patch release: the patch number plus one, without pre-release or build
    /// (`1.2.3` and `1.2.3-rc.1+b7` both become `1.2.4`). `None` when the patch number is at
    /// its maximum.
    pub fn next_patch(&self) -> Option<Self> {
        Some(Self {
            patch: self.patch.checked_add(1)?,
            pre: Vec::new(),
            build: None,
            ..*self
        })
    }
}

impl fmt::Display for Semver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)?;
        for (i, id) in self.pre.iter().enumerate() {
            f.write_str(if i == 0 { "-" } else { "." })?;
            match id {
                PreId::Numeric(n) => write!(f, "{n}")?,
                PreId::Alpha(s) => f.write_str(s)?,
            }
        }
        if let Some(build) = &self.build {
            write!(f, "+{build}")?;
        }
        Ok(())
    }
}

fn is_id_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-'
}

/// A numeric identifier: digits, no leading zero (except `0` itself), within `u64`.
fn number(text: &str) -> Option<u64> {
    let digits = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    let leading_zero = text.len() > 1 && text.starts_with('0');
    (digits && !leading_zero).then(|| text.parse().ok())?
}

fn pre_id(text: &str) -> Option<PreId> {
    if text.is_empty() || !text.bytes().all(is_id_byte) {
        return None;
    }
    if text.bytes().all(|b| b.is_ascii_digit()) {
        number(text).map(PreId::Numeric)
    } else {
        Some(PreId::Alpha(text.to_owned()))
    }
}

fn compare_pre(left: &[PreId], right: &[PreId]) -> Ordering {
    for (a, b) in left.iter().zip(right) {
        let order = match (a, b) {
            (PreId::Numeric(a), PreId::Numeric(b)) => a.cmp(b),
            (PreId::Numeric(_), PreId::Alpha(_)) => Ordering::Less,
            (PreId::Alpha(_), PreId::Numeric(_)) => Ordering::Greater,
            (PreId::Alpha(a), PreId::Alpha(b)) => a.cmp(b),
        };
        if order != Ordering::Equal {
            return order;
        }
    }
    left.len().cmp(&right.len())
}

/// Why a change cannot take the version its body names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionConflict {
    /// Both are semantic versions and the named one is lower than the current.
    #[error("version '{named}' is lower than the current version '{current}'")]
    Lower { named: String, current: String },
    /// The named version was published before and has been superseded; its record is kept
    /// as it was.
    #[error("version '{named}' was published before; an earlier version cannot be replaced")]
    Superseded { named: String },
}

/// The version a change to an agent at version `current` gets, when its body names `named`
/// (`None`: the body names none) and `earlier` are the versions the agent had before `current`.
///
/// - No version, or the current one again: the next patch when `current` is a semantic version
///   (skipping any that `earlier` holds), else `current` itself, whose record the change then
///   replaces.
/// - Another version: taken as given, unless both are semantic versions and it is lower than
///   `current`, or it is one of `earlier`.
pub fn next_version(
    current: &str,
    named: Option<&str>,
    earlier: &[String],
) -> Result<String, VersionConflict> {
    let was_earlier = |version: &str| earlier.iter().any(|e| e == version);
    match named {
        None => Ok(bumped(current, was_earlier)),
        Some(named) if named == current => Ok(bumped(current, was_earlier)),
        Some(named) => {
            let lower = match (Semver::parse(named), Semver::parse(current)) {
                (Some(named), Some(current)) => named.precedence(&current) == Ordering::Less,
                _ => false,
            };
            if lower {
                return Err(VersionConflict::Lower {
                    named: named.to_owned(),
                    current: current.to_owned(),
                });
            }
            if was_earlier(named) {
                return Err(VersionConflict::Superseded {
                    named: named.to_owned(),
                });
            }
            Ok(named.to_owned())
        }
    }
}

/// The next patch of `current` that is not `taken`, or `current` when it cannot be bumped.
fn bumped(current: &str, taken: impl Fn(&str) -> bool) -> String {
    let Some(mut next) = Semver::parse(current).and_then(|v| v.next_patch()) else {
        return current.to_owned();
    };
    while taken(&next.to_string()) {
        match next.next_patch() {
            Some(after) => next = after,
            None => return current.to_owned(),
        }
    }
    next.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(text: &str) -> Semver {
        Semver::parse(text).unwrap_or_else(|| panic!("{text} is semver"))
    }

    #[test]
    fn semantic_versions_parse_and_print_back() {
        for text in [
            "0.0.0",
            "1.2.3",
            "10.20.30",
            "1.0.0-alpha",
            "1.0.0-alpha.1",
            "1.0.0-0.3.7",
            "1.0.0-x.7.z.92",
            "1.0.0-x-y-z.--",
            "1.0.0+20130313144700",
            "1.0.0-beta+exp.sha.5114f85",
            "1.0.0+21AF26D3----117B344092BD",
            "18446744073709551615.0.0",
        ] {
            assert_eq!(v(text).to_string(), text);
        }
    }

    #[test]
    fn other_strings_are_not_semantic_versions() {
        for text in [
            "",
            "1",
            "1.2",
            "1.2.3.4",
            "v1.2.3",
            "01.2.3",
            "1.02.3",
            "1.2.03",
            "1.2.3-",
            "1.2.3-01",
            "1.2.3-a..b",
            "1.2.3+",
            "1.2.3+a..b",
            "1.2.3-a_b",
            " 1.2.3",
            "1.2.x",
            "beta",
            "2024-06-01",
            "18446744073709551616.0.0",
        ] {
            assert_eq!(Semver::parse(text), None, "{text}");
        }
    }

    #[test]
    fn precedence_follows_semver_org() {
        let ordered = [
            "1.0.0-alpha",
            "1.0.0-alpha.1",
            "1.0.0-alpha.beta",
            "1.0.0-beta",
            "1.0.0-beta.2",
            "1.0.0-beta.11",
            "1.0.0-rc.1",
            "1.0.0",
            "1.0.1",
            "1.1.0",
            "1.10.0",
            "2.0.0",
        ];
        for pair in ordered.windows(2) {
            assert_eq!(
                v(pair[0]).precedence(&v(pair[1])),
                Ordering::Less,
                "{pair:?}"
            );
            assert_eq!(v(pair[1]).precedence(&v(pair[0])), Ordering::Greater);
        }
        assert_eq!(v("1.0.0+a").precedence(&v("1.0.0+b")), Ordering::Equal);
    }

    #[test]
    fn the_next_patch_drops_pre_release_and_build() {
        assert_eq!(
            v("1.2.3").next_patch().map(|n| n.to_string()).as_deref(),
            Some("1.2.4")
        );
        assert_eq!(
            v("1.2.3-rc.1+b7")
                .next_patch()
                .map(|n| n.to_string())
                .as_deref(),
            Some("1.2.4")
        );
        assert_eq!(v("0.0.18446744073709551615").next_patch(), None);
    }

    #[test]
    fn a_change_naming_no_version_or_the_current_one_bumps_the_patch() {
        assert_eq!(next_version("1.2.3", None, &[]), Ok("1.2.4".to_owned()));
        assert_eq!(
            next_version("1.2.3", Some("1.2.3"), &[]),
            Ok("1.2.4".to_owned())
        );
        assert_eq!(
            next_version("1.0.0-rc.1", None, &[]),
            Ok("1.0.1".to_owned())
        );
        let earlier = ["1.2.4".to_owned(), "1.2.5".to_owned()];
        assert_eq!(
            next_version("1.2.3", None, &earlier),
            Ok("1.2.6".to_owned()),
            "a version the agent had before is skipped"
        );
    }

    #[test]
    fn a_version_that_is_not_semver_stays_as_it_is() {
        assert_eq!(next_version("beta", None, &[]), Ok("beta".to_owned()));
        assert_eq!(next_version("v2", Some("v2"), &[]), Ok("v2".to_owned()));
        assert_eq!(
            next_version("0.0.18446744073709551615", None, &[]),
            Ok("0.0.18446744073709551615".to_owned()),
            "no patch above the largest"
        );
    }

    #[test]
    fn a_named_version_is_taken_unless_lower_or_superseded() {
        assert_eq!(
            next_version("1.2.3", Some("2.0.0"), &[]),
            Ok("2.0.0".to_owned())
        );
        assert_eq!(
            next_version("1.2.3", Some("1.2.10"), &[]),
            Ok("1.2.10".to_owned())
        );
        assert_eq!(
            next_version("beta", Some("1.0.0"), &[]),
            Ok("1.0.0".to_owned())
        );
        assert_eq!(
            next_version("1.2.3", Some("gamma"), &[]),
            Ok("gamma".to_owned())
        );
        assert_eq!(
            next_version("1.2.3", Some("1.2.2"), &[]),
            Err(VersionConflict::Lower {
                named: "1.2.2".to_owned(),
                current: "1.2.3".to_owned()
            })
        );
        assert!(matches!(
            next_version("1.2.3", Some("1.2.3-rc.1"), &[]),
            Err(VersionConflict::Lower { .. })
        ));
        assert_eq!(
            next_version("beta", Some("alpha"), &["alpha".to_owned()]),
            Err(VersionConflict::Superseded {
                named: "alpha".to_owned()
            })
        );
    }
}
