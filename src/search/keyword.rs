//! Keyword matching: every query term must occur in some field; matches in the name, package
//! name and tags weigh more than matches in the description.

use crate::store::Agent;

/// The searchable text of one agent, lowercased once at index time.
pub struct DocText {
    name: String,
    package_name: String,
    tags: Vec<String>,
    category: String,
    description: String,
    capabilities: String,
}

impl DocText {
    pub fn of(agent: &Agent) -> Self {
        let draft = &agent.draft;
        let capabilities = draft
            .capabilities
            .iter()
            .map(|c| format!("{} {}", c.name, c.description))
            .collect::<Vec<_>>()
            .join(" ")
            .to_lowercase();
        Self {
            name: draft.name.to_lowercase(),
            package_name: agent.package_name().to_owned(),
            tags: draft.tags.clone(),
            category: draft.category.as_deref().unwrap_or_default().to_lowercase(),
            description: draft.description.to_lowercase(),
            capabilities,
        }
    }
}

/// Query text split into lowercase terms.
pub struct Query {
    terms: Vec<String>,
}

impl Query {
    pub fn parse(text: &str) -> Self {
        let terms = text
            .split(|c: char| !c.is_alphanumeric())
            .filter(|term| !term.is_empty())
            .map(str::to_lowercase)
            .take(32)
            .collect();
        Self { terms }
    }

    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// The score of `doc`, or `None` when some term occurs nowhere.
    pub fn score(&self, doc: &DocText) -> Option<f64> {
        self.terms.iter().try_fold(0.0, |total, term| {
            let term = term.as_str();
            let weight = [
                (doc.name.contains(term), 3.0),
                (doc.package_name.contains(term), 2.0),
                (doc.tags.iter().any(|tag| tag.contains(term)), 2.0),
                (doc.category.contains(term), 1.5),
                (doc.description.contains(term), 1.0),
                (doc.capabilities.contains(term), 1.0),
            ]
            .into_iter()
            .filter_map(|(hit, weight)| hit.then_some(weight))
            .sum::<f64>();
            (weight > 0.0).then_some(total + weight)
        })
    }
}
