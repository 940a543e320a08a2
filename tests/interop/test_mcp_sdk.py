"""Interop with the official MCP Python SDK (`mcp`, the version scripts/interop.sh pins).

Starts the real `agent-registry` binary on a free loopback port, publishes an A2A agent and an
MCP server through the REST API, then uses the SDK's `Client` as a host would:
- over Streamable HTTP at `/mcp`, once in the SDK's default mode (it probes `server/discover`
  and speaks the stateless 2026-07-28 revision) and once in its handshake mode (`initialize`,
  a session, `DELETE` at the end);
- over stdio, launching `agent-registry mcp --registry URL` as a host launches a server, in
  both modes.
Each run initialises, lists tools, resources and templates, calls every tool with good and bad
arguments, reads every resource, and ends.

Run through `scripts/interop.sh`, which builds the binary and the virtualenv.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import httpx2
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "support"))
from fakes import registry_binary, running_registry  # noqa: E402

MASTER_KEY = "interop-mcp-master-key"
BINARY = registry_binary()
TOOLS = ["search_agents", "get_agent", "get_agent_card", "list_categories"]
AGENTS = [
    {
        "package_name": "com.example.weather",
        "name": "Weather Agent",
        "description": "Forecasts and current conditions for any city.",
        "url": "https://weather.example.com/a2a/v1",
        "category": "Weather",
        "tags": ["forecast", "realtime"],
        "payment": {"model": "paid", "protocols": ["x402"], "rails": ["base:usdc"]},
    },
    {
        "package_name": "io.github.acme.notes",
        "name": "Acme Notes",
        "description": "Keeps notes and weather diaries, as an MCP server.",
        "category": "Productivity",
        "tags": ["notes"],
        "remotes": [{"type": "streamable-http", "url": "https://notes.acme.example/mcp"}],
        "packages": [
            {"registry_type": "npm", "identifier": "@acme/notes", "version": "1.4.0", "transport": {"type": "stdio"}}
        ],
    },
]


@pytest.fixture(scope="module")
def registry() -> Iterator[str]:
    env = {"REGISTRY_MASTER_KEY": MASTER_KEY, "REGISTRY_PROBE_INTERVAL_SECS": "0"}
    with running_registry(BINARY, env) as base_url:
        headers = {"Authorization": f"Bearer {MASTER_KEY}"}
        for agent in AGENTS:
            published = httpx.post(f"{base_url}/api/agents/publish", json=agent, headers=headers, timeout=30)
            assert published.status_code == 201, published.text
            live = httpx.post(f"{base_url}/api/agents/{agent['package_name']}/go-live", headers=headers, timeout=30)
            assert live.status_code == 200, live.text
        yield base_url


def over_stdio(registry: str) -> StdioServerParameters:
    """How a host launches the stdio server (a host's configuration says the same)."""
    return StdioServerParameters(command=str(BINARY), args=["mcp", "--registry", registry])


async def exercise(client: Client, registry: str) -> None:
    """What a host does with the registry: every tool, good and bad, and every resource."""
    tools = (await client.list_tools()).tools
    assert [tool.name for tool in tools] == TOOLS
    for tool in tools:
        assert tool.input_schema["type"] == "object"
        assert tool.output_schema is not None and tool.output_schema["type"] == "object"

    found = await client.call_tool("search_agents", {"query": "weather forecast", "limit": 5})
    assert not found.is_error, found
    rest = httpx.post(f"{registry}/public/agents/search", json={"query": "weather forecast", "limit": 5}, timeout=30)
    expected = [agent["package_name"] for agent in rest.json()["agents"]]
    assert [agent["package_name"] for agent in found.structured_content["agents"]] == expected
    assert expected[0] == "com.example.weather", expected
    assert found.content[0].text.startswith("Found ")

    filtered = await client.call_tool("search_agents", {"query": "weather", "payment_rail": ["base:usdc"]})
    assert [a["package_name"] for a in filtered.structured_content["agents"]] == ["com.example.weather"]

    record = await client.call_tool("get_agent", {"agent": "com.example.weather"})
    assert record.structured_content["url"] == "https://weather.example.com/a2a/v1"
    assert record.structured_content == httpx.get(f"{registry}/public/agents/com.example.weather", timeout=30).json()

    card = await client.call_tool("get_agent_card", {"agent": "com.example.weather"})
    assert card.structured_content["a2a_card"]["signatures"], "signed as served"
    server = await client.call_tool("get_agent_card", {"agent": "io.github.acme.notes"})
    assert server.structured_content["server_json"]["name"] == "io.github.acme/notes"
    assert server.structured_content["connect"]["mcp_packages"][0]["args"] == ["-y", "@acme/notes@1.4.0"]

    categories = await client.call_tool("list_categories", {})
    assert categories.structured_content["category"]["Weather"] == 1
    assert categories.structured_content["total"] >= 3

    for name, arguments in [
        ("search_agents", {"limit": "many"}),
        ("search_agents", {"payment_model": ["gratis"]}),
        ("get_agent", {}),
        ("get_agent", {"agent": "com.example.nope"}),
        ("get_agent_card", {"agent": "agt_nope"}),
        ("list_categories", {"cursor": "x"}),
    ]:
        refused = await client.call_tool(name, arguments)
        assert refused.is_error, (name, arguments, refused)
        assert refused.content[0].text
    with pytest.raises(MCPError):
        await client.call_tool("drop_tables", {})

    resources = (await client.list_resources()).resources
    assert [str(resource.uri) for resource in resources] == ["registry://agent-card"]
    templates = (await client.list_resource_templates()).resource_templates
    assert [template.uri_template for template in templates] == ["agent://{package_name}", "agent-card://{package_name}"]

    own = json.loads((await client.read_resource("registry://agent-card")).contents[0].text)
    assert own["name"] == "Agent Registry"
    record_text = (await client.read_resource("agent://com.example.weather")).contents[0].text
    assert json.loads(record_text)["package_name"] == "com.example.weather"
    weather_card = json.loads((await client.read_resource("agent-card://com.example.weather")).contents[0].text)
    assert weather_card["supportedInterfaces"][0]["url"] == "https://weather.example.com/a2a/v1"
    notes_card = json.loads((await client.read_resource("agent-card://io.github.acme.notes")).contents[0].text)
    assert notes_card["name"] == "io.github.acme/notes"
    with pytest.raises(MCPError):
        await client.read_resource("agent://com.example.nope")


def test_the_sdk_speaks_the_stateless_revision_over_http(registry: str) -> None:
    async def scenario() -> None:
        async with Client(f"{registry}/mcp") as client:
            assert client.protocol_version == "2026-07-28"
            await exercise(client, registry)

    asyncio.run(scenario())


@pytest.mark.filterwarnings("ignore:ping is removed")
def test_the_sdk_opens_a_session_over_http_and_ends_it(registry: str) -> None:
    answers: list[tuple[str, int, str | None]] = []

    async def record(response: httpx2.Response) -> None:
        answers.append((response.request.method, response.status_code, response.headers.get("mcp-session-id")))

    async def scenario() -> None:
        http = httpx2.AsyncClient(timeout=httpx2.Timeout(30), event_hooks={"response": [record]})
        async with http, Client(streamable_http_client(f"{registry}/mcp", http_client=http), mode="legacy") as client:
            assert client.protocol_version == "2025-11-25"
            assert client.server_info is not None and client.server_info.name == "agent-registry"
            assert await client.send_ping() is not None
            await exercise(client, registry)

    asyncio.run(scenario())
    session = next(session for method, _, session in answers if session)
    assert ("DELETE", 204, None) in answers, answers
    after = httpx.post(
        f"{registry}/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"Mcp-Session-Id": session, "Accept": "application/json, text/event-stream"},
        timeout=30,
    )
    assert after.status_code == 404, after.text


def test_a_foreign_origin_is_refused(registry: str) -> None:
    response = httpx.post(
        f"{registry}/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}},
        headers={"Origin": "http://evil.example", "Accept": "application/json, text/event-stream"},
        timeout=30,
    )
    assert response.status_code == 403, response.text


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_the_sdk_drives_the_stdio_server_that_answers_from_the_registry(registry: str, mode: str) -> None:
    async def scenario() -> None:
        async with Client(over_stdio(registry), mode=mode) as client:
            assert client.protocol_version == ("2026-07-28" if mode == "auto" else "2025-11-25")
            await exercise(client, registry)

    asyncio.run(scenario())
