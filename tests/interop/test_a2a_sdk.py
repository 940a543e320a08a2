"""Interop with the official A2A Python SDK (`a2a-sdk` 1.x).

Starts the real `agent-registry` binary on a free loopback port, with the Wikipedia and finance
API origins pointed at a small local fake, then uses the SDK exactly as a client would: resolve
`/.well-known/agent-card.json` of the registry and of hosted utility agents, build a client from
each card, send `SendMessage`, and read the results.

Run through `scripts/interop.sh`, which builds the binary and the virtualenv.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.helpers import get_data_parts, get_text_parts, new_data_message, new_text_message
from a2a.types import AgentCard, Role, SendMessageRequest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "support"))
from fakes import HostedUpstreams  # noqa: E402
from fakes import hosted_agents_env, registry_binary, running_registry, serving  # noqa: E402

MASTER_KEY = "interop-master-key"


@pytest.fixture(scope="module")
def upstreams() -> Iterator[str]:
    with serving(HostedUpstreams) as origin:
        yield origin


@pytest.fixture(scope="module")
def registry(upstreams: str) -> Iterator[str]:
    with running_registry(registry_binary(), hosted_agents_env(MASTER_KEY, upstreams)) as base_url:
        yield base_url


def authorised_client() -> httpx.AsyncClient:
    return httpx.AsyncClient(headers={"Authorization": f"Bearer {MASTER_KEY}"}, timeout=30)


async def resolve(http: httpx.AsyncClient, agent_url: str) -> AgentCard:
    return await A2ACardResolver(http, agent_url).get_agent_card()


async def send(http: httpx.AsyncClient, card: AgentCard, request: SendMessageRequest) -> list:
    """Send through a client the SDK builds from the card; return the streamed responses."""
    client = ClientFactory(ClientConfig(httpx_client=http)).create(card)
    return [response async for response in client.send_message(request)]


def user_text(text: str, skill_id: str | None = None) -> SendMessageRequest:
    request = SendMessageRequest(message=new_text_message(text, role=Role.ROLE_USER))
    if skill_id:
        request.metadata.update({"skill_id": skill_id})
    return request


def user_data(data: dict, skill_id: str | None = None) -> SendMessageRequest:
    request = SendMessageRequest(message=new_data_message(data, role=Role.ROLE_USER))
    if skill_id:
        request.metadata.update({"skill_id": skill_id})
    return request


def only_message(responses: list):
    assert len(responses) == 1, responses
    assert responses[0].HasField("message"), responses[0]
    message = responses[0].message
    assert message.role == Role.ROLE_AGENT
    assert message.message_id
    return message


def test_the_sdk_resolves_the_registry_card_and_searches_through_send_message(registry: str) -> None:
    async def scenario() -> None:
        async with authorised_client() as http:
            card = await resolve(http, registry)
            assert card.name == "Agent Registry"
            assert [skill.id for skill in card.skills] == ["search_agents", "resolve_package"]
            assert card.supported_interfaces[0].url == f"{registry}/a2a/v1"
            assert card.supported_interfaces[0].protocol_binding == "JSONRPC"

            message = only_message(await send(http, card, user_text("current price of bitcoin")))

            [data] = get_data_parts(message.parts)
            packages = [agent["package_name"] for agent in data["agents"]]
            assert "registry.utility.finance" in packages, packages
            assert get_text_parts(message.parts)[0].startswith("Found ")

    asyncio.run(scenario())


def test_the_sdk_resolves_a_package_to_its_card(registry: str) -> None:
    async def scenario() -> None:
        async with authorised_client() as http:
            card = await resolve(http, registry)
            request = user_data({"package_name": "registry.utility.wiki"}, skill_id="resolve_package")

            message = only_message(await send(http, card, request))

            [data] = get_data_parts(message.parts)
            assert data["card"]["name"] == "Wikipedia Agent"

    asyncio.run(scenario())


def test_the_sdk_calls_the_finance_agent_from_its_card(registry: str) -> None:
    async def scenario() -> None:
        async with authorised_client() as http:
            card = await resolve(http, f"{registry}/a2a/utility/finance")
            assert card.name == "Finance Agent"
            assert [skill.id for skill in card.skills] == ["get_current_price"]
            assert card.supported_interfaces[0].url == f"{registry}/a2a/utility/finance/v1"

            message = only_message(await send(http, card, user_text("BTC")))

            [quote] = get_data_parts(message.parts)
            assert quote["symbol"] == "BTC"
            assert quote["price"] == pytest.approx(67012.345)
            assert quote["currency"] == "USD"
            assert quote["source"] == "coinbase"
            assert "BTC" in get_text_parts(message.parts)[0]

    asyncio.run(scenario())


def test_the_sdk_calls_the_wiki_agent_with_a_data_part_and_a_skill(registry: str) -> None:
    async def scenario() -> None:
        async with authorised_client() as http:
            card = await resolve(http, f"{registry}/a2a/utility/wiki")
            assert [skill.id for skill in card.skills] == ["search_page", "get_summary"]

            summary = only_message(
                await send(http, card, user_data({"page_id": "Ada Lovelace"}, skill_id="get_summary"))
            )
            search = only_message(await send(http, card, user_text("Ada Lovelace")))

            [page] = get_data_parts(summary.parts)
            assert page["title"] == "Ada Lovelace"
            assert "Countess of Lovelace" in page["summary"]
            [found] = get_data_parts(search.parts)
            assert found["results"][0]["page_id"] == "1208"
            assert found["best_match"]["title"] == "Ada Lovelace"

    asyncio.run(scenario())


def test_the_sdk_sees_an_unknown_symbol_as_an_invalid_params_error(registry: str) -> None:
    async def scenario() -> None:
        async with authorised_client() as http:
            card = await resolve(http, f"{registry}/a2a/utility/finance")
            with pytest.raises(Exception) as raised:
                await send(http, card, user_text("ZZZZ"))
            assert "ZZZZ" in str(raised.value)

    asyncio.run(scenario())


def test_the_utility_card_of_every_hosted_agent_parses_in_the_sdk(registry: str) -> None:
    async def scenario() -> None:
        async with httpx.AsyncClient(timeout=30) as http:
            for slug, name in [("wiki", "Wikipedia Agent"), ("finance", "Finance Agent"), ("reader", "Web Reader Agent")]:
                card = await resolve(http, f"{registry}/a2a/utility/{slug}")
                assert card.name == name
                assert card.supported_interfaces[0].url == f"{registry}/a2a/utility/{slug}/v1"
                assert "bearer" in card.security_schemes

    asyncio.run(scenario())


def test_the_sdk_maps_each_a2a_error_to_its_own_type(registry: str) -> None:
    from a2a.types import (
        GetTaskPushNotificationConfigRequest,
        GetTaskRequest,
        ListTasksRequest,
    )
    from a2a.utils.errors import (
        PushNotificationNotSupportedError,
        TaskNotFoundError,
    )

    async def scenario() -> None:
        async with authorised_client() as http:
            for agent_url in (registry, f"{registry}/a2a/utility/finance"):
                card = await resolve(http, agent_url)
                client = ClientFactory(ClientConfig(httpx_client=http)).create(card)

                with pytest.raises(TaskNotFoundError) as missing:
                    await client.get_task(GetTaskRequest(id="no-such-task"))
                assert missing.value.data == {"code": "task_not_found", "taskId": "no-such-task"}

                continued = user_text("BTC")
                continued.message.task_id = "no-such-task"
                with pytest.raises(TaskNotFoundError):
                    [response async for response in client.send_message(continued)]

                listed = await client.list_tasks(ListTasksRequest(page_size=5))
                assert list(listed.tasks) == [] and listed.next_page_token == ""
                assert listed.page_size == 5

                with pytest.raises(PushNotificationNotSupportedError):
                    await client.get_task_push_notification_config(
                        GetTaskPushNotificationConfigRequest(task_id="t-1", id="c-1")
                    )

    asyncio.run(scenario())


def test_the_sdk_verifies_the_registrys_signature_on_every_card_it_serves(registry: str) -> None:
    from google.protobuf.json_format import ParseDict
    from jwt import PyJWK

    from a2a.utils.signing import InvalidSignaturesError, create_signature_verifier

    async def scenario() -> None:
        async with authorised_client() as http:
            jwks_url = f"{registry}/.well-known/jwks.json"
            jwks = (await http.get(jwks_url)).json()

            def key_provider(kid: str | None, jku: str | None) -> PyJWK:
                assert jku == jwks_url, jku
                [key] = [key for key in jwks["keys"] if key["kid"] == kid]
                return PyJWK(key)

            verify = create_signature_verifier(key_provider, ["EdDSA", "ES256"])
            published = await http.post(
                f"{registry}/api/agents/publish",
                json={
                    "package_name": "com.example.signed",
                    "name": "Signed Weather",
                    "description": "Forecasts in °C — signed by the registry.",
                    "url": "https://weather.example.com/a2a/v1",
                    "tags": ["weather"],
                    "capabilities": [{"name": "forecast", "description": "Five days ahead"}],
                    "payment": {"model": "free"},
                },
            )
            assert published.status_code == 201, published.text
            live = await http.post(f"{registry}/api/agents/{published.json()['id']}/go-live")
            assert live.status_code == 200, live.text

            paths = [
                "/.well-known/agent-card.json",
                "/a2a/utility/wiki/.well-known/agent-card.json",
                "/a2a/utility/finance/.well-known/agent-card.json",
                "/a2a/utility/reader/.well-known/agent-card.json",
                "/public/agents/resolve/com.example.signed",
            ]
            for path in paths:
                card = await A2ACardResolver(http, registry, agent_card_path=path).get_agent_card(
                    signature_verifier=verify
                )
                assert card.signatures, path

            tampered = (await http.get(f"{registry}/public/agents/resolve/com.example.signed")).json()
            tampered["description"] = "Forecasts in °F."
            with pytest.raises(InvalidSignaturesError):
                verify(ParseDict(tampered, AgentCard(), ignore_unknown_fields=True))

    asyncio.run(scenario())


def jcs(value: object) -> bytes:
    """RFC 8785 for what cards hold (strings, integers, booleans, arrays, objects): sorted keys,
    no whitespace, UTF-8. Nothing is dropped: the card as served."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def verifies_as_served(card: dict, jwks: dict) -> bool:
    """Check a card's JWS over the card exactly as served (minus `signatures`), the A2A signing
    text read literally, without the SDK's dropping of empty and default members."""
    import base64

    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
    from jwt import PyJWK

    def b64decode(text: str) -> bytes:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))

    payload = {name: member for name, member in card.items() if name != "signatures"}
    encoded = base64.urlsafe_b64encode(jcs(payload)).rstrip(b"=").decode()
    [signature] = card["signatures"]
    header = json.loads(b64decode(signature["protected"]))
    [key] = [key for key in jwks["keys"] if key["kid"] == header["kid"]]
    public = PyJWK(key).key
    signing_input = f"{signature['protected']}.{encoded}".encode()
    raw = b64decode(signature["signature"])
    try:
        if header["alg"] == "ES256":
            der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
            public.verify(der, signing_input, ec.ECDSA(hashes.SHA256()))
        else:
            public.verify(raw, signing_input)
    except InvalidSignature:
        return False
    return True


def test_every_signed_card_verifies_as_served_without_dropping_members(registry: str) -> None:
    paths = [
        "/.well-known/agent-card.json",
        "/a2a/utility/wiki/.well-known/agent-card.json",
        "/a2a/utility/finance/.well-known/agent-card.json",
        "/a2a/utility/reader/.well-known/agent-card.json",
        "/public/agents/resolve/registry.utility.wiki",
    ]
    with httpx.Client(timeout=30) as http:
        jwks = http.get(f"{registry}/.well-known/jwks.json").json()
        for path in paths:
            card = http.get(f"{registry}{path}").json()
            assert verifies_as_served(card, jwks), path
            tampered = dict(card, description=card["description"] + " (changed)")
            assert not verifies_as_served(tampered, jwks), path
