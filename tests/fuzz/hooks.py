"""Schemathesis hooks for scripts/fuzz.sh: rules of the registry that JSON Schema cannot state,
applied to the *valid* (positive) cases only, so that a valid case is valid for the server too.

The document says each of these in words; the generator cannot read words:
- capability names are distinct (after trimming);
- at most 32 distinct tags, 16 distinct payment protocols, 32 distinct rails (after normalising);
- a rail's `protocol` is one of the agent's `payment.protocols`;
- a payment's `price.asset` is the asset of one of its rails when it lists any;
- a card given with a publish body has its fields checked too, including the url of its first
  `supportedInterfaces` entry and its `skills` (the document describes only the text fields);
- an update keeps the agent's own `package_name` (the server knows it, the schema cannot);
- an `identifier` names the package's own domain as its publisher, and an update cannot change
  it (valid cases send none);
- a search `cursor` (also of the AI Catalog, the MCP server list and the audit log) and an ARD `pageToken` are
  opaque tokens from a previous page, not any string; the ARD listing's `filter` and `orderBy`
  are expressions of a small grammar (valid cases use a few real ones);
- an agent's versions exist only for agents that exist: half the valid cases of the version
  paths (decided by the generated identifier, so a run is reproducible) name a hosted agent and
  one of the versions it lists, so that their answers, not only 404s, are checked.
Invalid (negative) cases are left exactly as generated.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request

import schemathesis
from schemathesis.generation.modes import GenerationMode

BASE_URL = os.environ["FUZZ_BASE_URL"]
MASTER_KEY = os.environ["FUZZ_MASTER_KEY"]
WHITESPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
PROTOCOL_ALIASES = {"lsat": "l402", "bolt11": "lightning-invoice"}
SEARCH_PATHS = {"/public/agents", "/public/agents/search", "/a2a/discover", "/api/playground/session/{id}/discover", "/discovery/search",
                "/.well-known/ai-catalog.json", "/.well-known/ard.json", "/v0.1/servers", "/api/audit"}
# The ARD paths: `pageToken` is an opaque token from a previous page, and the listing's `filter`
# and `orderBy` are expressions in a grammar (docs/discovery.md) that JSON Schema does not spell.
ARD_TOKEN_PATHS = {"/ard/search", "/ard/agents"}
ARD_LIST_FILTERS = ["type = 'application/a2a-agent-card+json'", "displayName = wiki AND publisherId = utility.registry",
                    "updatedAfter > '2020-01-01'"]
ARD_LIST_ORDERS = ["displayName", "updatedAt DESC", "createdAt ASC, displayName DESC"]
PUBLISH_PATHS = {"/api/agents/publish", "/api/agents/{id}"}
VERSION_PATHS = {"/public/agents/{identifier}/versions", "/public/agents/{identifier}/versions/{version}"}
# Registered at start-up; the fuzzer may unpublish or delete it (it holds the master key), and
# then the version paths rightly answer 404.
KNOWN_AGENT = "registry.utility.wiki"


def trim(text: str) -> str:
    return text.strip(WHITESPACE)


def clean(text: str) -> str:
    """Trim and ASCII-lowercase, as the payment parser does."""
    return "".join(c.lower() if c.isascii() else c for c in trim(text))


def valid_text(value, limit: int, required: bool) -> bool:
    """As the publish parser reads a text field: trimmed, no NUL, at most `limit` characters."""
    if value is None:
        return not required
    if not isinstance(value, str) or "\x00" in value:
        return False
    return (not required or trim(value) != "") and len(trim(value)) <= limit


def distinct_prefix(items: list, key, limit: int) -> list:
    """The longest prefix of `items` with at most `limit` distinct keys."""
    seen: set = set()
    kept = []
    for item in items:
        k = key(item)
        if k not in seen and len(seen) == limit:
            break
        seen.add(k)
        kept.append(item)
    return kept


def repair_payment(payment: dict) -> None:
    protocols = payment.get("protocols")
    if isinstance(protocols, list):
        payment["protocols"] = protocols = distinct_prefix(
            protocols, lambda p: PROTOCOL_ALIASES.get(clean(p), clean(p)) if isinstance(p, str) else repr(p), 16
        )
    listed = {PROTOCOL_ALIASES.get(clean(p), clean(p)) for p in protocols or [] if isinstance(p, str)}
    rails = payment.get("rails")
    if isinstance(rails, list):
        for rail in rails:
            protocol = rail.get("protocol") if isinstance(rail, dict) else None
            if isinstance(protocol, str) and PROTOCOL_ALIASES.get(clean(protocol), clean(protocol)) not in listed:
                del rail["protocol"]
        payment["rails"] = rails = distinct_prefix(rails, lambda r: json.dumps(r, sort_keys=True), 32)
    price = payment.get("price")
    if isinstance(price, dict) and isinstance(rails, list) and rails:
        asset = rail_asset(rails[0])
        if asset is not None:
            price["asset"] = asset


def rail_asset(rail) -> str | None:
    """The asset text of a rail as the parser reads it (it normalises a price's asset alike)."""
    if isinstance(rail, str):
        return rail.rsplit(":", 1)[1] if ":" in rail else None
    if isinstance(rail, dict):
        asset = rail.get("asset")
        return asset if isinstance(asset, str) else rail.get("token") if isinstance(rail.get("token"), str) else None
    return None


def current_package_name(identifier: str) -> str | None:
    request = urllib.request.Request(
        f"{BASE_URL}/api/agents/{urllib.parse.quote(identifier, safe='')}",
        headers={"Authorization": f"Bearer {MASTER_KEY}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.load(response).get("package_name")
    except (urllib.error.URLError, ValueError):
        return None


def oldest_version(identifier: str) -> str | None:
    """The last version `GET /public/agents/{identifier}/versions` lists (an earlier one when the
    agent has several), or None when the agent is not public."""
    url = f"{BASE_URL}/public/agents/{urllib.parse.quote(identifier, safe='')}/versions"
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            versions = json.load(response).get("versions") or []
    except (urllib.error.URLError, ValueError):
        return None
    return versions[-1].get("version") if versions else None


def repair_version_case(case) -> None:
    parameters = dict(case.path_parameters or {})
    identifier = parameters.get("identifier")
    if not isinstance(identifier, str) or len(identifier) % 2:
        return
    parameters["identifier"] = KNOWN_AGENT
    if "version" in parameters:
        version = oldest_version(KNOWN_AGENT)
        if version is not None:
            parameters["version"] = version
    case.path_parameters = parameters


def repair_publish_body(case, body: dict) -> None:
    body.pop("identifier", None)
    capabilities = body.get("capabilities")
    if isinstance(capabilities, list):
        names: set = set()
        for index, capability in enumerate(capabilities):
            if isinstance(capability, dict) and isinstance(capability.get("name"), str):
                if trim(capability["name"]) in names:
                    capability["name"] = f"capability_{index}"
                names.add(trim(capability["name"]))
    tags = body.get("tags")
    if isinstance(tags, list):
        body["tags"] = distinct_prefix(tags, lambda t: trim(t).lower() if isinstance(t, str) else repr(t), 32)
    if isinstance(body.get("payment"), dict):
        repair_payment(body["payment"])
    card = body.get("card")
    if isinstance(card, dict):
        for key in ("supportedInterfaces", "url", "skills", "capabilities"):
            card.pop(key, None)
        # The card's text fields stand in for the body's missing ones, checked the same way.
        for key, limit in (("name", 200), ("description", 2000), ("version", 64)):
            if body.get(key) is None and key in card and not valid_text(card[key], limit, key != "version"):
                card[key] = "From the card"
    if case.method.upper() == "PUT" and isinstance(case.path_parameters.get("id"), str):
        package_name = current_package_name(case.path_parameters["id"])
        if package_name:
            body["package_name"] = package_name


@schemathesis.hook
def map_case(context, case):
    meta = getattr(case, "_meta", None)
    if meta is None or meta.generation.mode != GenerationMode.POSITIVE:
        return case
    path = case.operation.path
    if path in PUBLISH_PATHS and case.method.upper() in ("POST", "PUT") and isinstance(case.body, dict):
        body = case.body
        repair_publish_body(case, body)
        case.body = body
    if path in VERSION_PATHS:
        repair_version_case(case)
    if path in SEARCH_PATHS:
        if isinstance(case.query, dict) and "cursor" in case.query:
            query = dict(case.query)
            query.pop("cursor")
            case.query = query
        if isinstance(case.body, dict) and isinstance(case.body.get("cursor"), str):
            body = dict(case.body)
            body.pop("cursor")
            case.body = body
    if path in ARD_TOKEN_PATHS:
        if isinstance(case.query, dict) and "pageToken" in case.query:
            query = dict(case.query)
            query.pop("pageToken")
            case.query = query
        if isinstance(case.body, dict) and isinstance(case.body.get("pageToken"), str):
            body = dict(case.body)
            body.pop("pageToken")
            case.body = body
    if path == "/ard/agents" and isinstance(case.query, dict):
        query = dict(case.query)
        pick = len(json.dumps(query, sort_keys=True, default=str))
        if "filter" in query:
            query["filter"] = ARD_LIST_FILTERS[pick % len(ARD_LIST_FILTERS)]
        if "orderBy" in query:
            query["orderBy"] = ARD_LIST_ORDERS[pick % len(ARD_LIST_ORDERS)]
        case.query = query
    return case
