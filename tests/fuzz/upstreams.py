"""A loopback stand-in for the hosted agents' upstream APIs (Wikipedia, Coinbase, Yahoo), so that
a fuzzed call of a hosted agent gets a real answer instead of an upstream failure.

Every crypto symbol has a price, every page a summary; stock charts are unknown (404).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

SUMMARY = {
    "type": "standard",
    "title": "Ada Lovelace",
    "pageid": 1208,
    "description": "English mathematician (1815-1852)",
    "extract": "Augusta Ada King, Countess of Lovelace was an English mathematician and writer.",
    "content_urls": {"desktop": {"page": "https://en.wikipedia.org/wiki/Ada_Lovelace"}},
}
SEARCH = {
    "pages": [
        {
            "id": 1208,
            "key": "Ada_Lovelace",
            "title": "Ada Lovelace",
            "excerpt": "Ada King, Countess of Lovelace",
            "matched_title": None,
            "description": "English mathematician (1815-1852)",
            "thumbnail": None,
        }
    ]
}


class Upstreams(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (the http.server API)
        url = urlsplit(self.path)
        path = url.path
        if path.startswith("/v2/prices/") and path.endswith("/spot"):
            base = path.split("/")[3].rsplit("-", 1)[0]
            self.reply(200, {"data": {"amount": "67012.345", "base": base, "currency": "USD"}})
        elif path == "/w/rest.php/v1/search/page":
            self.reply(200, SEARCH)
        elif path.startswith("/api/rest_v1/page/summary/"):
            self.reply(200, SUMMARY)
        elif path == "/w/api.php":
            page_id = parse_qs(url.query).get("pageids", ["1208"])[0]
            page = {"pageid": int(page_id) if page_id.isdigit() else 1208, "title": "Ada Lovelace",
                    "extract": SUMMARY["extract"]}
            self.reply(200, {"query": {"pages": [page]}})
        else:
            self.reply(404, {"error": "not found"})

    def reply(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


def start() -> tuple[ThreadingHTTPServer, str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Upstreams)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"
