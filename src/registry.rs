//! The application core: the only way to read or write registry agents.
//!
//! `Registry` owns the store and the search index. Every write commits to the store (which
//! logs it in the change log) and then applies the result to this process's index, in one
//! place, so "a write is searchable when its request returns" holds by construction. Other
//! processes' writes reach the index through the change-log follower (`follow`), which
//! `Registry::new` starts. The handlers, the A2A skills, the playground, the hosted agents'
//! registration and the CLI all call this type; it knows nothing of HTTP.

use std::collections::HashMap;
use std::sync::Arc;

use crate::domain::access::{Actor, SYSTEM_OWNER};
use crate::domain::{AgentDraft, FieldError};
use crate::search::embed::Embedder;
use crate::search::text::TextStats;
use crate::search::{SearchError, SearchIndex, SearchPage, SearchRequest, VectorProgress};
use crate::store::{Agent, AgentState, Change, ChangeKind, Store, StoreError, VerificationLevel};
use crate::task::AbortOnDrop;
use crate::timestamp::Timestamp;

/// Package names under this prefix belong to the registry's own agents.
pub const RESERVED_PREFIX: &str = "registry.";

/// Why a registry operation failed, as a caller needs to tell it apart.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// No agent has this id or package name (or none the caller may see).
    #[error("no agent with id or package name '{0}'")]
    NotFound(String),
    /// The agent exists but belongs to another owner.
    #[error("this agent belongs to another owner")]
    NotOwner,
    /// The input is not a valid agent (every invalid field).
    #[error("invalid agent")]
    Invalid(Vec<FieldError>),
    /// A search on a registry opened without an index (`Registry::offline`).
    #[error("this registry has no search index")]
    Offline,
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Search(#[from] SearchError),
}

pub type RegistryResult<T> = Result<T, RegistryError>;

/// What `import` did with one agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Imported {
    Created,
    Updated,
    Unchanged,
}

/// How `import` treats agents that exist already and new ones.
#[derive(Debug, Clone, Copy, Default)]
pub struct ImportMode {
    /// Update an existing agent of the same owner (otherwise it is refused).
    pub update: bool,
    /// Make created and updated agents ACTIVE.
    pub go_live: bool,
}

/// When a starting index gets its vectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vectors {
    /// Before `Registry::open` returns (tests and tools want the finished index).
    Wait,
    /// In the background: searches rank by keywords until every agent has its vector.
    Background,
}

/// The registry core. Cheap to share behind an `Arc`.
pub struct Registry {
    store: Arc<dyn Store>,
    /// `None` for offline tools (the CLI): their writes reach serving processes through the
    /// change log.
    index: Option<Arc<SearchIndex>>,
    /// Applies other processes' writes to `index`; stops when the registry is dropped.
    _follower: Option<AbortOnDrop>,
    /// Gives a starting index its vectors in the background, if that still runs.
    _vector_fill: Option<AbortOnDrop>,
}

impl Registry {
    /// Load the ACTIVE agents into a new search index ranked with `embedder` (keywords only
    /// without one) and serve it. With `Vectors::Background` this returns as soon as the keyword
    /// index is built; the agents' vectors are loaded or computed behind it.
    pub async fn open(
        store: Arc<dyn Store>,
        embedder: Option<Arc<dyn Embedder>>,
        vectors: Vectors,
    ) -> anyhow::Result<Self> {
        let index = Arc::new(SearchIndex::new(Arc::clone(&store), embedder)?);
        // Read the log position before the agents: a write landing in between is then
        // replayed by the follower rather than missed.
        let cursor = store.latest_change().await?;
        index
            .rebuild_keyword(&store.all_agents(Some(AgentState::Active)).await?)
            .await?;
        let vector_fill = match vectors {
            Vectors::Wait => {
                index.fill_vectors().await?;
                None
            }
            Vectors::Background => {
                let index = Arc::clone(&index);
                Some(AbortOnDrop::new(tokio::spawn(async move {
                    if let Err(err) = index.fill_vectors().await {
                        tracing::error!(error = %err, "cannot load the agents' vectors; keyword ranking only");
                    }
                })))
            }
        };
        let mut registry = Self::new(store, index, cursor);
        registry._vector_fill = vector_fill;
        Ok(registry)
    }

    /// A registry that serves searches from `index`, which must already hold the ACTIVE agents
    /// as of change `cursor`. Writes made by other processes after `cursor` reach the index
    /// through the change log for as long as the registry lives.
    pub fn new(store: Arc<dyn Store>, index: Arc<SearchIndex>, cursor: i64) -> Self {
        let follower = crate::follow::spawn(Arc::clone(&store), Arc::clone(&index), cursor);
        Self {
            store,
            index: Some(index),
            _follower: Some(follower),
            _vector_fill: None,
        }
    }

    /// A registry without a search index, for command-line tools: writes are logged in the
    /// change log, and every serving process applies them to its own index.
    pub fn offline(store: Arc<dyn Store>) -> Self {
        Self {
            store,
            index: None,
            _follower: None,
            _vector_fill: None,
        }
    }

    // ---- reads ----

    /// An agent in any state, by id or package name.
    pub async fn find(&self, identifier: &str) -> RegistryResult<Option<Agent>> {
        Ok(self.store.find_agent(identifier.trim()).await?)
    }

    /// An ACTIVE agent by id or package name; `NotFound` for unknown and STAGE agents alike.
    pub async fn find_active(&self, identifier: &str) -> RegistryResult<Agent> {
        match self.find(identifier).await? {
            Some(agent) if agent.state == AgentState::Active => Ok(agent),
            _ => Err(RegistryError::NotFound(identifier.to_owned())),
        }
    }

    /// An agent `actor` may manage: `NotFound` when unknown, `NotOwner` when another owner's.
    pub async fn find_owned(&self, identifier: &str, actor: &Actor) -> RegistryResult<Agent> {
        let agent = self
            .find(identifier)
            .await?
            .ok_or_else(|| RegistryError::NotFound(identifier.to_owned()))?;
        if !actor.owns(&agent.owner) {
            return Err(RegistryError::NotOwner);
        }
        Ok(agent)
    }

    /// `actor`'s agents in every state (every agent for the master key), by id, after `after`,
    /// at most `limit`.
    pub async fn list_owned(
        &self,
        actor: &Actor,
        after: Option<&str>,
        limit: u32,
    ) -> RegistryResult<Vec<Agent>> {
        let owner = (!actor.is_master).then_some(actor.owner.as_str());
        Ok(self.store.list_agents(owner, after, limit).await?)
    }

    /// Every agent, in any state (export).
    pub async fn all(&self) -> RegistryResult<Vec<Agent>> {
        Ok(self.store.all_agents(None).await?)
    }

    /// Public changes after change `since`, oldest first, at most `limit`, each with the agent
    /// as it is now when the change is not a tombstone and the agent is still ACTIVE (a later
    /// tombstone follows otherwise). Each agent is read once per page.
    pub async fn public_changes(
        &self,
        since: i64,
        limit: u32,
    ) -> RegistryResult<Vec<(Change, Option<Agent>)>> {
        let changes = self.store.public_changes_since(since, limit).await?;
        let mut current: HashMap<String, Option<Agent>> = HashMap::new();
        let mut page = Vec::with_capacity(changes.len());
        for change in changes {
            let tombstone = matches!(change.kind, ChangeKind::Unpublished | ChangeKind::Deleted);
            let agent = if tombstone {
                None
            } else {
                if !current.contains_key(&change.agent_id) {
                    let agent = self.store.find_agent(&change.agent_id).await?;
                    current.insert(change.agent_id.clone(), agent);
                }
                current
                    .get(&change.agent_id)
                    .and_then(Option::as_ref)
                    .filter(|agent| {
                        agent.id == change.agent_id && agent.state == AgentState::Active
                    })
                    .cloned()
            };
            page.push((change, agent));
        }
        Ok(page)
    }

    /// Run the one search function.
    pub async fn search(&self, request: &SearchRequest) -> RegistryResult<SearchPage> {
        match &self.index {
            Some(index) => Ok(index.search(request).await?),
            None => Err(RegistryError::Offline),
        }
    }

    // ---- writes ----

    /// Create an agent in STAGE for `actor`. The `registry.` namespace is the master key's.
    pub async fn publish(&self, draft: AgentDraft, actor: &Actor) -> RegistryResult<Agent> {
        check_namespace(&draft, actor)?;
        let agent = Agent::new(draft, &actor.owner, Timestamp::now());
        self.store.insert_agent(&agent).await?;
        self.apply(&agent).await;
        Ok(agent)
    }

    /// Replace the writable fields of an agent `actor` manages; with `expected_revision`, only
    /// if nobody wrote since. The package name cannot change.
    pub async fn update(
        &self,
        identifier: &str,
        draft: AgentDraft,
        expected_revision: Option<i64>,
        actor: &Actor,
    ) -> RegistryResult<Agent> {
        let current = self.find_owned(identifier, actor).await?;
        if draft.package_name != current.draft.package_name {
            return Err(RegistryError::Invalid(vec![FieldError::new(
                "package_name",
                format!(
                    "package_name cannot change (this agent is '{}')",
                    current.package_name()
                ),
            )]));
        }
        let agent = self
            .store
            .update_agent(&current.id, &draft, expected_revision, Timestamp::now())
            .await?;
        self.apply(&agent).await;
        Ok(agent)
    }

    /// Move an agent `actor` manages from state `from` to `to`.
    pub async fn transition(
        &self,
        identifier: &str,
        from: AgentState,
        to: AgentState,
        actor: &Actor,
    ) -> RegistryResult<Agent> {
        let current = self.find_owned(identifier, actor).await?;
        let agent = self
            .store
            .transition(&current.id, from, to, Timestamp::now())
            .await?;
        self.apply(&agent).await;
        Ok(agent)
    }

    /// Record that the agent's domain was verified.
    pub async fn mark_domain_verified(&self, agent: &Agent) -> RegistryResult<Agent> {
        let agent = self
            .store
            .set_verification(
                &agent.id,
                VerificationLevel::DomainVerified,
                Timestamp::now(),
            )
            .await?;
        self.apply(&agent).await;
        Ok(agent)
    }

    /// Delete an agent `actor` manages, in either state; its package name becomes free.
    pub async fn delete(&self, identifier: &str, actor: &Actor) -> RegistryResult<Agent> {
        let current = self.find_owned(identifier, actor).await?;
        if !self
            .store
            .delete_agent(&current.id, Timestamp::now())
            .await?
        {
            return Err(RegistryError::NotFound(identifier.to_owned()));
        }
        if let Some(index) = &self.index {
            index.delete(&current.id).await;
        }
        Ok(current)
    }

    /// Make sure one of the registry's own agents is registered, ACTIVE, verified and up to
    /// date. Safe to run from several processes at once.
    pub async fn ensure_system_agent(&self, draft: AgentDraft) -> RegistryResult<Agent> {
        let now = Timestamp::now();
        let store = self.store.as_ref();
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
                        .ok_or(StoreError::NotFound)?,
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
        self.apply(&agent).await;
        Ok(agent)
    }

    /// Import one agent for `owner`: create it, or (with `mode.update`) update the owner's
    /// agent of the same package name; with `mode.go_live`, make it ACTIVE.
    pub async fn import(
        &self,
        draft: AgentDraft,
        owner: &str,
        mode: ImportMode,
    ) -> RegistryResult<Imported> {
        let actor = Actor::owner(owner);
        check_namespace(&draft, &actor)?;
        let now = Timestamp::now();
        let taken = |existing: &Agent, message: &str| {
            RegistryError::Invalid(vec![FieldError::new(
                "package_name",
                format!("'{}' {message}", existing.package_name()),
            )])
        };
        let (agent, outcome) = match self.find(draft.package_name.as_str()).await? {
            None => {
                let mut agent = Agent::new(draft, owner, now);
                if mode.go_live {
                    agent.state = AgentState::Active;
                    agent.published_at = Some(now);
                }
                self.store.insert_agent(&agent).await?;
                self.apply(&agent).await;
                return Ok(Imported::Created);
            }
            Some(existing) if existing.owner != owner => {
                return Err(taken(&existing, "is registered to another owner"));
            }
            Some(existing) if !mode.update => {
                return Err(taken(
                    &existing,
                    "is already registered (--update updates it)",
                ));
            }
            Some(existing) if existing.draft == draft => (existing, Imported::Unchanged),
            Some(existing) => {
                let updated = self
                    .store
                    .update_agent(&existing.id, &draft, Some(existing.revision), now)
                    .await?;
                self.apply(&updated).await;
                (updated, Imported::Updated)
            }
        };
        if mode.go_live && agent.state == AgentState::Stage {
            let live = self
                .store
                .transition(&agent.id, AgentState::Stage, AgentState::Active, now)
                .await?;
            self.apply(&live).await;
            return Ok(Imported::Updated);
        }
        Ok(outcome)
    }

    // ---- the index, for readiness and metrics ----

    /// ACTIVE agents in this process's index.
    pub fn indexed(&self) -> usize {
        self.index.as_ref().map_or(0, |index| index.len())
    }

    /// The package names of the other ACTIVE agents that share `id`'s repository or endpoint
    /// (its duplicate group), best first.
    pub fn duplicates_of(&self, id: &str) -> Vec<String> {
        self.index
            .as_ref()
            .map(|index| index.duplicates_of(id))
            .unwrap_or_default()
    }

    /// How far the index's vectors are (offline: no embedder).
    pub fn vector_progress(&self) -> VectorProgress {
        self.index.as_ref().map_or(
            VectorProgress {
                none: true,
                ready: true,
                embedded: 0,
                total: 0,
            },
            |index| index.vector_progress(),
        )
    }

    /// The keyword index's segments and documents (offline: none).
    pub fn text_stats(&self) -> TextStats {
        self.index
            .as_ref()
            .map_or_else(TextStats::default, |index| index.text_stats())
    }

    pub fn embedder_id(&self) -> Option<&str> {
        self.index.as_ref().and_then(|index| index.embedder_id())
    }

    /// Apply a write's result to this process's index (nothing offline).
    async fn apply(&self, agent: &Agent) {
        if let Some(index) = &self.index {
            index.apply(agent).await;
        }
    }
}

/// The `registry.` namespace is reserved for the registry's own agents (and the master key).
fn check_namespace(draft: &AgentDraft, actor: &Actor) -> RegistryResult<()> {
    if draft.package_name.as_str().starts_with(RESERVED_PREFIX) && !actor.is_master {
        return Err(RegistryError::Invalid(vec![FieldError::new(
            "package_name",
            "the 'registry.' namespace is reserved for the registry's own agents",
        )]));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::SearchRequest;
    use crate::store::sqlite::SqliteStore;

    async fn store() -> (tempfile::TempDir, Arc<dyn Store>) {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = SqliteStore::open_dir(dir.path()).await.expect("store");
        (dir, Arc::new(store))
    }

    fn draft(package: &str, description: &str) -> AgentDraft {
        AgentDraft::parse(&serde_json::json!({
            "package_name": package,
            "name": "Sea agent",
            "description": description,
        }))
        .expect("draft")
    }

    fn query(text: &str) -> SearchRequest {
        SearchRequest {
            text: text.to_owned(),
            filters: Default::default(),
            sort: None,
            limit: 10,
            cursor: None,
            offset: 0,
            facets: false,
        }
    }

    async fn found(registry: &Registry, text: &str) -> Vec<String> {
        let page = registry.search(&query(text)).await.expect("search");
        page.hits
            .iter()
            .map(|hit| hit.listing.package_name.clone())
            .collect()
    }

    #[tokio::test]
    async fn every_write_is_searchable_or_gone_when_it_returns() {
        let (_dir, store) = store().await;
        let registry = Registry::open(store, None, Vectors::Wait)
            .await
            .expect("open");
        let alice = Actor::owner("alice");

        let agent = registry
            .publish(draft("com.example.sea", "Tide tables"), &alice)
            .await
            .expect("publish");
        assert!(
            found(&registry, "tide").await.is_empty(),
            "STAGE is not public"
        );

        registry
            .transition(&agent.id, AgentState::Stage, AgentState::Active, &alice)
            .await
            .expect("go live");
        assert_eq!(found(&registry, "tide").await, ["com.example.sea"]);

        registry
            .update(
                "com.example.sea",
                draft("com.example.sea", "Harbour currents"),
                None,
                &alice,
            )
            .await
            .expect("update");
        assert!(found(&registry, "tide").await.is_empty());
        assert_eq!(found(&registry, "harbour").await, ["com.example.sea"]);

        registry.delete(&agent.id, &alice).await.expect("delete");
        assert!(found(&registry, "harbour").await.is_empty());
        assert!(registry.find(&agent.id).await.expect("find").is_none());
    }

    #[tokio::test]
    async fn only_the_owner_or_the_master_key_manages_an_agent() {
        let (_dir, store) = store().await;
        let registry = Registry::open(store, None, Vectors::Wait)
            .await
            .expect("open");
        let agent = registry
            .publish(draft("com.example.sea", "Tides"), &Actor::owner("alice"))
            .await
            .expect("publish");

        let bob = Actor::owner("bob");
        assert!(matches!(
            registry.delete(&agent.id, &bob).await,
            Err(RegistryError::NotOwner)
        ));
        assert!(matches!(
            registry.find_owned("com.example.nothing", &bob).await,
            Err(RegistryError::NotFound(_))
        ));
        let owned = registry
            .find_owned(" com.example.sea ", &Actor::master())
            .await
            .expect("the master key owns everything");
        assert_eq!(owned.id, agent.id);
    }

    #[tokio::test]
    async fn the_registry_namespace_is_the_master_keys_on_every_way_in() {
        let (_dir, store) = store().await;
        let registry = Registry::offline(store);
        let reserved = || draft("registry.mine", "Mine");

        let published = registry.publish(reserved(), &Actor::owner("alice")).await;
        let imported = registry
            .import(reserved(), "alice", ImportMode::default())
            .await;
        for outcome in [published.map(|_| ()), imported.map(|_| ())] {
            let Err(RegistryError::Invalid(errors)) = outcome else {
                panic!("the reserved namespace was accepted: {outcome:?}");
            };
            assert_eq!(errors[0].field, "package_name");
        }
        registry
            .publish(reserved(), &Actor::master())
            .await
            .expect("the master key may");
    }

    #[tokio::test]
    async fn an_offline_registry_writes_through_the_change_log_and_does_not_search() {
        let (_dir, store) = store().await;
        let offline = Registry::offline(Arc::clone(&store));
        let mode = ImportMode {
            update: true,
            go_live: true,
        };
        let first = offline
            .import(draft("com.example.sea", "Tides"), "alice", mode)
            .await
            .expect("import");
        let again = offline
            .import(draft("com.example.sea", "Tides"), "alice", mode)
            .await
            .expect("import again");
        assert_eq!((first, again), (Imported::Created, Imported::Unchanged));
        assert!(matches!(
            offline.search(&query("tides")).await,
            Err(RegistryError::Offline)
        ));

        // A serving registry opened later (another process) finds what the tool wrote.
        let serving = Registry::open(store, None, Vectors::Wait)
            .await
            .expect("open");
        assert_eq!(found(&serving, "tides").await, ["com.example.sea"]);
    }
}
