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

use crate::config::{NamespacePolicy, ScanPolicy};
use crate::domain::access::{Actor, MIRROR_PREFIX, SYSTEM_OWNER, Viewer, is_mirror_owner};
use crate::domain::deprecation::Deprecation;
use crate::domain::health::{ProbeOutcome, ProbeTarget};
use crate::domain::namespace::{Namespace, covers};
use crate::domain::scan::{self, Finding, Severity};
use crate::domain::trusted_issuer::in_namespaces;
use crate::domain::version::{self, VersionConflict};
use crate::domain::{AgentDraft, FieldError, Health, HealthStatus, PackageName};
use crate::embed::Embedder;
use crate::search::text::TextStats;
use crate::search::{Hit, SearchError, SearchIndex, SearchPage, SearchRequest, VectorProgress};
use crate::store::{
    Agent, AgentState, AgentVersion, BindingRecord, Change, ChangeKind, MirrorPage, MirrorWritten,
    NamespaceRecord, Store, StoreError, TransferRecord, TransferStatus, VerificationLevel,
};
use crate::task::AbortOnDrop;
use crate::timestamp::Timestamp;

/// Give agents written before identifiers existed theirs, derived from their package names as
/// at publish (and made unique the same way). Safe to run from several processes at once.
async fn assign_missing_identifiers(store: &dyn Store) -> RegistryResult<usize> {
    let mut assigned = 0;
    loop {
        let missing = store.agents_missing_urn(500).await?;
        let before = assigned;
        for (id, package_name) in missing {
            let urn = match crate::domain::PackageName::parse(&package_name) {
                Ok(package) => crate::domain::AirUrn::of_package(&package),
                // Not a name this program can read: left to the program that wrote it.
                Err(_) => continue,
            };
            match store.set_urn(&id, urn.as_str()).await {
                Err(StoreError::IdentifierTaken(_)) => {
                    let suffixed = urn.with_suffix(&id.to_ascii_lowercase());
                    store.set_urn(&id, suffixed.as_str()).await?;
                }
                other => other?,
            }
            assigned += 1;
        }
        if assigned == before {
            return Ok(assigned);
        }
    }
}

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
    /// The caller may write only in some namespaces (a token minted by trusted publishing),
    /// and the package is in none of them.
    #[error(
        "'{package}' is not in a namespace this token may write: it may write {} and the packages beneath {}",
        namespaces.join(", "),
        if namespaces.len() == 1 { "it" } else { "them" }
    )]
    NamespaceNotGranted {
        package: String,
        namespaces: Vec<String>,
    },
    /// The registry runs with `--namespace-policy owned` and the owner holds no namespace that
    /// covers the package.
    #[error(
        "publishing '{package}' needs the namespace '{namespace}', which its owner does not hold: \
         claim it with POST /api/namespaces {{\"namespace\": \"{namespace}\"}}, put the token it \
         answers in a DNS TXT record or the well-known file of {domain}, then POST \
         /api/namespaces/{namespace}/verify (or publish with a CI identity that grants it, or \
         ask the operator to assign it)"
    )]
    NamespaceNotOwned {
        package: String,
        namespace: String,
        domain: String,
    },
    /// A token minted by trusted publishing writes a package bound to other CI identities.
    #[error(
        "'{package}' is bound to {}: a token minted from another repository or workflow may not write it",
        bound.join(", ")
    )]
    BindingMismatch { package: String, bound: Vec<String> },
    /// The registry runs with `--scan-policy block` and the scanner found something at `high`
    /// or above in the draft.
    #[error("the scanner refused this agent: {}", findings.iter().map(|f| format!("{} ({}, {})", f.field, f.rule, f.severity.as_str())).collect::<Vec<_>>().join("; "))]
    SecurityFinding { findings: Vec<Finding> },
    /// The agent is a mirror's copy of an agent listed elsewhere: it changes at its source.
    #[error(
        "agent '{package}' is mirrored from {source_id}: it changes at its source, and only the master key may change it here"
    )]
    Mirrored { package: String, source_id: String },
    /// The input is not a valid agent (every invalid field).
    #[error("invalid agent")]
    Invalid(Vec<FieldError>),
    /// An update names a version it cannot have (lower than the current one, or superseded).
    #[error(transparent)]
    VersionConflict(#[from] VersionConflict),
    /// The agent has no version by this name.
    #[error("agent '{identifier}' has no version '{version}'")]
    VersionNotFound { identifier: String, version: String },
    /// No organisation has this name (or none the caller may see).
    #[error("no organisation '{0}'")]
    OrgNotFound(String),
    /// The caller is not an admin or a publisher of the organisation.
    #[error("only the admins and publishers of organisation '{0}' write its agents")]
    NotOrgPublisher(String),
    /// Only a transfer's receiver (an organisation's admin) accepts it.
    #[error("only the receiver of a transfer (for an organisation, one of its admins) accepts it")]
    NotReceiver,
    /// No transfer by this id that the caller is a party to.
    #[error("no transfer '{0}'")]
    TransferNotFound(String),
    /// A search on a registry opened without an index (`Registry::offline`).
    #[error("this registry has no search index")]
    Offline,
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Search(#[from] SearchError),
}

pub type RegistryResult<T> = Result<T, RegistryError>;

/// How many times an update without an expected revision reads the agent again when another
/// write landed between its read and its own (the new version is computed from what it read).
const UPDATE_ATTEMPTS: usize = 8;

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
    /// Starts that fill (`start_vector_fill`): until then the start-up's own writes embed their
    /// agents without queueing behind every agent's embedding.
    vector_fill_start: std::sync::Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
    /// Saves a starting index's keyword index in the background, if that still runs.
    _text_save: Option<AbortOnDrop>,
    /// Whether publishing needs an owned namespace.
    namespace_policy: NamespacePolicy,
    /// Whether the scanner's findings refuse a write.
    scan_policy: ScanPolicy,
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
        Self::open_with_snapshots(store, embedder, vectors, None).await
    }

    /// `open`, keeping the vector index's snapshot in `snapshot_dir` (when given): a restart
    /// then loads the index instead of rebuilding it (see `SearchIndex::with_snapshot_dir`).
    pub async fn open_with_snapshots(
        store: Arc<dyn Store>,
        embedder: Option<Arc<dyn Embedder>>,
        vectors: Vectors,
        snapshot_dir: Option<std::path::PathBuf>,
    ) -> anyhow::Result<Self> {
        let mut index = SearchIndex::new(Arc::clone(&store), embedder)?;
        if let Some(dir) = snapshot_dir {
            index = index.with_snapshot_dir(dir);
        }
        let assigned = assign_missing_identifiers(store.as_ref()).await?;
        if assigned > 0 {
            tracing::info!(
                agents = assigned,
                "gave existing agents their discovery identifiers"
            );
        }
        // Read the log position before the agents: a write landing in between is then
        // replayed by the follower rather than missed.
        let cursor = store.latest_change().await?;
        index.load_catalogue().await?;
        let index = Arc::new(index);
        let mut text_save = None;
        let mut fill_start = None;
        let vector_fill = match vectors {
            Vectors::Wait => {
                index.fill_vectors().await?;
                if let Err(err) = index
                    .save_text_snapshot(crate::search::STARTUP_MERGE_WAIT)
                    .await
                {
                    tracing::warn!(error = %err, "cannot save the keyword index snapshot");
                }
                None
            }
            Vectors::Background => {
                let index = Arc::clone(&index);
                let saving = Arc::clone(&index);
                text_save = Some(AbortOnDrop::new(tokio::spawn(async move {
                    if let Err(err) = saving
                        .save_text_snapshot(crate::search::STARTUP_MERGE_WAIT)
                        .await
                    {
                        tracing::warn!(error = %err, "cannot save the keyword index snapshot");
                    }
                })));
                let (start, started) = tokio::sync::oneshot::channel::<()>();
                fill_start = Some(start);
                Some(AbortOnDrop::new(tokio::spawn(async move {
                    // Started, or its starter dropped: either way the fill runs.
                    let _ = started.await;
                    if let Err(err) = index.fill_vectors().await {
                        tracing::error!(error = %err, "cannot load the agents' vectors; keyword ranking only");
                    }
                })))
            }
        };
        let mut registry = Self::new(store, index, cursor);
        registry._vector_fill = vector_fill;
        registry.vector_fill_start = std::sync::Mutex::new(fill_start);
        registry._text_save = text_save;
        Ok(registry)
    }

    /// Start the background fill of a registry opened with `Vectors::Background`, once the
    /// start-up's own writes are done (a no-op otherwise, or the second time).
    pub fn start_vector_fill(&self) {
        let start = self
            .vector_fill_start
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(start) = start {
            let _ = start.send(());
        }
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
            vector_fill_start: std::sync::Mutex::new(None),
            _text_save: None,
            namespace_policy: NamespacePolicy::Open,
            scan_policy: ScanPolicy::Flag,
        }
    }

    /// The same registry under `policy` (`open` unless said).
    pub fn with_namespace_policy(mut self, policy: NamespacePolicy) -> Self {
        self.namespace_policy = policy;
        self
    }

    /// The same registry under scan policy `policy` (`flag` unless said).
    /// What the scanner's findings do to writes (`flag` or `block`).
    pub fn scan_policy(&self) -> ScanPolicy {
        self.scan_policy
    }

    pub fn with_scan_policy(mut self, policy: ScanPolicy) -> Self {
        self.scan_policy = policy;
        self
    }

    /// Whether publishing needs an owned namespace.
    pub fn namespace_policy(&self) -> NamespacePolicy {
        self.namespace_policy
    }

    /// A registry without a search index, for command-line tools: writes are logged in the
    /// change log, and every serving process applies them to its own index.
    pub fn offline(store: Arc<dyn Store>) -> Self {
        Self {
            store,
            index: None,
            _follower: None,
            namespace_policy: NamespacePolicy::Open,
            scan_policy: ScanPolicy::Flag,
            _vector_fill: None,
            vector_fill_start: std::sync::Mutex::new(None),
            _text_save: None,
        }
    }

    // ---- reads ----

    /// An agent in any state, by id or package name.
    pub async fn find(&self, identifier: &str) -> RegistryResult<Option<Agent>> {
        Ok(self.store.find_agent(identifier.trim()).await?)
    }

    /// An ACTIVE agent `viewer` may see, by id or package name; `NotFound` for unknown and
    /// STAGE agents alike, and for a private agent the viewer does not see.
    pub async fn find_active(&self, identifier: &str, viewer: &Viewer) -> RegistryResult<Agent> {
        match self.find(identifier).await? {
            Some(agent) if agent.state == AgentState::Active && agent.is_visible_to(viewer) => {
                Ok(agent)
            }
            _ => Err(RegistryError::NotFound(identifier.to_owned())),
        }
    }

    /// `NotOwner` for an agent `actor` may see but not manage; `NotFound` for a private agent
    /// it does not see at all (to it, that agent does not exist).
    async fn refuse(&self, agent: &Agent, identifier: &str, actor: &Actor) -> RegistryError {
        if agent.visibility() == crate::domain::agent::Visibility::Private {
            match self.store.viewer_of(actor).await {
                Ok(viewer) if agent.is_visible_to(&viewer) => {}
                Ok(_) => return RegistryError::NotFound(identifier.to_owned()),
                Err(err) => return err.into(),
            }
        }
        RegistryError::NotOwner
    }

    /// An agent `actor` may manage: `NotFound` when unknown, `NotOwner` when another owner's.
    pub async fn find_owned(&self, identifier: &str, actor: &Actor) -> RegistryResult<Agent> {
        let agent = self
            .find(identifier)
            .await?
            .ok_or_else(|| RegistryError::NotFound(identifier.to_owned()))?;
        if is_mirror_owner(&agent.owner) && !actor.is_master {
            return Err(RegistryError::Mirrored {
                package: agent.package_name().to_owned(),
                source_id: agent.owner[MIRROR_PREFIX.len()..].to_owned(),
            });
        }
        if !self.manages(actor, &agent.owner).await? {
            return Err(self.refuse(&agent, identifier, actor).await);
        }
        check_granted(agent.package_name(), actor)?;
        self.check_bound(agent.package_name(), actor).await?;
        Ok(agent)
    }

    /// An agent `actor` may read in any state: one it manages, or one of an organisation it is
    /// a viewer of. `NotFound` when unknown, `NotOwner` otherwise.
    pub async fn find_readable(&self, identifier: &str, actor: &Actor) -> RegistryResult<Agent> {
        let agent = self
            .find(identifier)
            .await?
            .ok_or_else(|| RegistryError::NotFound(identifier.to_owned()))?;
        if actor.owns(&agent.owner) || self.org_role(actor, &agent.owner).await?.is_some() {
            return Ok(agent);
        }
        self.find_owned(identifier, actor).await
    }

    /// Whether `actor` may write the agents of `owner`: its own (and those of the namespaces
    /// its identity grants), or an organisation's where it is an admin or a publisher.
    pub async fn manages(&self, actor: &Actor, owner: &str) -> RegistryResult<bool> {
        if actor.owns(owner) {
            return Ok(true);
        }
        Ok(self
            .org_role(actor, owner)
            .await?
            .is_some_and(crate::domain::org::OrgRole::writes))
    }

    /// `actor`'s role in the organisation `owner` stands for, if it is one and a member.
    pub async fn org_role(
        &self,
        actor: &Actor,
        owner: &str,
    ) -> RegistryResult<Option<crate::domain::org::OrgRole>> {
        let Some(org) = crate::domain::org::org_of_owner(owner) else {
            return Ok(None);
        };
        Ok(self
            .store
            .memberships_of(&actor.owner, &actor.granted)
            .await?
            .into_iter()
            .find(|member| member.org == org)
            .map(|member| member.role))
    }

    /// `actor`'s agents in every state (every agent for the master key), by id, after `after`,
    /// at most `limit`.
    pub async fn list_owned(
        &self,
        actor: &Actor,
        after: Option<&str>,
        limit: u32,
    ) -> RegistryResult<Vec<Agent>> {
        if actor.is_master {
            return Ok(self.store.list_agents(None, after, limit).await?);
        }
        // The actor's own agents, those of the namespaces its identity grants (a GitHub
        // organisation's, which every member manages), and its organisations'.
        let owners = self.owners_of(actor).await?;
        let owners: Vec<&str> = owners.iter().map(String::as_str).collect();
        Ok(self.store.list_agents(Some(&owners), after, limit).await?)
    }

    /// Every owner whose agents `actor` sees as its own: itself, the namespaces its identity
    /// grants, and the organisations it is a member of (`org:<name>`), sorted.
    async fn owners_of(&self, actor: &Actor) -> RegistryResult<Vec<String>> {
        let orgs = self
            .store
            .memberships_of(&actor.owner, &actor.granted)
            .await?;
        Ok(actor.owners_with(orgs.into_iter().map(|member| member.org)))
    }

    /// Every agent, in any state (export).
    pub async fn all(&self) -> RegistryResult<Vec<Agent>> {
        Ok(self.store.all_agents(None).await?)
    }

    /// Public changes after change `since`, and those of the private agents `viewer` sees,
    /// oldest first, at most `limit`, each with the agent as it is now when the change is not a
    /// tombstone and the agent is still listed to the viewer (a later tombstone follows
    /// otherwise). The page's agents are read in one query.
    pub async fn public_changes(
        &self,
        since: i64,
        limit: u32,
        viewer: &Viewer,
    ) -> RegistryResult<Vec<(Change, Option<Agent>)>> {
        let changes = self
            .store
            .public_changes_since(since, limit, viewer)
            .await?;
        let mut wanted: Vec<String> = changes
            .iter()
            .filter(|change| change.kind != ChangeKind::Deleted)
            .map(|change| change.agent_id.clone())
            .collect();
        wanted.sort_unstable();
        wanted.dedup();
        let current: HashMap<String, Agent> = self
            .store
            .find_agents_by_id(&wanted)
            .await?
            .into_iter()
            .filter(|agent| agent.is_listed_to(viewer))
            .map(|agent| (agent.id.clone(), agent))
            .collect();
        Ok(changes
            .into_iter()
            .map(|mut change| {
                let agent = current.get(&change.agent_id);
                if change.kind == ChangeKind::Unpublished
                    && agent.is_some_and(|agent| !agent.is_listed())
                {
                    // A public agent made private left the public lists: to a viewer who
                    // sees it, it changed.
                    change.kind = ChangeKind::Updated;
                }
                let tombstone =
                    matches!(change.kind, ChangeKind::Unpublished | ChangeKind::Deleted);
                let agent = (!tombstone).then(|| agent.cloned()).flatten();
                (change, agent)
            })
            .collect())
    }

    /// The versions of an ACTIVE agent, the current (latest) first, then the earlier ones, most
    /// recent first; with the agent.
    pub async fn versions(
        &self,
        identifier: &str,
        viewer: &Viewer,
    ) -> RegistryResult<(Agent, Vec<AgentVersion>)> {
        let agent = self.find_active(identifier, viewer).await?;
        let mut history = self.store.agent_versions(&agent.id).await?;
        // The agent row is the truth about its current version: a program that keeps no
        // history (an older release on the same database) may have written it without a row.
        let current = match history.iter().position(|v| v.version == agent.version()) {
            Some(at) => history.remove(at),
            None => AgentVersion {
                version: agent.version().to_owned(),
                revision: agent.revision,
                published_at: agent.updated_at,
                deprecation: None,
            },
        };
        history.insert(0, current);
        Ok((agent, history))
    }

    /// An ACTIVE agent as it was at `version`, and whether that is its current version. The
    /// current version is the agent itself; an earlier one is the agent with that version's
    /// fields, the revision it was written at, and when it was written as `updated_at`.
    pub async fn version(
        &self,
        identifier: &str,
        version: &str,
        viewer: &Viewer,
    ) -> RegistryResult<(Agent, bool)> {
        let agent = self.find_active(identifier, viewer).await?;
        if agent.version() == version {
            return Ok((agent, true));
        }
        let Some(snapshot) = self.store.find_agent_version(&agent.id, version).await? else {
            return Err(RegistryError::VersionNotFound {
                identifier: identifier.to_owned(),
                version: version.to_owned(),
            });
        };
        // A version is the agent's content then; who finds the agent is how it is listed now.
        // It is deprecated when it was deprecated alone or the whole agent is.
        let mut draft = snapshot.draft;
        draft.visibility = agent.draft.visibility;
        let deprecation = snapshot
            .version
            .deprecation
            .or_else(|| agent.deprecation.clone());
        let earlier = Agent {
            draft,
            revision: snapshot.version.revision,
            updated_at: snapshot.version.published_at,
            deprecation,
            ..agent
        };
        Ok((earlier, false))
    }

    /// Run the one search function.
    pub async fn search(&self, request: &SearchRequest) -> RegistryResult<SearchPage> {
        match &self.index {
            Some(index) => Ok(index.search(request).await?),
            None => Err(RegistryError::Offline),
        }
    }

    /// Every match of a search, in order (an aggregation's input: see
    /// `SearchIndex::all_matches`).
    pub async fn all_matches(&self, request: &SearchRequest) -> RegistryResult<Vec<Hit>> {
        match &self.index {
            Some(index) => Ok(index.all_matches(request).await),
            None => Err(RegistryError::Offline),
        }
    }

    // ---- writes ----

    /// Create an agent in STAGE for `actor`. The `registry.` namespace is the master key's.
    pub async fn publish(&self, draft: AgentDraft, actor: &Actor) -> RegistryResult<Agent> {
        self.publish_for(draft, actor, None).await
    }

    /// `publish`, owned by organisation `org` when given (`actor` must be its admin or
    /// publisher, or the master key).
    pub async fn publish_for(
        &self,
        draft: AgentDraft,
        actor: &Actor,
        org: Option<&str>,
    ) -> RegistryResult<Agent> {
        let owner = match org {
            None => actor.owner_for(draft.package_name.as_str()).to_owned(),
            Some(org) => {
                let owner = crate::domain::org::org_owner(org);
                if self.store.find_org(org).await?.is_none() {
                    return Err(RegistryError::OrgNotFound(org.to_owned()));
                }
                if !self.manages(actor, &owner).await? {
                    return Err(RegistryError::NotOrgPublisher(org.to_owned()));
                }
                owner
            }
        };
        check_namespace(&draft, actor)?;
        check_granted(draft.package_name.as_str(), actor)?;
        self.check_bound(draft.package_name.as_str(), actor).await?;
        self.check_owned(&draft.package_name, actor).await?;
        self.check_scan(&draft)?;
        let mut agent = Agent::new(draft, &owner, Timestamp::now());
        self.insert(&mut agent).await?;
        self.apply(&agent).await;
        Ok(agent)
    }

    /// Store a new agent. An identifier derived from the package name that another agent
    /// holds already (two names that differ only by `_` and `-` in their domain map onto one)
    /// gets the agent's id added to its last segment; a publisher's own identifier that is
    /// taken is a conflict.
    async fn insert(&self, agent: &mut Agent) -> RegistryResult<()> {
        match self.insert_once(agent).await {
            // A local agent is never blocked by a mirrored one.
            Err(RegistryError::Store(StoreError::Conflict(_) | StoreError::IdentifierTaken(_)))
                if self.displace_mirrored(agent).await? =>
            {
                self.insert_once(agent).await
            }
            other => other,
        }
    }

    async fn insert_once(&self, agent: &mut Agent) -> RegistryResult<()> {
        match self.store.insert_agent(agent).await {
            Err(StoreError::IdentifierTaken(_))
                if agent.urn == crate::domain::AirUrn::of_package(&agent.draft.package_name) =>
            {
                agent.urn = agent.urn.with_suffix(&agent.id.to_ascii_lowercase());
                Ok(self.store.insert_agent(agent).await?)
            }
            other => Ok(other?),
        }
    }

    /// Delete the mirrored agents that hold the package name or the identifier a local agent
    /// is being created with; whether there was one. The mirror then reports the entry as a
    /// collision and leaves the name to the local agent.
    async fn displace_mirrored(&self, agent: &Agent) -> RegistryResult<bool> {
        if is_mirror_owner(&agent.owner) {
            return Ok(false);
        }
        let mut displaced = false;
        for key in [agent.package_name(), agent.urn.as_str()] {
            let Some(existing) = self.store.find_agent(key).await? else {
                continue;
            };
            if !is_mirror_owner(&existing.owner) {
                continue;
            }
            tracing::info!(package = %existing.package_name(), mirror = %existing.owner,
                "a local agent takes the name or identifier of a mirrored one; the mirrored one is removed");
            if self
                .store
                .delete_agent(&existing.id, Timestamp::now())
                .await?
            {
                if let Some(index) = &self.index {
                    index.delete(&existing.id).await;
                }
                displaced = true;
            }
        }
        Ok(displaced)
    }

    /// Replace the writable fields of an agent `actor` manages; with `expected_revision`, only
    /// if nobody wrote since. The package name cannot change. The change gets a new version
    /// (`next_draft`); a draft that changes nothing writes nothing and returns the agent as it is.
    pub async fn update(
        &self,
        identifier: &str,
        draft: AgentDraft,
        expected_revision: Option<i64>,
        actor: &Actor,
    ) -> RegistryResult<Agent> {
        let mut attempt = 1;
        loop {
            let current = self.find_owned(identifier, actor).await?;
            self.check_owned(&current.draft.package_name, actor).await?;
            if draft.package_name != current.draft.package_name {
                return Err(RegistryError::Invalid(vec![FieldError::new(
                    "package_name",
                    format!(
                        "package_name cannot change (this agent is '{}')",
                        current.package_name()
                    ),
                )]));
            }
            if expected_revision.is_some_and(|expected| expected != current.revision) {
                return Err(StoreError::VersionMismatch.into());
            }
            self.check_scan(&draft)?;
            let Some(next) = self.next_draft(&current, draft.clone()).await? else {
                return Ok(current);
            };
            // Written only over the revision read, which the version was computed from.
            let written = self
                .store
                .update_agent(&current.id, &next, Some(current.revision), Timestamp::now())
                .await;
            match written {
                Ok(agent) => {
                    self.apply(&agent).await;
                    self.reschedule_probe(Some(&current), &agent).await;
                    return Ok(agent);
                }
                Err(StoreError::VersionMismatch)
                    if expected_revision.is_none() && attempt < UPDATE_ATTEMPTS =>
                {
                    attempt += 1;
                }
                Err(err) => return Err(err.into()),
            }
        }
    }

    /// `draft` as a change to `current` writes it, with its version settled; `None` when it
    /// changes nothing (the same fields, naming no version or the current one).
    ///
    /// A draft naming no version, or the current one, gets the next patch of a semantic
    /// version, or keeps a version that is not one; a draft naming another version gets it
    /// unless it is lower than the current one or one the agent had before (`VersionConflict`).
    async fn next_draft(
        &self,
        current: &Agent,
        mut draft: AgentDraft,
    ) -> RegistryResult<Option<AgentDraft>> {
        // The identifier is fixed at publish: an update may repeat it, not change it.
        let given = draft.identifier.take();
        if given.is_some_and(|given| given.key() != current.urn.key()) {
            return Err(RegistryError::Invalid(vec![FieldError::new(
                "identifier",
                format!(
                    "is fixed once the agent is published (this agent is '{}')",
                    current.urn
                ),
            )]));
        }
        let named = draft.version.take();
        draft.version = current.draft.version.clone();
        // An update that does not say keeps the agent's visibility.
        draft.visibility = draft.visibility.or(current.draft.visibility);
        draft.inspect_tools = draft.inspect_tools.or(current.draft.inspect_tools);
        if draft == current.draft && named.as_deref().is_none_or(|v| v == current.version()) {
            return Ok(None);
        }
        let earlier: Vec<String> = self
            .store
            .agent_versions(&current.id)
            .await?
            .into_iter()
            .map(|v| v.version)
            .filter(|v| v != current.version())
            .collect();
        let version = version::next_version(current.version(), named.as_deref(), &earlier)?;
        draft.version = Some(version);
        Ok(Some(draft))
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
        self.reschedule_probe(Some(&current), &agent).await;
        Ok(agent)
    }

    /// Deprecate agent `identifier`, which `actor` manages (or, with `version`, one of its
    /// versions), with the publisher's message and, optionally, a successor: the package name
    /// or id of another agent the public can see. `None` as `message` takes it back.
    pub async fn set_deprecation(
        &self,
        identifier: &str,
        actor: &Actor,
        version: Option<&str>,
        deprecate: Option<(&str, Option<&str>)>,
    ) -> RegistryResult<Agent> {
        let current = self.find_owned(identifier, actor).await?;
        let at = Timestamp::now();
        let deprecation = match deprecate {
            None => None,
            Some((message, successor)) => {
                let message = Deprecation::message(message).map_err(|message| {
                    RegistryError::Invalid(vec![FieldError::new("message", message)])
                })?;
                let successor = match successor.map(str::trim).filter(|s| !s.is_empty()) {
                    None => None,
                    Some(successor) => {
                        let found = self
                            .store
                            .find_agent(successor)
                            .await?
                            .filter(|agent| agent.is_listed() && agent.id != current.id);
                        let Some(found) = found else {
                            return Err(RegistryError::NotFound(crate::domain::truncate(
                                successor, 80,
                            )));
                        };
                        Some(found.package_name().to_owned())
                    }
                };
                let deprecation = Deprecation {
                    message,
                    successor,
                    deprecated_at: at,
                };
                // The message is read by whoever reads the card: the same policy as its texts.
                if self.scan_policy == ScanPolicy::Block {
                    let mut findings = Vec::new();
                    scan::scan_deprecation(Some(&deprecation), &mut findings);
                    findings.retain(|finding| finding.severity >= Severity::High);
                    if !findings.is_empty() {
                        return Err(RegistryError::SecurityFinding { findings });
                    }
                }
                Some(deprecation)
            }
        };
        let no_version = |version: &str| RegistryError::VersionNotFound {
            identifier: identifier.to_owned(),
            version: crate::domain::truncate(version, 80),
        };
        if let Some(version) = version
            && (version.is_empty() || version.len() > 128 || version.contains('\0'))
        {
            return Err(no_version(version));
        }
        let agent = self
            .store
            .set_deprecation(&current.id, version, deprecation.as_ref(), at)
            .await
            .map_err(|err| match (err, version) {
                (StoreError::NotFound, Some(version)) => no_version(version),
                (err, _) => err.into(),
            })?;
        self.apply(&agent).await;
        Ok(agent)
    }

    /// Record that the agent's domain was verified. The proof also counts for the namespace
    /// the package is claimed through (`com.example` for `com.example.weather`), which its owner
    /// then holds unless another owner holds it already.
    pub async fn mark_domain_verified(&self, agent: &Agent) -> RegistryResult<Agent> {
        let now = Timestamp::now();
        let agent = self
            .store
            .set_verification(&agent.id, VerificationLevel::DomainVerified, now)
            .await?;
        self.apply(&agent).await;
        // A package named after a shared suffix itself (`io.github`) proves no namespace.
        let Ok(namespace) =
            Namespace::parse(Namespace::of_package(&agent.draft.package_name).as_str())
        else {
            return Ok(agent);
        };
        let proof = format!("agent:{}", agent.id);
        match self
            .prove_namespace(&namespace, &agent.owner, &proof, now)
            .await
        {
            Ok(_) | Err(RegistryError::Store(StoreError::Conflict(_))) => {}
            Err(err) => return Err(err),
        }
        Ok(agent)
    }

    // ---- transfers ----

    /// Ask to give agent `identifier`, which `actor` manages, to `to` (an owner name, or
    /// `org:<name>`): a pending transfer the receiver accepts. The master key moves it at once
    /// (status `forced`): the transfer and the agent as it now is.
    pub async fn request_transfer(
        &self,
        identifier: &str,
        to: &str,
        actor: &Actor,
    ) -> RegistryResult<(TransferRecord, Option<Agent>)> {
        let agent = self.find_owned(identifier, actor).await?;
        let invalid = |message: &str| RegistryError::Invalid(vec![FieldError::new("to", message)]);
        let to = match crate::domain::org::org_of_owner(to.trim()) {
            Some(org) => {
                if self.store.find_org(org).await?.is_none() {
                    return Err(RegistryError::OrgNotFound(org.to_owned()));
                }
                crate::domain::org::org_owner(org)
            }
            None => crate::domain::access::parse_owner(to).map_err(|message| invalid(&message))?,
        };
        if to == agent.owner {
            return Err(RegistryError::Store(StoreError::Conflict(format!(
                "'{to}' owns this agent already"
            ))));
        }
        let now = Timestamp::now();
        let mut transfer = TransferRecord {
            id: format!("trf_{}", ulid::Ulid::new()),
            agent_id: agent.id.clone(),
            package_name: agent.package_name().to_owned(),
            from_owner: agent.owner.clone(),
            to_owner: to,
            requested_by: actor.owner.clone(),
            status: TransferStatus::Pending,
            created_at: now,
            resolved_at: None,
        };
        if actor.is_master {
            transfer.status = TransferStatus::Forced;
            transfer.resolved_at = Some(now);
            let moved = self.store.force_transfer(&transfer).await?;
            self.apply(&moved).await;
            return Ok((transfer, Some(moved)));
        }
        self.store.insert_transfer(&transfer).await?;
        Ok((transfer, None))
    }

    /// The pending transfers `actor` is a party to: from or to it, its granted namespaces and
    /// its organisations (every one for the master key is not listed: it acts, it does not wait).
    pub async fn pending_transfers(&self, actor: &Actor) -> RegistryResult<Vec<TransferRecord>> {
        let owners = self.owners_of(actor).await?;
        let owners: Vec<&str> = owners.iter().map(String::as_str).collect();
        Ok(self.store.pending_transfers(&owners).await?)
    }

    /// Accept (`accept`) or decline transfer `id`. The receiver accepts (an organisation's
    /// admin for an organisation); the receiver or the sender declines; the master key does
    /// either. Anyone else finds no such transfer.
    pub async fn settle_transfer(
        &self,
        id: &str,
        accept: bool,
        actor: &Actor,
    ) -> RegistryResult<(TransferRecord, Option<Agent>)> {
        let not_found = || RegistryError::TransferNotFound(id.to_owned());
        let transfer = self
            .store
            .find_transfer(id.trim())
            .await?
            .filter(|transfer| transfer.status == TransferStatus::Pending)
            .ok_or_else(not_found)?;
        let receiving_role = self.org_role(actor, &transfer.to_owner).await?;
        let receives = actor.is_master
            || actor.owns(&transfer.to_owner)
            || receiving_role == Some(crate::domain::org::OrgRole::Admin);
        let sends = self.manages(actor, &transfer.from_owner).await?;
        // The receiving organisation's other members see it, but only its admins take it.
        if !receives && !sends && receiving_role.is_none() {
            return Err(not_found());
        }
        if !receives && (accept || !sends) {
            return Err(RegistryError::NotReceiver);
        }
        let status = if accept {
            TransferStatus::Accepted
        } else {
            TransferStatus::Declined
        };
        let (settled, moved) = match self
            .store
            .settle_transfer(&transfer.id, status, Timestamp::now())
            .await
        {
            Err(StoreError::NotFound) => return Err(not_found()),
            other => other?,
        };
        if let Some(moved) = &moved {
            self.apply(moved).await;
        }
        Ok((settled, moved))
    }

    // ---- namespaces ----

    /// `owner`'s claim on `namespace`: recorded with a new proof token unless it exists.
    pub async fn claim_namespace(
        &self,
        namespace: &Namespace,
        owner: &str,
    ) -> RegistryResult<NamespaceRecord> {
        let claim = NamespaceRecord {
            namespace: namespace.as_str().to_owned(),
            owner: owner.to_owned(),
            token: crate::domain::access::random_secret("arn_"),
            created_at: Timestamp::now(),
            verified_at: None,
            proof: None,
        };
        Ok(self.store.claim_namespace(&claim).await?)
    }

    /// Record that `owner` proved `namespace` by `proof`, claiming it first if needed.
    /// `Conflict` when another owner holds it.
    pub async fn prove_namespace(
        &self,
        namespace: &Namespace,
        owner: &str,
        proof: &str,
        at: Timestamp,
    ) -> RegistryResult<NamespaceRecord> {
        self.claim_namespace(namespace, owner).await?;
        Ok(self
            .store
            .verify_namespace(namespace.as_str(), owner, proof, at)
            .await?)
    }

    /// Every namespace claim of `owner`.
    pub async fn namespaces_of(&self, owner: &str) -> RegistryResult<Vec<NamespaceRecord>> {
        Ok(self.store.namespaces_of(owner).await?)
    }

    /// The proven claim on `namespace`, whoever holds it.
    pub async fn namespace_holder(
        &self,
        namespace: &Namespace,
    ) -> RegistryResult<Option<NamespaceRecord>> {
        Ok(self.store.namespace_holder(namespace.as_str()).await?)
    }

    /// Drop `owner`'s claim on `namespace` (every claim on it for `None`); whether there was one.
    pub async fn release_namespace(
        &self,
        namespace: &Namespace,
        owner: Option<&str>,
    ) -> RegistryResult<bool> {
        Ok(self
            .store
            .delete_namespace(namespace.as_str(), owner)
            .await?)
    }

    /// Under `--scan-policy block`, `SecurityFinding` when the scanner finds anything at `high`
    /// or above in `draft`.
    fn check_scan(&self, draft: &AgentDraft) -> RegistryResult<()> {
        if self.scan_policy == ScanPolicy::Flag {
            return Ok(());
        }
        let report = scan::scan(draft);
        if report.max_severity < Severity::High {
            return Ok(());
        }
        Err(RegistryError::SecurityFinding {
            findings: report
                .findings
                .into_iter()
                .filter(|finding| finding.severity >= Severity::High)
                .collect(),
        })
    }

    // ---- publishing bindings ----

    /// Store a binding.
    pub async fn bind(&self, binding: &BindingRecord) -> RegistryResult<()> {
        Ok(self.store.insert_binding(binding).await?)
    }

    /// The bindings `owner` made (every binding for `None`).
    pub async fn bindings_of(&self, owner: Option<&str>) -> RegistryResult<Vec<BindingRecord>> {
        Ok(self.store.bindings_of(owner).await?)
    }

    /// Delete binding `id`, `owner`'s only unless `None`; whether there was one.
    pub async fn unbind(&self, id: &str, owner: Option<&str>) -> RegistryResult<bool> {
        Ok(self.store.delete_binding(id, owner).await?)
    }

    /// `BindingMismatch` when `actor` is a token minted by trusted publishing and bindings
    /// cover `package`, none of them for the identity it was minted from. Other callers are
    /// not held to bindings: they are the owner's own tokens or the master key.
    async fn check_bound(&self, package: &str, actor: &Actor) -> RegistryResult<()> {
        let (Some(_), Some(identity)) = (&actor.namespaces, &actor.identity) else {
            return Ok(());
        };
        let labels: Vec<&str> = package.split('.').collect();
        let scopes: Vec<String> = (2..=labels.len()).map(|n| labels[..n].join(".")).collect();
        let bindings = self.store.bindings_for(&scopes).await?;
        if bindings.is_empty()
            || bindings
                .iter()
                .any(|binding| binding.rule.matches(identity))
        {
            return Ok(());
        }
        let bound = bindings
            .iter()
            .map(|binding| match &binding.rule.workflow {
                Some(workflow) => format!("{} ({workflow})", binding.rule.repository),
                None => binding.rule.repository.clone(),
            })
            .collect();
        Err(RegistryError::BindingMismatch {
            package: package.to_owned(),
            bound,
        })
    }

    /// Under `--namespace-policy owned`, `NamespaceNotOwned` unless `actor` may publish
    /// `package`: the master key; a token whose CI identity grants a namespace that covers it;
    /// or an owner holding a proven namespace that covers it.
    async fn check_owned(&self, package: &PackageName, actor: &Actor) -> RegistryResult<()> {
        if self.namespace_policy == NamespacePolicy::Open {
            return Ok(());
        }
        self.check_holds(package, actor).await
    }

    /// `NamespaceNotOwned` unless `actor` is the master key, or its identity (CI or sign-in)
    /// grants, or its owner holds proven, a namespace that covers `package` (whatever the
    /// policy).
    pub async fn check_holds(&self, package: &PackageName, actor: &Actor) -> RegistryResult<()> {
        if actor.is_master {
            return Ok(());
        }
        let name = package.as_str();
        if in_namespaces(name, &actor.granted) {
            return Ok(());
        }
        let held = self.store.namespaces_of(&actor.owner).await?;
        if held
            .iter()
            .any(|claim| claim.verified_at.is_some() && covers(&claim.namespace, name))
        {
            return Ok(());
        }
        let namespace = Namespace::of_package(package);
        Err(RegistryError::NamespaceNotOwned {
            package: name.to_owned(),
            domain: namespace.domain(),
            namespace: namespace.as_str().to_owned(),
        })
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
        let found = match store.find_agent(draft.package_name.as_str()).await? {
            // A mirror wrote this name before mirrors left the registry's names alone: the
            // registry takes it back.
            Some(existing) if is_mirror_owner(&existing.owner) => {
                store.delete_agent(&existing.id, now).await?;
                if let Some(index) = &self.index {
                    index.delete(&existing.id).await;
                }
                None
            }
            found => found,
        };
        // The registry's own agents are public: the stored record says so explicitly.
        let mut draft = draft;
        draft.visibility.get_or_insert_default();
        draft.inspect_tools.get_or_insert(true);
        let mut agent = match found {
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
        self.check_owned(&draft.package_name, &actor).await?;
        self.check_scan(&draft)?;
        let now = Timestamp::now();
        let taken = |existing: &Agent, message: &str| {
            RegistryError::Invalid(vec![FieldError::new(
                "package_name",
                format!("'{}' {message}", existing.package_name()),
            )])
        };
        let found = match self.find(draft.package_name.as_str()).await? {
            Some(existing) if is_mirror_owner(&existing.owner) && !is_mirror_owner(owner) => None,
            found => found,
        };
        let (agent, outcome) = match found {
            None => {
                let mut agent = Agent::new(draft, owner, now);
                if mode.go_live {
                    agent.state = AgentState::Active;
                    agent.published_at = Some(now);
                }
                self.insert(&mut agent).await?;
                self.apply(&agent).await;
                self.reschedule_probe(None, &agent).await;
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
            Some(existing) => match self.next_draft(&existing, draft).await? {
                None => (existing, Imported::Unchanged),
                Some(next) => {
                    let updated = self
                        .store
                        .update_agent(&existing.id, &next, Some(existing.revision), now)
                        .await?;
                    self.apply(&updated).await;
                    self.reschedule_probe(Some(&existing), &updated).await;
                    (updated, Imported::Updated)
                }
            },
        };
        if mode.go_live && agent.state == AgentState::Stage {
            let live = self
                .store
                .transition(&agent.id, AgentState::Stage, AgentState::Active, now)
                .await?;
            self.apply(&live).await;
            self.reschedule_probe(Some(&agent), &live).await;
            return Ok(Imported::Updated);
        }
        Ok(outcome)
    }

    // ---- mirrors ----

    /// The agents with these package names, in any state.
    pub async fn find_by_names(&self, names: &[String]) -> RegistryResult<Vec<Agent>> {
        Ok(self.store.find_agents_by_name(names).await?)
    }

    /// The (id, package name) of every agent of `owner`.
    pub async fn owned_by(&self, owner: &str) -> RegistryResult<Vec<(String, String)>> {
        const PAGE: u32 = 1_000;
        let mut after: Option<String> = None;
        let mut owned = Vec::new();
        loop {
            let page = self
                .store
                .list_agents(Some(&[owner]), after.as_deref(), PAGE)
                .await?;
            owned.extend(
                page.iter()
                    .map(|agent| (agent.id.clone(), agent.package_name().to_owned())),
            );
            match page.last() {
                Some(last) if page.len() == PAGE as usize => after = Some(last.id.clone()),
                _ => return Ok(owned),
            }
        }
    }

    /// Write one page of a mirror source (`Store::write_mirror_page`), then apply it to the
    /// index in one batch and to the probe schedule; `before` holds the agents its updates
    /// were decided from.
    pub async fn write_mirror_page(
        &self,
        page: &MirrorPage,
        before: &HashMap<String, Agent>,
    ) -> RegistryResult<MirrorWritten> {
        let written = self.store.write_mirror_page(page).await?;
        if let Some(index) = &self.index {
            let deleted: Vec<String> = written.deleted.iter().map(|a| a.id.clone()).collect();
            index
                .apply_batch_scanned(&written.written, &deleted, &written.severities)
                .await;
        }
        let now = Timestamp::now();
        let mut due = Vec::new();
        for agent in &written.written {
            match before.get(&agent.id) {
                Some(old) => self.reschedule_probe(Some(old), agent).await,
                None if agent.state == AgentState::Active
                    && ProbeTarget::of(&agent.draft).is_some() =>
                {
                    due.push((agent.id.clone(), now));
                }
                None => {}
            }
        }
        if !due.is_empty()
            && let Err(err) = self.store.schedule_probes(&due).await
        {
            tracing::warn!(error = %err, "cannot schedule the probes of mirrored agents");
        }
        Ok(written)
    }

    // ---- liveness probes ----

    /// After a write: an agent that became probeable, or whose probe target changed, is due
    /// for a probe now (its old health no longer says anything); one that stopped being
    /// probeable (unpublished, endpoint removed) leaves the schedule. A failure here is logged,
    /// not returned: the write itself has committed, and the prober's start-up pass or the next
    /// write schedules it again.
    async fn reschedule_probe(&self, before: Option<&Agent>, after: &Agent) {
        let target = |agent: &Agent| {
            (agent.state == AgentState::Active && agent.owner != SYSTEM_OWNER)
                .then(|| ProbeTarget::of(&agent.draft))
                .flatten()
        };
        let (old, new) = (before.and_then(target), target(after));
        if old == new {
            return;
        }
        let due = new.is_some().then(Timestamp::now);
        if let Err(err) = self.store.reset_probe(&after.id, due).await {
            tracing::warn!(error = %err, agent = %after.id, "cannot reschedule the agent's probe");
        }
        if let Some(index) = &self.index {
            // Probeable now: unknown until its first probe; else `not_probed` at once.
            index.set_health(&after.id, Health::shown(&after.draft, None));
        }
    }

    /// Give every ACTIVE agent that lists an endpoint a probe schedule, unless it has one; the
    /// first probes are due at `first_due(i)` for the i-th agent. Reads the catalogue a page at
    /// a time. Returns how many agents are probeable.
    ///
    /// Agents written after `since` are left to the process that wrote them, which schedules
    /// them itself once its write commits: scheduling one here too could have it probed, then
    /// reset by that writer and probed again.
    pub async fn schedule_all_probes(
        &self,
        since: Timestamp,
        first_due: impl Fn(usize) -> Timestamp,
    ) -> RegistryResult<usize> {
        const PAGE: u32 = 1_000;
        let mut after: Option<String> = None;
        let mut count = 0;
        loop {
            let page = self.store.list_agents(None, after.as_deref(), PAGE).await?;
            let Some(last) = page.last() else {
                break;
            };
            after = Some(last.id.clone());
            let due: Vec<(String, Timestamp)> = page
                .iter()
                .filter(|agent| agent.state == AgentState::Active && agent.owner != SYSTEM_OWNER)
                .filter(|agent| agent.updated_at <= since)
                .filter(|agent| ProbeTarget::of(&agent.draft).is_some())
                .enumerate()
                .map(|(i, agent)| (agent.id.clone(), first_due(count + i)))
                .collect();
            count += due.len();
            self.store.schedule_probes(&due).await?;
            if page.len() < PAGE as usize {
                break;
            }
        }
        Ok(count)
    }

    /// Lease at most `limit` due probes to `owner` until `lease_until` (see `Store::claim_probes`).
    pub async fn claim_probes(
        &self,
        owner: &str,
        now: Timestamp,
        lease_until: Timestamp,
        limit: u32,
    ) -> RegistryResult<Vec<String>> {
        Ok(self
            .store
            .claim_probes(owner, now, lease_until, limit)
            .await?)
    }

    /// Release the probe leases `owner` holds (see `Store::release_probe_leases`).
    pub async fn release_probe_leases(&self, owner: &str) -> RegistryResult<u64> {
        Ok(self.store.release_probe_leases(owner).await?)
    }

    /// A claimed agent and what to probe; `None`, and off the schedule, when it is gone, no
    /// longer ACTIVE, or lists no endpoint any more.
    pub async fn probe_subject(&self, id: &str) -> RegistryResult<Option<(Agent, ProbeTarget)>> {
        let agent = self.store.find_agent(id).await?;
        let subject = agent.and_then(|agent| {
            let probeable = agent.state == AgentState::Active && agent.owner != SYSTEM_OWNER;
            let target = probeable.then(|| ProbeTarget::of(&agent.draft)).flatten()?;
            Some((agent, target))
        });
        if subject.is_none() {
            self.store.reset_probe(id, None).await?;
        }
        Ok(subject)
    }

    /// Record a probe's outcome and show it in this process's index at once (other processes
    /// learn of a changed status through the change log). `None` when the agent is gone.
    pub async fn record_probe(
        &self,
        id: &str,
        outcome: &ProbeOutcome,
        next_at: Timestamp,
    ) -> RegistryResult<Option<Health>> {
        let Some((health, _changed)) = self.store.record_probe(id, outcome, next_at).await? else {
            return Ok(None);
        };
        if let Some(index) = &self.index {
            index.set_health(id, Some(health.clone()));
        }
        Ok(Some(health))
    }

    /// Record what a probe read from agent `id`'s endpoint at `at`: scan it, compare it with
    /// the last snapshot (a different one is a drift, logged to the change feed), store both,
    /// and refresh the agent's worst severity in this process's index when it moved.
    pub async fn record_surface(
        &self,
        id: &str,
        surface: &crate::domain::surface::Surface,
        at: Timestamp,
    ) -> RegistryResult<()> {
        let previous = self.store.surface_of(id).await?;
        let (inspection, changed) = crate::domain::surface::Inspection::after(
            previous.as_ref().map(|(held, before)| (held, before)),
            surface,
            at,
        );
        let severity_moved = previous
            .as_ref()
            .map_or(Severity::None, |(held, _)| held.max_severity)
            != inspection.max_severity;
        if changed {
            let drift = inspection.drift.as_ref();
            tracing::info!(
                agent = id,
                added = drift.map_or(0, |d| d.changes.added_count),
                removed = drift.map_or(0, |d| d.changes.removed_count),
                changed = drift.map_or(0, |d| d.changes.changed_count),
                new_findings = drift.map_or(0, |d| d.new_findings.len()),
                "what the agent's endpoint shows changed since the last probe"
            );
            metrics::counter!("registry_drifts_total").increment(1);
        }
        if !self
            .store
            .record_inspection(id, &inspection, surface, changed)
            .await?
        {
            return Ok(());
        }
        if severity_moved
            && let Some(index) = &self.index
            && let Some(agent) = self.store.find_agent(id).await?
        {
            index.apply(&agent).await;
        }
        Ok(())
    }

    /// `agent`'s worst scanner severity as the index holds it (its texts' stored verdict, its
    /// deprecation message and what its endpoint showed), when the index holds it at this
    /// revision; a probe read newer than the index's is counted too. `None` when not indexed
    /// (an unlisted agent, another revision): the caller scans.
    pub fn worst_severity(&self, agent: &Agent) -> Option<Severity> {
        let held = self.index.as_ref()?.severity_of(agent)?;
        let live = agent
            .inspection
            .as_ref()
            .filter(|_| agent.draft.inspect_tools != Some(false))
            .map_or(Severity::None, |inspection| inspection.max_severity);
        Some(held.max(live))
    }

    /// Indexed agents by health status (never probed: `unknown`).
    pub fn health_counts(&self) -> Vec<(HealthStatus, usize)> {
        self.index
            .as_ref()
            .map(|index| index.health_counts())
            .unwrap_or_default()
    }

    // ---- the index, for readiness and metrics ----

    /// Save the search index's keyword snapshot if it changed since it was loaded or last
    /// saved (on shutdown, so the next start replays only what changed after).
    pub async fn save_index(&self) -> anyhow::Result<()> {
        match &self.index {
            Some(index) => {
                index
                    .save_text_snapshot(crate::search::SHUTDOWN_MERGE_WAIT)
                    .await
            }
            None => Ok(()),
        }
    }

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

    pub fn embedder_id(&self) -> Option<String> {
        self.index.as_ref().and_then(|index| index.embedder_id())
    }

    /// What `/readyz` says about the embedder beyond its id (offline: nothing).
    pub fn embedder_note(&self) -> Option<String> {
        self.index.as_ref().and_then(|index| index.embedder_note())
    }

    /// Replace that note (offline: nothing to note).
    pub fn set_embedder_note(&self, note: Option<String>) {
        if let Some(index) = &self.index {
            index.set_embedder_note(note);
        }
    }

    /// Rank by `embedder` from now on, once every agent has its vector by it (offline: no index,
    /// nothing to do). See `SearchIndex::switch_embedder`.
    pub async fn switch_embedder(
        &self,
        embedder: Arc<dyn crate::embed::Embedder>,
    ) -> anyhow::Result<()> {
        match &self.index {
            Some(index) => index.switch_embedder(embedder).await,
            None => Ok(()),
        }
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

/// `NamespaceNotGranted` unless `actor` may write `package` (see `Actor::may_write`).
fn check_granted(package: &str, actor: &Actor) -> RegistryResult<()> {
    match &actor.namespaces {
        Some(namespaces) if !actor.may_write(package) => Err(RegistryError::NamespaceNotGranted {
            package: package.to_owned(),
            namespaces: namespaces.clone(),
        }),
        _ => Ok(()),
    }
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
            viewer: Default::default(),
        }
    }

    async fn found(registry: &Registry, text: &str) -> Vec<String> {
        let page = registry.search(&query(text)).await.expect("search");
        page.hits
            .iter()
            .map(|hit| hit.listing.package_name().to_owned())
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
    async fn the_registry_takes_back_its_own_name_from_a_mirror() {
        let (_dir, store) = store().await;
        let mirrored = Agent::new(
            draft("registry.utility.wiki", "Upstream's"),
            "mirror:x",
            Timestamp::now(),
        );
        store.insert_agent(&mirrored).await.expect("insert");
        let registry = Registry::offline(Arc::clone(&store));
        let ours = registry
            .ensure_system_agent(draft("registry.utility.wiki", "Ours"))
            .await
            .expect("ensured");
        assert_eq!(ours.owner, SYSTEM_OWNER);
        assert_eq!(ours.draft.description, "Ours");
        assert_eq!(ours.state, AgentState::Active);
        assert!(
            store
                .find_agent(&mirrored.id)
                .await
                .expect("find")
                .is_none()
        );
    }

    fn versioned(description: &str, version: Option<&str>) -> AgentDraft {
        let mut draft = draft("com.example.sea", description);
        draft.version = version.map(str::to_owned);
        draft
    }

    #[tokio::test]
    async fn import_settles_versions_as_an_update_does() {
        let (_dir, store) = store().await;
        let registry = Registry::offline(store);
        let mode = ImportMode {
            update: true,
            go_live: true,
        };
        let import = |draft| registry.import(draft, "alice", mode);
        let version = || async {
            let agent = registry.find("com.example.sea").await.expect("find");
            agent.expect("agent").version().to_owned()
        };

        assert_eq!(
            import(versioned("Tides", Some("1.2.0")))
                .await
                .expect("create"),
            Imported::Created
        );
        assert_eq!(
            import(versioned("Tides", None)).await.expect("again"),
            Imported::Unchanged,
            "a line naming no version changes nothing"
        );
        assert_eq!(
            import(versioned("Currents", None)).await.expect("changed"),
            Imported::Updated
        );
        assert_eq!(version().await, "1.2.1");
        let lower = import(versioned("Back", Some("1.0.0"))).await;
        assert!(
            matches!(lower, Err(RegistryError::VersionConflict(_))),
            "{lower:?}"
        );
        assert_eq!(version().await, "1.2.1");

        let (agent, history) = registry
            .versions("com.example.sea", &Viewer::Anonymous)
            .await
            .expect("versions");
        assert_eq!(agent.version(), "1.2.1");
        let listed: Vec<&str> = history.iter().map(|v| v.version.as_str()).collect();
        assert_eq!(listed, ["1.2.1", "1.2.0"]);
        let (old, latest) = registry
            .version("com.example.sea", "1.2.0", &Viewer::Anonymous)
            .await
            .expect("earlier version");
        assert!(!latest);
        assert_eq!(old.draft.description, "Tides");
        assert!(matches!(
            registry
                .version("com.example.sea", "3.0.0", &Viewer::Anonymous)
                .await,
            Err(RegistryError::VersionNotFound { .. })
        ));
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

    #[tokio::test]
    async fn two_names_that_map_to_one_identifier_both_publish() {
        let (_dir, store) = store().await;
        let registry = Registry::offline(store);
        let alice = Actor::owner("alice");
        let first = registry
            .publish(draft("com.my-company.bot", "Bots"), &alice)
            .await
            .expect("first");
        let second = registry
            .publish(draft("com.my_company.bot", "Bots"), &alice)
            .await
            .expect("second");
        assert_eq!(first.urn.as_str(), "urn:air:my-company.com:bot");
        assert_eq!(
            second.urn.as_str(),
            format!(
                "urn:air:my-company.com:bot-{}",
                second.id.to_ascii_lowercase()
            )
        );
        // A publisher's own identifier that is taken is refused.
        let mut taken = draft("com.my-company.other", "Bots");
        taken.identifier = Some(first.urn.clone());
        assert!(matches!(
            registry.publish(taken, &alice).await,
            Err(RegistryError::Store(StoreError::IdentifierTaken(_)))
        ));
    }

    #[tokio::test]
    async fn agents_written_without_an_identifier_get_one_at_open() {
        let (dir, store) = store().await;
        let registry = Registry::offline(Arc::clone(&store));
        let agent = registry
            .publish(
                draft("io.github.alice.tides", "Tides"),
                &Actor::owner("alice"),
            )
            .await
            .expect("publish");
        // As an older program left the row.
        let url = format!("sqlite://{}", dir.path().join("registry.db").display());
        let pool = sqlx::SqlitePool::connect(&url).await.expect("connect");
        sqlx::query("UPDATE agents SET urn = NULL")
            .execute(&pool)
            .await
            .expect("clear");
        pool.close().await;
        assert_eq!(
            store.agents_missing_urn(10).await.expect("missing").len(),
            1
        );

        let serving = Registry::open(Arc::clone(&store), None, Vectors::Wait)
            .await
            .expect("open");
        assert!(
            store
                .agents_missing_urn(10)
                .await
                .expect("missing")
                .is_empty()
        );
        let found = serving
            .find("urn:air:alice.github.io:tides")
            .await
            .expect("find");
        assert_eq!(found.map(|found| found.id), Some(agent.id));
    }

    #[tokio::test]
    async fn an_agent_is_found_by_the_words_of_its_representative_queries() {
        let (_dir, store) = store().await;
        let registry = Registry::open(store, None, Vectors::Wait)
            .await
            .expect("open");
        let alice = Actor::owner("alice");
        let mut weather = draft("com.example.sky", "Conditions aloft for pilots.");
        weather.representative_queries = vec![
            "will it rain in Paris tomorrow".to_owned(),
            "umbrella needed this weekend".to_owned(),
        ];
        let agent = registry.publish(weather, &alice).await.expect("publish");
        registry
            .transition(&agent.id, AgentState::Stage, AgentState::Active, &alice)
            .await
            .expect("live");
        assert_eq!(found(&registry, "umbrella").await, ["com.example.sky"]);
    }
}
