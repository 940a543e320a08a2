//! Namespaces: the package-name prefixes an owner publishes under. With
//! `--namespace-policy owned`, publishing `com.example.weather` needs a namespace that covers it
//! (`com.example`, or `com.example.weather` itself) proven by its owner beforehand; a proof of a
//! namespace's domain covers its subdomains (`com.example` covers `com.example.hub.tools`).

use std::fmt;

use super::PackageName;
use super::urn::{SHARED_SUFFIXES, domain_labels};

/// A valid namespace: a package-name prefix of at least its registrable labels
/// (`com.example`, `io.github.alice`; never a shared suffix such as `io.github`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Namespace(String);

impl Namespace {
    /// Parses a namespace, trimmed and lowercased; the error is a human message.
    pub fn parse(input: &str) -> Result<Self, String> {
        let name = PackageName::parse(input)?;
        let labels: Vec<&str> = name.as_str().split('.').collect();
        let shared = SHARED_SUFFIXES.contains(&name.as_str());
        if shared || labels.len() < domain_labels(&labels) {
            return Err(format!(
                "'{name}' is shared by many owners: claim the namespace of your own name under \
                 it (for example {name}.yourname)"
            ));
        }
        Ok(Self(name.as_str().to_owned()))
    }

    /// The namespace a package name is claimed through: its registrable labels
    /// (`com.example.weather` → `com.example`, `io.github.alice.search` → `io.github.alice`).
    pub fn of_package(package: &PackageName) -> Self {
        let labels: Vec<&str> = package.as_str().split('.').collect();
        Self(labels[..domain_labels(&labels)].join("."))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The DNS domain that proves it: its labels reversed (`com.example.hub` →
    /// `hub.example.com`).
    pub fn domain(&self) -> String {
        self.0.split('.').rev().collect::<Vec<_>>().join(".")
    }

    /// Whether `package` is in it: the namespace itself or a name under it.
    pub fn covers(&self, package: &str) -> bool {
        covers(&self.0, package)
    }
}

impl fmt::Display for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Whether `package` is `namespace` or a name under it, ignoring ASCII case.
pub fn covers(namespace: &str, package: &str) -> bool {
    let package = package.trim().to_ascii_lowercase();
    let namespace = namespace.to_ascii_lowercase();
    package == namespace
        || package
            .strip_prefix(namespace.as_str())
            .is_some_and(|rest| rest.starts_with('.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_namespace_is_a_lowercase_package_name_prefix() {
        assert_eq!(
            Namespace::parse(" Com.Example ").expect("valid").as_str(),
            "com.example"
        );
        assert!(Namespace::parse("com").is_err());
        assert!(Namespace::parse("com..example").is_err());
        assert!(Namespace::parse("com.exa mple").is_err());
    }

    #[test]
    fn a_shared_suffix_is_nobody_s_namespace() {
        let refused = Namespace::parse("io.github").expect_err("shared");
        assert!(refused.contains("io.github.yourname"), "{refused}");
        assert!(Namespace::parse("io.github.alice").is_ok());
    }

    #[test]
    fn a_package_is_claimed_through_its_registrable_labels() {
        let of = |name: &str| {
            Namespace::of_package(&PackageName::parse(name).expect("valid"))
                .as_str()
                .to_owned()
        };
        assert_eq!(of("com.example.weather"), "com.example");
        assert_eq!(of("com.example.hub.tools"), "com.example");
        assert_eq!(of("io.github.alice.search"), "io.github.alice");
        assert_eq!(of("com.example"), "com.example");
    }

    #[test]
    fn a_namespace_covers_itself_and_names_under_it_on_label_boundaries() {
        let namespace = Namespace::parse("com.example").expect("valid");
        assert!(namespace.covers("com.example"));
        assert!(namespace.covers("com.example.hub.weather"));
        assert!(namespace.covers("COM.Example.weather"));
        assert!(!namespace.covers("com.examples.weather"));
        assert!(!namespace.covers("com"));
        assert_eq!(
            Namespace::parse("com.example.hub").expect("valid").domain(),
            "hub.example.com"
        );
    }
}
