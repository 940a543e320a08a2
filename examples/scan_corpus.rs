//! Run the scanner over a catalogue of publish bodies (JSON Lines) and say what it finds: how
//! many agents at each worst severity, the count per rule, and every finding at `high` or above
//! (what `--scan-policy block` would refuse), to be reviewed by hand.
//!
//! ```sh
//! cargo run --release --example scan_corpus -- examples/agents.jsonl
//! cargo run --release --example scan_corpus -- path/to/agents-real.jsonl --list medium
//! cargo run --release --example scan_corpus -- eval/scan/labelled.jsonl --labelled
//! ```
//!
//! With `--labelled`, the file is a labelled corpus (`{"kind", "text", "expect"}` per line, or
//! `{"kind", "technique", "text"}` with one technique an attack is labelled with) and the answer
//! is, per rule, the texts it found that were labelled with it (true positives), found and not
//! labelled (false positives) and labelled and not found (misses), with precision and recall;
//! per kind, the texts found exactly as labelled and the texts with any finding; per technique,
//! the attacks with any finding. `--show` lists the attacks with no finding and the benign
//! texts with one.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::PathBuf;
use std::time::Instant;

use agent_registry::domain::AgentDraft;
use agent_registry::domain::scan::{self, Severity};
use clap::Parser;

#[derive(Parser)]
struct Args {
    /// JSON Lines of publish bodies (or MCP Registry server.json lines).
    corpus: PathBuf,
    /// List every finding at this severity or above.
    #[arg(long, default_value = "high")]
    list: String,
    /// The file is a labelled corpus: report precision and recall per rule.
    #[arg(long)]
    labelled: bool,
    /// With `--labelled`: list the attacks missed and the benign texts flagged.
    #[arg(long)]
    show: bool,
}

/// Per rule: found and labelled, found only, labelled only.
#[derive(Default)]
struct Tally {
    hit: usize,
    false_positive: usize,
    missed: usize,
}

fn labelled(path: &PathBuf, show: bool) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(path)?;
    let mut rules: BTreeMap<String, Tally> = BTreeMap::new();
    let mut exact: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    // Per kind and per technique: texts with any finding, of all.
    let mut any: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut techniques: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut wrong = Vec::new();
    for line in text.lines().filter(|line| !line.trim().is_empty()) {
        let case: serde_json::Value = serde_json::from_str(line)?;
        let kind = case["kind"].as_str().unwrap_or("?").to_owned();
        let text = case["text"].as_str().unwrap_or("");
        // A case of a name is scanned as an agent's name; the others as a description.
        let findings = if case["field"] == "name" {
            let body = serde_json::json!({"package_name": "com.example.agent", "name": text,
                "description": "An agent."});
            let draft = AgentDraft::parse(&body)
                .map_err(|_| anyhow::anyhow!("not a valid name: {text}"))?;
            scan::scan(&draft).findings
        } else {
            let mut findings = Vec::new();
            scan::scan_text("description", text, &mut findings);
            findings
        };
        let found: std::collections::BTreeSet<String> =
            findings.iter().map(|f| f.rule.to_string()).collect();
        let technique = case["technique"].as_str().filter(|t| *t != "none");
        let expected: std::collections::BTreeSet<String> = match case["expect"].as_array() {
            Some(rules) => rules
                .iter()
                .filter_map(|rule| rule.as_str().map(str::to_owned))
                .collect(),
            None => technique.map(str::to_owned).into_iter().collect(),
        };
        let flagged = !found.is_empty();
        let entry = any.entry(kind.clone()).or_default();
        entry.0 += usize::from(flagged);
        entry.1 += 1;
        if let Some(technique) = technique {
            let entry = techniques.entry(technique.to_owned()).or_default();
            entry.0 += usize::from(flagged);
            entry.1 += 1;
        }
        if flagged != (kind == "attack") {
            wrong.push(format!("{kind} {found:?} {}", text.escape_debug()));
        }
        for rule in found.union(&expected) {
            let tally = rules.entry(rule.clone()).or_default();
            match (found.contains(rule), expected.contains(rule)) {
                (true, true) => tally.hit += 1,
                (true, false) => tally.false_positive += 1,
                _ => tally.missed += 1,
            }
        }
        let entry = exact.entry(kind).or_default();
        entry.1 += 1;
        if found == expected {
            entry.0 += 1;
        }
    }
    println!("| rule | found and labelled | false positives | misses | precision | recall |");
    println!("|---|---|---|---|---|---|");
    for (rule, tally) in &rules {
        let ratio = |part: usize, whole: usize| {
            if whole == 0 {
                "—".to_owned()
            } else {
                format!("{:.2}", part as f64 / whole as f64)
            }
        };
        println!(
            "| `{rule}` | {} | {} | {} | {} | {} |",
            tally.hit,
            tally.false_positive,
            tally.missed,
            ratio(tally.hit, tally.hit + tally.false_positive),
            ratio(tally.hit, tally.hit + tally.missed)
        );
    }
    for (kind, (right, all)) in &exact {
        println!("{kind}: {right} of {all} found exactly as labelled");
    }
    for (kind, (flagged, all)) in &any {
        println!("{kind}: {flagged} of {all} with any finding");
    }
    for (technique, (flagged, all)) in &techniques {
        println!("  {technique}: {flagged} of {all} attacks with any finding");
    }
    if show {
        for line in &wrong {
            println!("{line}");
        }
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.labelled {
        return labelled(&args.corpus, args.show);
    }
    let list = match args.list.as_str() {
        "low" => Severity::Low,
        "medium" => Severity::Medium,
        "high" => Severity::High,
        "critical" => Severity::Critical,
        other => anyhow::bail!("--list takes low, medium, high or critical, not {other}"),
    };
    let file = std::fs::File::open(&args.corpus)?;
    let (mut read, mut invalid) = (0usize, 0usize);
    let mut by_severity: BTreeMap<Severity, usize> = BTreeMap::new();
    let mut by_rule: BTreeMap<String, usize> = BTreeMap::new();
    let mut listed = Vec::new();
    let mut each = Vec::new();
    let started = Instant::now();
    for line in std::io::BufReader::new(file).lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        read += 1;
        let Ok(body) = serde_json::from_str::<serde_json::Value>(&line) else {
            invalid += 1;
            continue;
        };
        let body = agent_registry::domain::server_json::publish_body(&body).unwrap_or(body);
        let Ok(draft) = AgentDraft::parse(&body) else {
            invalid += 1;
            continue;
        };
        let began = Instant::now();
        let report = scan::scan(&draft);
        each.push(began.elapsed());
        *by_severity.entry(report.max_severity).or_default() += 1;
        for finding in &report.findings {
            *by_rule.entry(finding.rule.to_string()).or_default() += 1;
            if finding.severity >= list {
                listed.push(format!(
                    "{} | {} | {} | {} | {}",
                    draft.package_name,
                    finding.rule,
                    finding.severity.as_str(),
                    finding.field,
                    finding.excerpt.replace('|', "\\|")
                ));
            }
        }
    }
    let scanned = read - invalid;
    println!(
        "{scanned} agents scanned ({invalid} lines not valid agents) in {:.2} s",
        started.elapsed().as_secs_f64()
    );
    each.sort_unstable();
    let at = |q: f64| {
        each.get(((each.len() as f64 - 1.0) * q) as usize)
            .copied()
            .unwrap_or_default()
    };
    let total: std::time::Duration = each.iter().sum();
    println!(
        "one agent's scan: median {:.1} µs, p99 {:.1} µs, max {:.1} µs; all of them {:.3} s",
        at(0.5).as_secs_f64() * 1e6,
        at(0.99).as_secs_f64() * 1e6,
        at(1.0).as_secs_f64() * 1e6,
        total.as_secs_f64()
    );
    println!("worst severity per agent:");
    for (severity, count) in &by_severity {
        println!(
            "  {:<8} {count:>6} ({:.2}%)",
            severity.as_str(),
            100.0 * *count as f64 / scanned.max(1) as f64
        );
    }
    println!("findings per rule:");
    for (rule, count) in &by_rule {
        println!("  {rule:<26} {count:>6}");
    }
    println!("findings at {} or above:", list.as_str());
    for row in &listed {
        println!("  {row}");
    }
    Ok(())
}
