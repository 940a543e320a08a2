#!/usr/bin/env python3
"""A local MCP Registry API for benchmarks: GET /v0.1/servers with cursor pages (at most 100),
`updated_since`, every server as the official registry lists it (`{server, _meta}`), built from
the agents of a JSON Lines data set (or made up when none is given), repeated with numbered names
up to N. GET /_stats answers how many list requests it served.

Usage: fake-mcp-registry.py PORT N [DATA.jsonl]
"""
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

port, count = int(sys.argv[1]), int(sys.argv[2])
rows = []
if len(sys.argv) > 3:
    with open(sys.argv[3]) as data:
        rows = [json.loads(line) for line in data if line.strip()]
if not rows:
    rows = [{"package_name": f"io.github.made{i}.server", "name": f"Server {i}",
             "description": f"A made-up server number {i} for the mirror benchmark."} for i in range(1000)]

servers = []
for i in range(count):
    row = rows[i % len(rows)]
    labels = row["package_name"].split(".")
    namespace, short = ".".join(labels[:-1]) or "io.bench", labels[-1]
    server = {
        "$schema": "https://static.modelcontextprotocol.io/schemas/2025-10-17/server.schema.json",
        "name": f"{namespace}/{short}-{i:06d}",
        "title": row.get("name") or short,
        "description": (row.get("description") or "No description.")[:300],
        "version": "1.0.0",
    }
    if row.get("source_url"):
        server["repository"] = {"url": row["source_url"], "source": "github"}
    remotes = [r for r in (row.get("remotes") or []) if isinstance(r, dict) and r.get("url")]
    if remotes:
        server["remotes"] = [{"type": r.get("type", "streamable-http"), "url": r["url"]} for r in remotes[:2]]
    else:
        server["packages"] = [{"registryType": "npm", "identifier": f"@bench/{short}",
                               "version": "1.0.0", "transport": {"type": "stdio"}}]
    stamp = f"2025-{1 + i % 12:02d}-{1 + i % 28:02d}T{i % 24:02d}:{i % 60:02d}:00Z"
    servers.append((server["name"], {"server": server, "_meta": {
        "io.modelcontextprotocol.registry/official": {
            "status": "active", "publishedAt": stamp, "updatedAt": stamp, "isLatest": True}}}))
servers.sort(key=lambda item: item[0])
names = [name for name, _ in servers]
served = 0
lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def answer(self, body):
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        global served
        url = urlparse(self.path)
        if url.path == "/_stats":
            return self.answer({"served": served})
        if url.path != "/v0.1/servers":
            self.send_response(404)
            self.end_headers()
            return
        with lock:
            served += 1
        query = parse_qs(url.query)
        limit = min(int(query.get("limit", ["30"])[0]), 100)
        since = query.get("updated_since", [None])[0]
        start = 0
        if "cursor" in query:
            import bisect
            start = bisect.bisect_right(names, query["cursor"][0])
        page, last = [], None
        for name, item in servers[start:]:
            if since and item["_meta"]["io.modelcontextprotocol.registry/official"]["updatedAt"] < since:
                continue
            if len(page) == limit:
                break
            page.append(item)
            last = name
        more = last is not None and last != names[-1] and len(page) == limit
        metadata = {"count": len(page)}
        if more:
            metadata["nextCursor"] = last
        self.answer({"servers": page, "metadata": metadata})


ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
