//! Run the scanner over a catalogue of publish bodies (JSON Lines) and say what it finds: how
//! many agents at each worst severity, the count per rule, and every finding at `high` or above
//! (what `--scan-policy block` would refuse), to be reviewed by hand.
//!
//! ```sh
//! cargo run --release --example scan_corpus -- examples/agents.jsonl
//! cargo run --release --example scan_corpus -- path/to/agents-real.jsonl --list medium
//! ```

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
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
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
        let report = scan::scan(&draft);
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
