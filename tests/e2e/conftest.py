"""Fixtures for the browser tests: a local fake of the hosted agents' upstreams (and a published
agent's card), the real registry binary on a free port, and headless Debian Chromium."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "support"))
from fakes import HostedUpstreams  # noqa: E402
from fakes import free_port, hosted_agents_env, registry_binary, running_registry, serving  # noqa: E402

ARTIFACTS = Path(os.environ.get("E2E_ARTIFACTS", ROOT / "target" / "e2e-artifacts"))
MASTER_KEY = "e2e-master-key"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")

# One page of the MCP Registry API, for the registry that mirrors it.
MIRRORED_SERVERS = {
    "servers": [{
        "server": {"name": "io.github.e2e/tides", "description": "Tide tables, mirrored from another registry.",
                   "version": "1.2.0", "packages": [{"registryType": "npm", "identifier": "@e2e/tides",
                                                     "version": "1.2.0", "transport": {"type": "stdio"}}]},
        "_meta": {"io.modelcontextprotocol.registry/official": {
            "status": "deprecated", "isLatest": True,
            "publishedAt": "2025-09-01T00:00:00Z", "updatedAt": "2025-09-01T00:00:00Z"}},
    }],
    "metadata": {"count": 1},
}

# Recorded shape of Coinbase's spot price (Wikipedia's answers are in tests/support/fakes.py).
def weather_card(endpoint: str) -> dict:
    return {
        "name": "Remote Weather",
        "description": "Forecasts from a card on the network.",
        "version": "2.0.1",
        "supportedInterfaces": [{"url": endpoint, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
        "capabilities": {"streaming": False, "pushNotifications": False},
        "defaultInputModes": ["application/json"],
        "defaultOutputModes": ["application/json"],
        "skills": [
            {"id": "get_forecast", "name": "Forecast", "description": "Forecast for a city", "tags": ["weather"]}
        ],
    }


class FakeUpstreams(HostedUpstreams):
    """The hosted agents' upstreams, an agent card for the console test, and an MCP Registry
    page for the mirroring registry."""

    def other(self, path: str) -> bool:
        host = f"http://{self.server.server_address[0]}:{self.server.server_address[1]}"
        if path == "/cards/weather.json":
            self.reply(200, weather_card(f"{host}/a2a/v1"))
        elif path == "/v0.1/servers":
            self.reply(200, MIRRORED_SERVERS)
        else:
            return False
        return True

    def do_POST(self) -> None:  # noqa: N802 (the http.server API)
        """A published agent's A2A JSON-RPC endpoint: SendMessage answers a forecast."""
        length = int(self.headers.get("Content-Length") or 0)
        try:
            request = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            request = {}
        if self.path.split("?", 1)[0] != "/a2a/v1" or request.get("method") != "SendMessage":
            self.reply(404, {"error": "not found"})
            return
        parts = request.get("params", {}).get("message", {}).get("parts", [])
        data = next((part["data"] for part in parts if isinstance(part.get("data"), dict)), {})
        city = data.get("city") or "Paris"
        self.reply(200, {
            "jsonrpc": "2.0",
            "id": request.get("id"),
            "result": {"message": {
                "messageId": "msg-forecast",
                "role": "ROLE_AGENT",
                "parts": [{"text": f"Sunny in {city}"}, {"data": {"city": city, "forecast": "sunny"}}],
            }},
        })


@pytest.fixture(scope="session")
def upstreams() -> Iterator[str]:
    with serving(FakeUpstreams) as origin:
        yield origin


@pytest.fixture(scope="session")
def registry(upstreams: str) -> Iterator[str]:
    env = {
        **hosted_agents_env(MASTER_KEY, upstreams),
        # The console test publishes from a card served by the local fake, which the
        # liveness prober (every second here) also reaches.
        "REGISTRY_OUTBOUND_ALLOW_PRIVATE": "true",
        "REGISTRY_PROBE_INTERVAL_SECS": "1",
        "REGISTRY_PROBE_TIMEOUT_SECS": "2",
    }
    with running_registry(registry_binary(), env) as base_url:
        yield base_url


@contextlib.contextmanager
def oidc_provider(redirect_uri: str) -> Iterator[str]:
    """A real OpenID provider (npm oidc-provider, tests/oidc) on loopback whose one client,
    `registry`, returns to `redirect_uri`: its issuer URL; stopped afterwards."""
    script = ROOT / "tests" / "oidc" / "provider.mjs"
    assert (ROOT / "tests" / "oidc" / "node_modules" / "oidc-provider").exists(), \
        "npm ci --prefix tests/oidc first (scripts/e2e.sh does)"
    with tempfile.TemporaryFile("w+") as log:
        process = subprocess.Popen(["node", str(script), redirect_uri], stdout=log, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 30
            issuer = ""
            while not issuer:
                assert process.poll() is None, "the OpenID provider exited"
                assert time.monotonic() < deadline, "the OpenID provider did not start in 30 s"
                time.sleep(0.1)
                log.seek(0)
                issuer = next((line[6:].strip() for line in log if line.startswith("ready ")), "")
            yield issuer
        finally:
            process.terminate()
            process.wait(timeout=10)


@pytest.fixture(scope="session")
def signin_registry() -> Iterator[str]:
    """A registry whose console signs people in through a real OpenID provider named `corp`."""
    port = free_port()
    with oidc_provider(f"http://127.0.0.1:{port}/auth/callback") as issuer:
        env = {"REGISTRY_MASTER_KEY": MASTER_KEY, "REGISTRY_PROBE_INTERVAL_SECS": "0",
               "REGISTRY_OIDC_PROVIDERS": f"corp={issuer}",
               "REGISTRY_OIDC_CORP_CLIENT_ID": "registry",
               "REGISTRY_OIDC_CORP_CLIENT_SECRET": "registry-secret"}
        with running_registry(registry_binary(), env, port=port) as base_url:
            yield base_url


@pytest.fixture(scope="session")
def mirroring_registry(upstreams: str) -> Iterator[str]:
    """A second registry that mirrors the fake's MCP Registry API page."""
    env = {"REGISTRY_MASTER_KEY": MASTER_KEY, "REGISTRY_MIRRORS": f"mcp-registry={upstreams}",
           "REGISTRY_PROBE_INTERVAL_SECS": "0"}
    with running_registry(registry_binary(), env) as base_url:
        yield base_url


def api(base_url: str, method: str, path: str, body: dict | None = None, token: str = MASTER_KEY) -> tuple[int, dict]:
    """One JSON API call outside the browser (setup and cross-checks)."""
    request = urllib.request.Request(
        f"{base_url}{path}",
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            text = response.read()
            return response.status, json.loads(text) if text else {}
    except urllib.error.HTTPError as err:
        text = err.read()
        return err.code, json.loads(text) if text else {}


@pytest.fixture(scope="session")
def token(registry: str) -> str:
    status, body = api(registry, "POST", "/api/tokens", {"owner": "alice", "expires_in_days": 1})
    assert status == 201, body
    return body["token"]


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    assert Path(CHROMIUM).exists(), f"{CHROMIUM} is missing: scripts/e2e.sh installs Debian's chromium"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        yield browser
        browser.close()


@pytest.fixture
def page(browser: Browser, registry: str) -> Iterator[Page]:
    context = browser.new_context(base_url=registry, viewport={"width": 1280, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    page.set_default_timeout(10_000)
    yield page
    context.close()
    assert not errors, f"uncaught errors in the page: {errors}"


def screenshot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.evaluate("window.scrollTo(0, 0)")  # the sticky header belongs at the top
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
