"""A loopback stand-in for the hosted agents' upstream APIs (Wikipedia, Coinbase, Yahoo), so that
a fuzzed call of a hosted agent gets a real answer instead of an upstream failure.

Every crypto symbol has a price, every page a summary; stock charts are unknown (404).
"""

from __future__ import annotations

import sys
from http.server import ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
from fakes import ADA_SEARCH, ADA_SUMMARY, JsonHandler, serve  # noqa: E402


class Upstreams(JsonHandler):
    def do_GET(self) -> None:  # noqa: N802 (the http.server API)
        url = urlsplit(self.path)
        path = url.path
        if path.startswith("/v2/prices/") and path.endswith("/spot"):
            base = path.split("/")[3].rsplit("-", 1)[0]
            self.reply(200, {"data": {"amount": "67012.345", "base": base, "currency": "USD"}})
        elif path == "/w/rest.php/v1/search/page":
            self.reply(200, ADA_SEARCH)
        elif path.startswith("/api/rest_v1/page/summary/"):
            self.reply(200, ADA_SUMMARY)
        elif path == "/w/api.php":
            page_id = parse_qs(url.query).get("pageids", ["1208"])[0]
            page = {"pageid": int(page_id) if page_id.isdigit() else 1208, "title": "Ada Lovelace",
                    "extract": ADA_SUMMARY["extract"]}
            self.reply(200, {"query": {"pages": [page]}})
        else:
            self.reply(404, {"error": "not found"})


def start() -> tuple[ThreadingHTTPServer, str]:
    return serve(Upstreams)
