"""ARD v0.91 conformance, checked against the real binary the way ARD's conformance kit checks a
registry (its three modes), written here from the specification rather than copied:

- manifest: `/.well-known/ard.json` (every page) parses, has an `entries` array, and every entry
  has an `urn:air:` identifier, a `displayName`, a `type`, exactly one of `url` and `data`, 2 to 5
  string `representativeQueries` when it has any, a `trustManifest` with an `identity` when it
  has one, and only scalar `metadata`;
- publisher: an ARD consumer resolving the registry's origin finds the manifest at
  `/.well-known/ard.json` (the path a consumer must fetch), and the home page links it;
- registry: at the API base the registry's own entry names, `GET /agents` answers a page with
  `items`; `POST /search` with the kit's probe (text "weather forecast tools", filter on the MCP
  server type, `federation: none`, `pageSize: 2`) answers results, each with an integer `score`
  from 0 to 100, a `source` and an `identifier`, and finds something (an empty list is not a
  pass); `POST /explore` answers `resultType: facets` and a `facets` object.

The registry is filled from the sample catalogue (examples/agents.jsonl) with `import` first.

Run through `scripts/interop.sh`, which builds the binary and the virtualenv.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Iterator
from email.message import Message
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "support"))
from fakes import registry_binary, running_registry  # noqa: E402

# urn:air:<publisher domain>[:<namespace>…]:<name>
URN = re.compile(r"^urn:air:[a-zA-Z0-9.-]+(?::[a-zA-Z0-9._:-]+)?:[a-zA-Z0-9._-]+$")
SAMPLE_LINES = 400


@pytest.fixture(scope="module")
def registry() -> Iterator[str]:
    binary = registry_binary()
    with tempfile.TemporaryDirectory() as data_dir:
        # The first lines of the sample, and every weather agent in it.
        lines = (ROOT / "examples" / "agents.jsonl").read_text().splitlines()
        chosen = lines[:SAMPLE_LINES] + [
            line for line in lines[SAMPLE_LINES:] if "weather" in line.lower()
        ]
        sample = Path(data_dir) / "sample.jsonl"
        sample.write_text("\n".join(chosen) + "\n")
        imported = subprocess.run(
            # The built-in table, as the server the suite starts ranks with: an import uses
            # bge-small when the user's models directory holds it, which would embed the
            # sample with an unoptimised test build for minutes.
            [str(binary), "import", str(sample), "--owner", "sample", "--go-live",
             "--embedder", "static", "--data-dir", data_dir],
            capture_output=True, text=True, timeout=600,
        )
        assert imported.returncode == 0, imported.stderr
        # The server ranks with the built-in table too: with bge-small in the models directory
        # an unoptimised build would embed the sample for minutes while the suite runs.
        env = {"REGISTRY_DATA_DIR": data_dir, "REGISTRY_EMBEDDER": "static"}
        with running_registry(binary, env) as base_url:
            yield base_url


def get(url: str) -> tuple[int, Message, bytes]:
    """Status, headers (looked up ignoring case) and body."""
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.status, response.headers, response.read()


def post(url: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.status, json.loads(response.read())


def entry_problems(entry: object) -> list[str]:
    """What ARD's entry rules find wrong with `entry` (errors only, not the kit's warnings)."""
    if not isinstance(entry, dict):
        return ["not an object"]
    problems = []
    identifier = entry.get("identifier")
    if not isinstance(identifier, str) or not URN.match(identifier):
        problems.append(f"identifier {identifier!r} is not urn:air:<publisher>:…:<name>")
    if not entry.get("displayName"):
        problems.append("no displayName")
    if not isinstance(entry.get("type"), str) or "/" not in entry["type"]:
        problems.append("no media type")
    if ("url" in entry) == ("data" in entry):
        problems.append("not exactly one of url and data")
    queries = entry.get("representativeQueries")
    if queries is not None and (
        not isinstance(queries, list)
        or not 2 <= len(queries) <= 5
        or not all(isinstance(q, str) for q in queries)
    ):
        problems.append(f"representativeQueries {queries!r}")
    trust = entry.get("trustManifest")
    if trust is not None and (not isinstance(trust, dict) or not trust.get("identity")):
        problems.append("trustManifest without identity")
    if isinstance(trust, dict):
        if trust.get("identityType", "other") not in ("spiffe", "did", "https", "other"):
            problems.append(f"trustManifest identityType {trust['identityType']!r}")
        for attestation in trust.get("attestations", []):
            if set(attestation) - {"type", "uri", "mediaType", "digest"} or not all(
                attestation.get(key) for key in ("type", "uri", "mediaType")
            ):
                problems.append(f"attestation {attestation!r}")
    if trust is not None and isinstance(identifier, str) and URN.match(identifier):
        publisher = identifier.split(":")[2]
        if trust.get("identity") != publisher:
            problems.append(f"trustManifest identity {trust.get('identity')!r} is not {publisher}")
    metadata = entry.get("metadata", {})
    if not isinstance(metadata, dict) or any(
        isinstance(value, (dict, list)) for value in metadata.values()
    ):
        problems.append("metadata is not an object of scalars")
    return problems


def manifest_pages(first_url: str) -> Iterator[dict]:
    url: str | None = first_url
    pages = 0
    while url is not None:
        status, headers, body = get(url)
        assert status == 200, url
        assert headers.get("Content-Type", "").startswith("application/json")
        manifest = json.loads(body)
        yield manifest
        pages += 1
        assert pages < 100, "the manifest pages end"
        nested = [e for e in manifest["entries"] if e.get("type") == "application/ai-catalog+json"]
        url = nested[0]["url"] if nested else None


def test_manifest_mode(registry: str) -> None:
    total = 0
    for manifest in manifest_pages(f"{registry}/.well-known/ard.json"):
        assert isinstance(manifest.get("entries"), list)
        for entry in manifest["entries"]:
            assert entry_problems(entry) == [], entry
            total += 1
    assert total > SAMPLE_LINES // 2
    # The predecessor's path serves the same document.
    assert get(f"{registry}/.well-known/ai-catalog.json")[2] == get(f"{registry}/.well-known/ard.json")[2]


def test_publisher_mode(registry: str) -> None:
    status, _, body = get(f"{registry}/.well-known/ard.json")
    assert status == 200
    assert json.loads(body)["entries"]
    _, headers, page = get(f"{registry}/")
    assert 'rel="ard"' in headers.get("Link", "")
    assert b'<link rel="ard" href="/.well-known/ard.json"' in page


def registry_base(registry: str) -> str:
    manifest = json.loads(get(f"{registry}/.well-known/ard.json")[2])
    [own] = [e for e in manifest["entries"] if e["type"] == "application/ai-registry+json"]
    return own["url"].rstrip("/")


def test_registry_mode(registry: str) -> None:
    base = registry_base(registry)
    assert base == f"{registry}/ard"

    status, _, body = get(f"{base}/agents")
    assert status == 200
    listing = json.loads(body)
    assert isinstance(listing.get("items"), list) and listing["items"]
    for entry in listing["items"]:
        assert entry_problems(entry) == [], entry

    status, answer = post(f"{base}/search", {
        "query": {"text": "weather forecast tools",
                  "filter": {"type": ["application/mcp-server-card+json"]}},
        "federation": "none",
        "pageSize": 2,
    })
    assert status == 200
    results = answer["results"]
    assert isinstance(results, list)
    assert results, "the search probe finds the sample's weather MCP servers"
    assert len(results) <= 2
    for result in results:
        assert isinstance(result["score"], int) and not isinstance(result["score"], bool)
        assert 0 <= result["score"] <= 100
        assert result["source"] == base
        assert URN.match(result["identifier"])
        assert result["type"] == "application/mcp-server-card+json"

    status, answer = post(f"{base}/explore", {
        "query": {"text": "weather"},
        "resultType": {"facets": [{"field": "type"}]},
    })
    assert status == 200
    assert answer["resultType"] == "facets"
    assert isinstance(answer["facets"], dict)
    assert answer["facets"]["type"]["buckets"]
