"""Side-by-side: a labelled scanner corpus through Cisco's MCP scanner (YARA analyser only).

The registry's scanner (src/domain/scan.rs, rules in docs/security.md) is measured on
eval/scan/labelled.jsonl. This script runs the same corpus through an existing scanner, the
PyPI package `cisco-ai-mcp-scanner`, with nothing but its YARA analyser: no LLM, no Cisco AI
Defense API, no VirusTotal, no MCP server. It needs no network, and makes sure of it: before the
package is imported every outgoing socket connection and name lookup is made to fail, and
litellm (pulled in by the package's imports) is told to use its bundled model list.

Install the peer (in its own virtualenv, not in the project):

    python3 -m venv /tmp/peer-venv
    /tmp/peer-venv/bin/pip install cisco-ai-mcp-scanner==4.8.7

Run (from the repository root):

    /tmp/peer-venv/bin/python eval/scan/peer.py                      # eval/scan/labelled.jsonl
    /tmp/peer-venv/bin/python eval/scan/peer.py other.jsonl --json   # machine-readable

Each corpus line is {"kind": "attack"|"benign", "text": ..., "expect": [rule ids]}; a line
without "expect" may instead have "technique": a rule id ("none" for benign), read as
"expect": [technique] for an attack and [] for benign. Each text becomes one MCP tool named
"tool" in a tools/list document, which the package's own offline path scans
(StaticAnalyzer.scan_tools_file with a YaraAnalyzer: what `mcp-scanner static --tools FILE
--analyzers yara` does). By default the text is the tool's description and the
input schema is a minimal one; `--field schema` puts the text in the description of an input
parameter instead (the package scans the schema as a JSON dump, non-ASCII escaped).

An attack counts as detected when the peer reports any finding for its tool; a benign text
that gets any finding is a false positive. Each attack counts once under each of the rule ids
it is labelled with (our rule ids are used as the technique labels).
"""

import argparse
import asyncio
import json
import logging
import os
import socket
import sys
import tempfile
from collections import Counter, OrderedDict
from pathlib import Path

PEER_PACKAGE = "cisco-ai-mcp-scanner"
PINNED_VERSION = "4.8.7"
TOOL_NAME = "tool"
MINIMAL_SCHEMA = {"type": "object", "properties": {"input": {"type": "string"}}}
# A tool that must come back clean: shows the wrapping itself (name, schema) finds nothing.
CONTROL_TEXT = "Adds two numbers and returns the sum."


# ---------------------------------------------------------------- no network


class NetworkBlocked(OSError):
    pass


def forbid_network():
    """Make every non-local socket connection and every name lookup fail."""

    def refuse(*_args, **_kwargs):
        raise NetworkBlocked("network disabled by eval/scan/peer.py")

    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex

    def guarded(real):
        def connect(sock, address):
            if sock.family == getattr(socket, "AF_UNIX", None):
                return real(sock, address)
            refuse()

        return connect

    socket.socket.connect = guarded(real_connect)
    socket.socket.connect_ex = guarded(real_connect_ex)
    socket.create_connection = refuse
    socket.getaddrinfo = refuse
    socket.gethostbyname = refuse
    socket.gethostbyname_ex = refuse


# ---------------------------------------------------------------- helpers


def show(text, limit=90):
    """One-line excerpt with invisible / control characters written as \\u{...}."""
    out = []
    for ch in text:
        cp = ord(ch)
        invisible = (
            cp < 0x20
            or 0x200B <= cp <= 0x200F
            or 0x202A <= cp <= 0x202E
            or 0x2060 <= cp <= 0x2069
            or cp == 0xFEFF
            or 0xE0000 <= cp <= 0xE007F
        )
        out.append("\\u{%X}" % cp if invisible else ch)
    s = "".join(out)
    return s if len(s) <= limit else s[: limit - 1] + "…"


def load_corpus(path):
    entries = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                item = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"{path}:{lineno}: not JSON: {e}")
            if item.get("kind") not in ("attack", "benign") or not isinstance(item.get("text"), str):
                sys.exit(f"{path}:{lineno}: needs kind attack|benign and a text")
            technique = item.get("technique") if item["kind"] == "attack" else None
            item.setdefault("expect", [technique] if technique else [])
            item["line"] = lineno
            entries.append(item)
    return entries


def as_tool(text, field):
    if field == "description":
        return {"name": TOOL_NAME, "description": text, "inputSchema": MINIMAL_SCHEMA}
    schema = {
        "type": "object",
        "properties": {"notes": {"type": "string", "description": text}},
    }
    return {"name": TOOL_NAME, "description": "", "inputSchema": schema}


def severity_rank(sev):
    order = ["UNKNOWN", "SAFE", "INFO", "LOW", "MEDIUM", "HIGH", "CRITICAL"]
    return order.index(sev) if sev in order else 0


# ---------------------------------------------------------------- the peer


def run_peer(entries, field):
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    os.environ.pop("MCP_SCANNER_YARA_RULES_DIR", None)  # the package's own rules only
    forbid_network()
    logging.disable(logging.WARNING)
    try:
        from importlib.metadata import version

        from mcpscanner.config.constants import MCPScannerConstants
        from mcpscanner.core.analyzers.static_analyzer import StaticAnalyzer
        from mcpscanner.core.analyzers.yara_analyzer import YaraAnalyzer
        import yara
    except ImportError as e:
        sys.exit(
            f"cannot import the peer ({e}); install it: pip install {PEER_PACKAGE}=={PINNED_VERSION}"
        )
    peer_version = version(PEER_PACKAGE)

    # The package's path: a tools/list document, its static scanner, its YARA analyser.
    tools = [as_tool(e["text"], field) for e in entries]
    tools.append(as_tool(CONTROL_TEXT, field))
    with tempfile.TemporaryDirectory() as tmp:
        doc = Path(tmp) / "tools.json"
        doc.write_text(json.dumps({"tools": tools}, ensure_ascii=False), encoding="utf-8")
        scanner = StaticAnalyzer(analyzers=[YaraAnalyzer()])
        results = asyncio.run(scanner.scan_tools_file(doc))
    if len(results) != len(tools):
        sys.exit(f"peer returned {len(results)} results for {len(tools)} tools")

    # For the report only: which strings of which rule matched. The same rule files are
    # compiled again and matched on the two texts the package scans per tool (the
    # description, and the tool minus its description as JSON).
    rules_dir = MCPScannerConstants.get_yara_rules_path()
    rule_files = sorted(p.name for p in rules_dir.iterdir() if p.name.endswith((".yara", ".yar")))
    rules = yara.compile(sources={n: (rules_dir / n).read_text(encoding="utf-8") for n in rule_files})

    def matched_strings(tool):
        parts = {}
        if tool.get("description"):
            parts["description"] = tool["description"]
        parts["parameters"] = json.dumps({k: v for k, v in tool.items() if k != "description"})
        why = {}
        for where, content in parts.items():
            for m in rules.match(data=content):
                ids = sorted({s.identifier for s in m.strings})
                why.setdefault(m.rule, []).extend(f"{where}:{i}" for i in ids)
        return why

    out = []
    for tool, res in zip(tools, results):
        why = matched_strings(tool)
        findings = []
        for f in res["findings"]:
            raw = (f.details or {}).get("raw_response", {})
            rule = raw.get("rule", "?")
            findings.append(
                {
                    "rule": rule,
                    "threat_type": (f.details or {}).get("threat_type"),
                    "threat_category": f.threat_category,
                    "severity": f.severity,
                    "content_type": (f.details or {}).get("content_type"),
                    "strings": why.get(rule, []),
                }
            )
        out.append(
            {
                "status": res.get("status"),
                "errors": res.get("analyzer_errors", []),
                "flagged": bool(findings),
                "max_severity": max((f["severity"] for f in findings), key=severity_rank, default="NONE"),
                "findings": findings,
            }
        )
    control = out.pop()
    peer = {
        "package": PEER_PACKAGE,
        "version": peer_version,
        "analyser": "YARA (StaticAnalyzer.scan_tools_file + YaraAnalyzer, default rules)",
        "rule_files": rule_files,
        "yara_python": getattr(yara, "__version__", "?"),
        "control_clean": not control["flagged"] and control["status"] == "completed",
    }
    return peer, out


# ---------------------------------------------------------------- summary


def summarise(entries, results):
    attacks = [(e, r) for e, r in zip(entries, results) if e["kind"] == "attack"]
    benign = [(e, r) for e, r in zip(entries, results) if e["kind"] == "benign"]
    per_technique = OrderedDict()
    for e, r in attacks:
        for label in e["expect"] or ["(unlabelled)"]:
            t = per_technique.setdefault(label, {"detected": 0, "total": 0})
            t["total"] += 1
            t["detected"] += r["flagged"]
    peer_rules = {"attack": Counter(), "benign": Counter()}
    for e, r in zip(entries, results):
        for rule in sorted({f["rule"] for f in r["findings"]}):
            peer_rules[e["kind"]][rule] += 1
    return {
        "attacks": {"detected": sum(r["flagged"] for _, r in attacks), "total": len(attacks)},
        "benign": {"flagged": sum(r["flagged"] for _, r in benign), "total": len(benign)},
        "per_technique": dict(sorted(per_technique.items())),
        "peer_rules_fired": {k: dict(v.most_common()) for k, v in peer_rules.items()},
        "incomplete_scans": sum(r["status"] != "completed" for r in results),
    }


def print_text(corpus, field, peer, entries, results, summary):
    print(f"peer: {peer['package']} {peer['version']}, {peer['analyser']}")
    print(f"      rule files: {', '.join(peer['rule_files'])}; yara-python {peer['yara_python']}")
    print(f"corpus: {corpus} ({len(entries)} entries), text placed in: tool {field}")
    print(f"control tool ({CONTROL_TEXT!r}) clean: {peer['control_clean']}")
    print()
    for i, (e, r) in enumerate(zip(entries, results), 1):
        verdict = f"FLAGGED {r['max_severity']}" if r["flagged"] else "clean"
        if e["kind"] == "attack":
            mark = "hit " if r["flagged"] else "MISS"
        else:
            mark = "FP  " if r["flagged"] else "ok  "
        expect = ",".join(e["expect"]) or "-"
        print(f"{i:3d} {mark} {e['kind']:6s} expect=[{expect}] peer={verdict}")
        print(f"         text: {show(e['text'])}")
        for f in r["findings"]:
            strings = " ".join(f["strings"])
            print(
                f"         peer: {f['rule']} / {f['threat_type']} ({f['threat_category']}) / {f['severity']}"
                f" on {f['content_type']} ({strings})"
            )
        if r["status"] != "completed":
            print(f"         peer status: {r['status']} {r['errors']}")
    s = summary
    print()
    print("summary")
    a, b = s["attacks"], s["benign"]
    print(f"  attacks detected by peer: {a['detected']}/{a['total']}")
    print(f"  benign flagged by peer (false positives): {b['flagged']}/{b['total']}")
    print("  per technique (our rule id as the label; an attack counts under each of its labels):")
    width = max([len(k) for k in s["per_technique"]] + [10])
    for label, t in s["per_technique"].items():
        print(f"    {label:{width}s} {t['detected']}/{t['total']}")
    for kind in ("attack", "benign"):
        fired = ", ".join(f"{k} {v}" for k, v in s["peer_rules_fired"][kind].items()) or "none"
        print(f"  peer rules fired on {kind} entries: {fired}")
    if s["incomplete_scans"]:
        print(f"  WARNING: {s['incomplete_scans']} scans did not complete")


def main():
    here = Path(__file__).resolve().parent
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpus", nargs="?", default=str(here / "labelled.jsonl"),
                    help="labelled corpus JSONL (default: eval/scan/labelled.jsonl)")
    ap.add_argument("--json", action="store_true", help="print machine-readable results")
    ap.add_argument("--field", choices=("description", "schema"), default="description",
                    help="put each text in the tool description (default) or in an input "
                         "parameter's description")
    args = ap.parse_args()

    entries = load_corpus(args.corpus)
    peer, results = run_peer(entries, args.field)
    summary = summarise(entries, results)
    if args.json:
        doc = {
            "peer": peer,
            "corpus": args.corpus,
            "field": args.field,
            "entries": [
                {"line": e["line"], "kind": e["kind"], "expect": e["expect"], "text": e["text"], "peer": r}
                for e, r in zip(entries, results)
            ],
            "summary": summary,
        }
        json.dump(doc, sys.stdout, ensure_ascii=False, indent=1)
        print()
    else:
        print_text(args.corpus, args.field, peer, entries, results, summary)


if __name__ == "__main__":
    main()
