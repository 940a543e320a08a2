//! Hosted utility agents (CONTRACT §7): each is one file implementing `HostedAgent`, and `all()`
//! is the one place they are registered. At start-up each becomes an ACTIVE, domain-verified
//! registry entry owned by the registry itself.

use serde_json::{Value, json};

use crate::auth::SYSTEM_OWNER;
use crate::domain::{AgentDraft, FieldError};
use crate::search::SearchIndex;
use crate::store::{Agent, AgentState, Store, StoreError, VerificationLevel};
use crate::timestamp::Timestamp;

mod finance;
mod reader;
mod wiki;

/// What the registry needs to know to list and describe a hosted agent.
pub trait HostedAgent: Send + Sync {
    /// Path segment under `/a2a/utility/`.
    fn slug(&self) -> &'static str;
    fn package_name(&self) -> &'static str;
    fn name(&self) -> &'static str;
    fn description(&self) -> &'static str;
    fn category(&self) -> &'static str;
    fn tags(&self) -> &'static [&'static str];
    /// `[{name, description, input_schema}]`.
    fn capabilities(&self) -> Value;
}

/// Every hosted agent, in one place.
pub fn all() -> Vec<Box<dyn HostedAgent>> {
    vec![
        Box::new(wiki::WikiAgent),
        Box::new(finance::FinanceAgent),
        Box::new(reader::ReaderAgent),
    ]
}

/// The hosted agent served under `/a2a/utility/{slug}`.
pub fn by_slug(slug: &str) -> Option<Box<dyn HostedAgent>> {
    all().into_iter().find(|agent| agent.slug() == slug)
}

/// The registry entry of a hosted agent, as a publish body would describe it.
pub fn draft(agent: &dyn HostedAgent, base_url: &str) -> Result<AgentDraft, Vec<FieldError>> {
    let slug = agent.slug();
    AgentDraft::parse(&json!({
        "package_name": agent.package_name(),
        "name": agent.name(),
        "description": agent.description(),
        "version": env!("CARGO_PKG_VERSION"),
        "manifest_url": format!("{base_url}/a2a/utility/{slug}/.well-known/agent-card.json"),
        "url": format!("{base_url}/a2a/utility/{slug}/v1"),
        "target": "Developers",
        "category": agent.category(),
        "tags": agent.tags(),
        "capabilities": agent.capabilities(),
        "payment": {"model": "free"},
    }))
}

/// Make sure every hosted agent is registered, ACTIVE, verified and up to date.
pub async fn register_all(
    store: &dyn Store,
    index: &SearchIndex,
    base_url: &str,
) -> anyhow::Result<()> {
    for agent in all() {
        let draft = draft(agent.as_ref(), base_url).map_err(|errors| {
            anyhow::anyhow!(
                "hosted agent {} is invalid: {errors:?}",
                agent.package_name()
            )
        })?;
        let registered = ensure_registered(store, draft).await?;
        index.apply(&registered);
    }
    Ok(())
}

async fn ensure_registered(store: &dyn Store, draft: AgentDraft) -> anyhow::Result<Agent> {
    let now = Timestamp::now();
    let mut agent = match store.find_agent(draft.package_name.as_str()).await? {
        Some(existing) if existing.draft == draft => existing,
        Some(existing) => store.update_agent(&existing.id, &draft, None, now).await?,
        None => {
            let mut agent = Agent::new(draft, SYSTEM_OWNER, now);
            agent.state = AgentState::Active;
            agent.verification_level = VerificationLevel::DomainVerified;
            agent.published_at = Some(now);
            match store.insert_agent(&agent).await {
                Ok(()) => agent,
                // Another process registered it first.
                Err(StoreError::Conflict(_)) => store
                    .find_agent(agent.package_name())
                    .await?
                    .ok_or_else(|| anyhow::anyhow!("hosted agent vanished while registering"))?,
                Err(err) => return Err(err.into()),
            }
        }
    };
    if agent.state != AgentState::Active {
        agent = store
            .transition(&agent.id, AgentState::Stage, AgentState::Active, now)
            .await?;
    }
    if agent.verification_level != VerificationLevel::DomainVerified {
        agent = store
            .set_verification(&agent.id, VerificationLevel::DomainVerified, now)
            .await?;
    }
    Ok(agent)
}
