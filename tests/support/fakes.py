"""What the Python suites (interop, browser, fuzz) share: recorded-shape Wikipedia answers, a JSON
handler for loopback stand-ins of upstream APIs, free ports, and waiting for a started registry.

Standard library only; each suite puts this directory on `sys.path`.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ADA_SUMMARY = {
    "type": "standard",
    "title": "Ada Lovelace",
    "pageid": 1208,
    "description": "English mathematician (1815–1852)",
    "extract": "Augusta Ada King, Countess of Lovelace was an English mathematician and writer.",
    "content_urls": {"desktop": {"page": "https://en.wikipedia.org/wiki/Ada_Lovelace"}},
}
ADA_SEARCH = {
    "pages": [
        {
            "id": 1208,
            "key": "Ada_Lovelace",
            "title": "Ada Lovelace",
            "excerpt": '<span class="searchmatch">Ada</span> King, Countess of Lovelace',
            "matched_title": None,
            "description": "English mathematician (1815–1852)",
            "thumbnail": None,
        }
    ]
}


class JsonHandler(BaseHTTPRequestHandler):
    """A quiet request handler that answers JSON; subclasses route `do_GET`."""

    def reply(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


BTC_SPOT = {"data": {"amount": "67012.345", "base": "BTC", "currency": "USD"}}


class HostedUpstreams(JsonHandler):
    """Coinbase and Wikipedia at their real paths, with recorded-shape answers: what the hosted
    agents call. A suite serves more paths by overriding `other`."""

    def do_GET(self) -> None:  # noqa: N802 (the http.server API)
        path = self.path.split("?", 1)[0]
        if path == "/v2/prices/BTC-USD/spot":
            self.reply(200, BTC_SPOT)
        elif path == "/w/rest.php/v1/search/page":
            self.reply(200, ADA_SEARCH)
        elif path == "/api/rest_v1/page/summary/Ada_Lovelace":
            self.reply(200, ADA_SUMMARY)
        elif self.other(path):
            pass
        elif path.startswith("/v2/prices/"):
            self.reply(404, {"errors": [{"id": "not_found", "message": "Invalid base currency"}]})
        else:
            self.reply(404, {"type": "https://mediawiki.org/wiki/HyperSwitch/errors/not_found"})

    def other(self, path: str) -> bool:
        """Answers a GET of `path` this stand-in does not know, if the suite serves it."""
        return False


def serve(handler: type[BaseHTTPRequestHandler]) -> tuple[ThreadingHTTPServer, str]:
    """Serve `handler` on a free loopback port in a daemon thread: the server and its origin."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """`serve(handler)` for the length of a `with`: its origin; shut down afterwards."""
    server, origin = serve(handler)
    try:
        yield origin
    finally:
        server.shutdown()


REPOSITORY = Path(__file__).resolve().parents[2]


def registry_binary() -> Path:
    """The registry the suites start: `REGISTRY_BIN`, else the debug build."""
    return Path(os.environ.get("REGISTRY_BIN", REPOSITORY / "target" / "debug" / "agent-registry"))


def hosted_agents_env(master_key: str, upstreams: str) -> dict[str, str]:
    """A registry's environment whose hosted agents call the fake upstreams at `upstreams`."""
    return {
        "REGISTRY_MASTER_KEY": master_key,
        "REGISTRY_WIKI_API_URL": upstreams,
        "REGISTRY_FINANCE_CRYPTO_API_URL": upstreams,
        "REGISTRY_FINANCE_STOCK_API_URL": upstreams,
        "REGISTRY_UPSTREAM_TIMEOUT_SECS": "5",
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until_ready(base_url: str, process: subprocess.Popen, log: Path, seconds: float = 60) -> None:
    """Wait until the registry at `base_url` answers `/readyz` 200 (`/healthz` answers while it
    is still starting); AssertionError with its log if it exits or takes longer."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"the registry exited with {process.returncode}:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(f"{base_url}/readyz", timeout=1) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"the registry did not become ready:\n{log.read_text()}")


@contextmanager
def running_registry(binary: Path, env: dict[str, str], port: int | None = None) -> Iterator[str]:
    """`binary serve` on a free loopback port (or `port`) with a fresh data directory, `env` over
    the environment: its base URL (also its public URL) once it is ready; stopped afterwards."""
    assert binary.exists(), f"build the registry first: {binary} is missing"
    port = port or free_port()
    base_url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as data_dir:
        env = {
            **os.environ,
            "REGISTRY_BIND": f"127.0.0.1:{port}",
            "REGISTRY_DATA_DIR": data_dir,
            "REGISTRY_PUBLIC_URL": base_url,
            **env,
        }
        log_path = Path(data_dir) / "registry.log"
        with open(log_path, "w") as log:
            process = subprocess.Popen([str(binary), "serve"], env=env, stdout=log, stderr=log)
            try:
                wait_until_ready(base_url, process, log_path)
                yield base_url
            finally:
                process.terminate()
                process.wait(timeout=20)
