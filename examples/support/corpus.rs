//! Test corpora for benchmarks and the quality harness: ACTIVE agents from a JSON Lines file of
//! publish bodies (the format of the public data set `agents-real.jsonl`), optionally replicated.

use std::io::{BufRead, BufReader};
use std::path::Path;

use anyhow::Context;
use serde_json::Value;

use agent_registry::domain::{AgentDraft, PackageName};
use agent_registry::store::{Agent, AgentState};
use agent_registry::timestamp::Timestamp;

/// Every valid line of `path` as an ACTIVE agent owned by `owner`, `copies` times over (copy
/// `n > 0` gets the package-name suffix `.copy{n}`). Invalid lines are skipped.
pub fn agents_from_jsonl(path: &Path, owner: &str, copies: usize) -> anyhow::Result<Vec<Agent>> {
    let file =
        std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let drafts: Vec<AgentDraft> = BufReader::new(file)
        .lines()
        .map_while(Result::ok)
        .filter_map(|line| serde_json::from_str::<Value>(&line).ok())
        .filter_map(|body| AgentDraft::parse(&body).ok())
        .collect();
    let mut agents = Vec::with_capacity(drafts.len() * copies.max(1));
    let start = Timestamp::now();
    for copy in 0..copies.max(1) {
        for (i, draft) in drafts.iter().enumerate() {
            let mut draft = draft.clone();
            if copy > 0 {
                let renamed = format!("{}.copy{copy}", draft.package_name);
                match PackageName::parse(&renamed) {
                    Ok(name) => draft.package_name = name,
                    Err(_) => continue,
                }
            }
            let at = start.plus_secs((copy * drafts.len() + i) as u64);
            let mut agent = Agent::new(draft, owner, at);
            agent.state = AgentState::Active;
            agent.published_at = Some(at);
            agents.push(agent);
        }
    }
    Ok(agents)
}
