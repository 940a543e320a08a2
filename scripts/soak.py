"""Soak driver for scripts/soak.sh: CONCURRENCY asyncio workers send a weighted mix of valid
requests to a running registry for MINUTES minutes. Every minute it prints and appends one line
to <outdir>/soak.tsv (requests, req/s, p50/p99 latency, unexpected answers, the server's
resident memory and open file descriptors); unexpected answers go to <outdir>/errors.tsv, and
the closing summary to <outdir>/summary.txt.

An answer is unexpected when it is a 5xx, a connection error, a timeout, or a status that the
request's kind never expects (every request sent is valid, so any 4xx is one). Exit status: 1 if
any 5xx, connection error or timeout happened or the server exited, 2 if only other unexpected
statuses did, 0 otherwise.

The master key comes from the environment variable SOAK_MASTER_KEY (not the command line, which
other users of the machine can read).
"""

from __future__ import annotations

import argparse
import array
import asyncio
import collections
import json
import math
import os
import random
import sys
import time

import httpx

# Share of each kind of action in the mix (percent).
WEIGHTS = {
    "search": 45,
    "resolve": 15,
    "jsonrpc": 12,
    "write": 15,
    "playground": 8,
    "healthz": 5,
}
QUERY_COUNT = 1000
# Live agents a worker keeps of its own: it publishes below this, deletes at it.
OWN_AGENTS = 5
# A playground session holds at most 200 steps; a worker starts a new one well before.
SESSION_STEPS = 150
# Longer than the server's own request timeout (60 s), so that its 503 is seen first.
REQUEST_TIMEOUT = 70.0
# Unexpected answers written to errors.tsv one by one; past this only counted.
ERROR_LINES = 20000

# Unexpected answers that fail the run: the server broke, not just refused (JSON-RPC -32603 is
# its internal or upstream error, the 5xx of that protocol).
FATAL = {"connection", "timeout", "rpc-32603"}

VOCABULARY = (
    "weather forecast travel booking flight hotel price crypto stock market news summary "
    "translate document invoice payment email calendar schedule meeting code review search "
    "recipe music image map route traffic fitness contract research chart report sales support"
).split()


def percentile(sorted_values, fraction: float) -> float:
    """Nearest-rank percentile of an already sorted sequence; 0 when empty."""
    if not sorted_values:
        return 0.0
    rank = max(1, math.ceil(fraction * len(sorted_values)))
    return sorted_values[rank - 1]


def slope(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of y over x; None with fewer than two distinct x."""
    if len(points) < 2:
        return None
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    var = sum((x - mean_x) ** 2 for x, _ in points)
    if var == 0:
        return None
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / var


def server_memory_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def server_fds(pid: int) -> int | None:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


class Stats:
    """Latencies and unexpected answers, per minute and in total."""

    def __init__(self, outdir: str):
        self.minute_latencies: list[float] = []
        self.minute_errors = 0
        self.by_kind: dict[str, array.array] = collections.defaultdict(lambda: array.array("d"))
        self.statuses: collections.Counter = collections.Counter()
        self.unexpected: collections.Counter = collections.Counter()
        self.fatal = 0  # 5xx, connection errors, timeouts
        self.error_lines = 0
        self.errors_file = open(os.path.join(outdir, "errors.tsv"), "w", buffering=1)
        self.errors_file.write("utc\tminute\tkind\tmethod\tpath\tstatus\tdetail\n")
        self.minute = 1

    def record(self, kind: str, method: str, path: str, status, elapsed_ms: float | None,
               expected: bool, detail: str = "") -> None:
        if elapsed_ms is not None:
            self.minute_latencies.append(elapsed_ms)
            self.by_kind[kind].append(elapsed_ms)
        self.statuses[(kind, status)] += 1
        if expected:
            return
        self.minute_errors += 1
        self.unexpected[(kind, status)] += 1
        if status in FATAL or (isinstance(status, int) and status >= 500):
            self.fatal += 1
        if self.error_lines < ERROR_LINES:
            self.error_lines += 1
            utc = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            detail = " ".join(detail.split())[:300]
            self.errors_file.write(
                f"{utc}\t{self.minute}\t{kind}\t{method}\t{path}\t{status}\t{detail}\n")


class Driver:
    def __init__(self, args, client: httpx.AsyncClient, agents: list[dict], stats: Stats):
        self.args = args
        self.client = client
        self.stats = stats
        self.agents = agents
        self.packages = [agent["package_name"] for agent in agents]
        rng = random.Random(args.seed)
        self.queries = build_queries(agents, rng)
        self.tags = sorted({tag for agent in agents for tag in agent.get("tags") or []
                            if tag.replace("-", "").isalnum() and len(tag) <= 40})
        self.categories = sorted({agent["category"] for agent in agents if agent.get("category")})
        self.tokens: dict[str, str] = {}
        self.deadline = 0.0
        self.run_id = f"{int(time.time()) % 1000000}"

    async def request(self, kind: str, method: str, path: str, expect: tuple[int, ...],
                      token: str | None = None, **kwargs) -> httpx.Response | None:
        headers = kwargs.pop("headers", {})
        if token:
            headers["Authorization"] = f"Bearer {token}"
        started = time.perf_counter()
        response = None
        detail = ""
        try:
            response = await self.client.request(method, path, headers=headers, **kwargs)
            status = response.status_code
            if status not in expect:
                detail = response.text
        except httpx.TimeoutException as error:
            status, detail = "timeout", f"{type(error).__name__}: {error}"
        except httpx.TransportError as error:
            status, detail = "connection", f"{type(error).__name__}: {error}"
        elapsed_ms = (time.perf_counter() - started) * 1000
        expected = isinstance(status, int) and status in expect
        if expected and kind.startswith("rpc.") and response is not None:
            # JSON-RPC answers HTTP 200 with either a result or an error.
            try:
                body = response.json()
            except ValueError:
                body = None
            if not isinstance(body, dict) or "result" not in body:
                error = body.get("error") if isinstance(body, dict) else None
                code = error.get("code") if isinstance(error, dict) else "no-result"
                status, expected, detail = f"rpc{code}", False, response.text
        self.stats.record(kind, method, path, status, elapsed_ms, expected, detail)
        return response if expected else None

    # -- set-up ------------------------------------------------------------------------------

    async def make_tokens(self, master_key: str) -> None:
        for scope in ("agents:write", "a2a", "playground"):
            response = await self.client.post(
                "/api/tokens", headers={"Authorization": f"Bearer {master_key}"},
                json={"owner": "soak", "scopes": [scope], "expires_in_days": 2})
            if response.status_code != 201:
                raise SystemExit(f"soak: POST /api/tokens for {scope} answered "
                                 f"{response.status_code}: {response.text[:300]}")
            self.tokens[scope] = response.json()["token"]

    # -- the mix -----------------------------------------------------------------------------

    def filters(self, rng: random.Random) -> dict[str, str]:
        choice = rng.randrange(6)
        if choice == 0 and self.tags:
            return {"tags": rng.choice(self.tags)}
        if choice == 1:
            return {"payment_model": rng.choice(["free", "paid", "freemium"])}
        if choice == 2:
            return {"payment_rail": rng.choice(["base:", "base:usdc", "usdc"])}
        if choice == 3 and self.categories:
            return {"category": rng.choice(self.categories)}
        if choice == 4:
            return {"verification_level": "unverified"}
        return {"sort": rng.choice(["newest", "name"])}

    async def search(self, rng: random.Random) -> None:
        query = rng.choice(self.queries)
        roll = rng.random()
        if roll < 0.6:
            await self.request("search.get", "GET", "/public/agents", (200,),
                               params={"q": query, "limit": 10})
        elif roll < 0.75:
            params = {"q": query, "limit": 10, **self.filters(rng)}
            await self.request("search.get+filters", "GET", "/public/agents", (200,),
                               params=params)
        else:
            body = {"query": query, "limit": rng.choice([5, 10, 20])}
            if rng.random() < 0.3:
                filters = self.filters(rng)
                filters.pop("sort", None)
                body["filters"] = {key: [value] for key, value in filters.items()}
            await self.request("search.post", "POST", "/public/agents/search", (200,), json=body)

    async def resolve(self, rng: random.Random) -> None:
        package = rng.choice(self.packages)
        if rng.random() < 0.5:
            await self.request("resolve.card", "GET", f"/public/agents/resolve/{package}", (200,))
        else:
            await self.request("resolve.record", "GET", f"/public/agents/{package}", (200,))

    async def jsonrpc(self, rng: random.Random, worker: int, counter: int) -> None:
        if rng.random() < 0.7:
            skill, kind = "search_agents", "rpc.search_agents"
            parts = [{"text": rng.choice(self.queries)}]
        else:
            skill, kind = "resolve_package", "rpc.resolve_package"
            parts = [{"data": {"package_name": rng.choice(self.packages)},
                      "mediaType": "application/json"}]
        body = {
            "jsonrpc": "2.0", "id": counter, "method": "SendMessage",
            "params": {"message": {"messageId": f"soak-{worker}-{counter}", "role": "ROLE_USER",
                                   "parts": parts, "metadata": {"skill_id": skill}}},
        }
        await self.request(kind, "POST", "/a2a/v1", (200,), token=self.tokens["a2a"],
                           json=body, headers={"A2A-Version": "1.0"})

    def publish_body(self, rng: random.Random, package: str, serial: int) -> dict:
        topic = rng.sample(VOCABULARY, 3)
        body = {
            "package_name": package,
            "name": f"Soak {topic[0].title()} {topic[1].title()} {serial}",
            "description": f"Soak test agent for {' '.join(topic)}, revision {serial}.",
            "url": f"https://{package.replace('.', '-')}.soak.example/a2a/v1",
            "category": rng.choice(["Weather", "Finance", "Travel"]),
            "tags": rng.sample(["soak", "realtime", "finance", "travel", "research"], 2),
        }
        if rng.random() < 0.5:
            body["capabilities"] = [{
                "name": f"get_{topic[0]}", "description": f"The {topic[0]} for a query",
                "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}},
            }]
        if rng.random() < 0.3:
            body["payment"] = {"model": "paid", "protocols": ["x402"], "rails": ["base:usdc"]}
        return body

    async def write(self, rng: random.Random, own: dict[str, str], worker: int,
                    serial: list[int]) -> None:
        token = self.tokens["agents:write"]
        roll = rng.random()
        if not own or (len(own) < OWN_AGENTS and roll < 0.35):
            serial[0] += 1
            package = f"org.soak.r{self.run_id}.w{worker}-n{serial[0]}"
            response = await self.request(
                "write.publish", "POST", "/api/agents/publish", (201,), token=token,
                json=self.publish_body(rng, package, serial[0]))
            if response is None:
                return
            own[package] = response.headers.get("etag", "*")
            response = await self.request(
                "write.go_live", "POST", f"/api/agents/{package}/go-live", (200,), token=token)
            if response is not None:
                own[package] = response.headers.get("etag", "*")
        elif len(own) >= OWN_AGENTS or roll > 0.75:
            package = rng.choice(sorted(own))
            del own[package]
            await self.request("write.delete", "DELETE", f"/api/agents/{package}", (204,),
                               token=token)
        else:
            package = rng.choice(sorted(own))
            serial[0] += 1
            response = await self.request(
                "write.update", "PUT", f"/api/agents/{package}", (200,), token=token,
                json=self.publish_body(rng, package, serial[0]),
                headers={"If-Match": own[package]})
            if response is not None:
                own[package] = response.headers.get("etag", "*")

    async def playground(self, rng: random.Random, session: dict) -> None:
        token = self.tokens["playground"]
        if session.get("id") is None:
            response = await self.request(
                "playground.create", "POST", "/api/playground/session", (201,), token=token,
                json={"name": f"soak {rng.randrange(10**6)}"})
            if response is not None:
                session.update(id=response.json()["session_id"], steps=0)
            return
        if session["steps"] >= SESSION_STEPS or rng.random() < 0.08:
            session_id = session.pop("id")
            await self.request("playground.delete", "DELETE",
                               f"/api/playground/session/{session_id}", (204,), token=token)
            return
        body = {"query": rng.choice(self.queries), "limit": rng.choice([5, 10])}
        if rng.random() < 0.2 and self.tags:
            body["filters"] = {"tags": [rng.choice(self.tags)]}
        session["steps"] += 1
        await self.request("playground.discover", "POST",
                           f"/api/playground/session/{session['id']}/discover", (200,),
                           token=token, json=body)

    async def worker(self, worker: int) -> None:
        rng = random.Random(self.args.seed * 1000 + worker)
        kinds, weights = zip(*WEIGHTS.items())
        own: dict[str, str] = {}
        session: dict = {}
        serial = [0]
        counter = 0
        while time.monotonic() < self.deadline:
            counter += 1
            kind = rng.choices(kinds, weights)[0]
            try:
                if kind == "search":
                    await self.search(rng)
                elif kind == "resolve":
                    await self.resolve(rng)
                elif kind == "jsonrpc":
                    await self.jsonrpc(rng, worker, counter)
                elif kind == "write":
                    await self.write(rng, own, worker, serial)
                elif kind == "playground":
                    await self.playground(rng, session)
                else:
                    await self.request("healthz", "GET", "/healthz", (200,))
            except Exception as error:  # a fault of the driver (or an answer it cannot read)
                self.stats.record(f"driver.{kind}", "-", "-", "exception", None, False,
                                  f"{type(error).__name__}: {error}")


def build_queries(agents: list[dict], rng: random.Random) -> list[str]:
    """About QUERY_COUNT distinct queries from the agents' own descriptions, names and tags."""
    phrases: set[str] = set()
    descriptions = [agent.get("description") or "" for agent in agents]
    names = [agent.get("name") or "" for agent in agents]
    tags = sorted({tag for agent in agents for tag in agent.get("tags") or []})
    attempts = 0
    while len(phrases) < QUERY_COUNT and attempts < QUERY_COUNT * 50:
        attempts += 1
        roll = rng.random()
        if roll < 0.6:
            words = [w for w in rng.choice(descriptions).split() if w.isalnum()]
            if len(words) < 5:
                continue
            n = rng.randint(2, 5)
            start = rng.randrange(len(words) - n + 1)
            phrases.add(" ".join(words[start:start + n]).lower())
        elif roll < 0.8:
            name = " ".join(rng.choice(names).split()[:6]).lower()
            if name:
                phrases.add(name)
        elif tags:
            phrases.add(" ".join(rng.sample(tags, min(len(tags), rng.randint(1, 2)))))
    return sorted(phrases)


def read_agents(path: str) -> list[dict]:
    agents = []
    with open(path) as lines:
        for line in lines:
            if line.strip():
                agent = json.loads(line)
                if agent.get("state", "ACTIVE").upper() == "ACTIVE":
                    agents.append(agent)
    return agents


async def run(args) -> int:
    os.makedirs(args.outdir, exist_ok=True)
    agents = read_agents(args.agents)
    if not agents:
        print("soak: no live agents to search for", file=sys.stderr)
        return 1
    master_key = os.environ.get("SOAK_MASTER_KEY", "")
    if not master_key:
        print("soak: set SOAK_MASTER_KEY to the server's master key", file=sys.stderr)
        return 1
    stats = Stats(args.outdir)
    limits = httpx.Limits(max_connections=args.concurrency,
                          max_keepalive_connections=args.concurrency)
    timeout = httpx.Timeout(REQUEST_TIMEOUT, connect=10.0)
    tsv_path = os.path.join(args.outdir, "soak.tsv")
    header = "minute\trequests\treq_per_s\tp50_ms\tp99_ms\terrors\trss_mb\tfds"
    with open(tsv_path, "w") as tsv:
        tsv.write(header + "\n")
    rows: list[dict] = []
    server_gone = False

    async with httpx.AsyncClient(base_url=args.base_url, limits=limits, timeout=timeout,
                                 trust_env=False) as client:
        driver = Driver(args, client, agents, stats)
        await driver.make_tokens(master_key)
        print(f"{len(agents)} agents, {len(driver.queries)} distinct queries, "
              f"{args.concurrency} workers, {args.minutes} min")
        print(header, flush=True)
        started = time.monotonic()
        driver.deadline = started + args.minutes * 60
        window_start = started

        def close_minute(minute: int) -> None:
            nonlocal window_start
            now = time.monotonic()
            latencies = sorted(stats.minute_latencies)
            errors = stats.minute_errors
            stats.minute_latencies = []
            stats.minute_errors = 0
            stats.minute = minute + 1
            seconds = max(now - window_start, 1e-9)
            window_start = now
            rss = server_memory_mb(args.pid)
            fds = server_fds(args.pid)
            row = {"minute": minute, "requests": len(latencies),
                   "rps": len(latencies) / seconds, "p50": percentile(latencies, 0.5),
                   "p99": percentile(latencies, 0.99), "errors": errors, "rss": rss, "fds": fds}
            rows.append(row)
            line = (f"{minute}\t{row['requests']}\t{row['rps']:.1f}\t{row['p50']:.2f}\t"
                    f"{row['p99']:.2f}\t{errors}\t"
                    f"{'-' if rss is None else f'{rss:.1f}'}\t{'-' if fds is None else fds}")
            print(line, flush=True)
            with open(tsv_path, "a") as tsv:
                tsv.write(line + "\n")

        workers = [asyncio.create_task(driver.worker(i)) for i in range(args.concurrency)]
        for minute in range(1, args.minutes):
            await asyncio.sleep(max(0.0, started + minute * 60 - time.monotonic()))
            close_minute(minute)
            if rows[-1]["rss"] is None:
                server_gone = True
                print("soak: the server process is gone; stopping", file=sys.stderr)
                driver.deadline = 0
                break
        await asyncio.gather(*workers)
        if not server_gone:
            close_minute(len(rows) + 1)
        elapsed = time.monotonic() - started

    return summarise(args, stats, rows, elapsed, server_gone)


def summarise(args, stats: Stats, rows: list[dict], elapsed: float, server_gone: bool) -> int:
    stats.errors_file.close()
    every = array.array("d")
    for values in stats.by_kind.values():
        every.extend(values)
    every = sorted(every)
    total = len(every)
    unexpected = sum(stats.unexpected.values())
    lines = [
        "== summary",
        f"requests: {total} in {elapsed:.0f} s ({total / max(elapsed, 1e-9):.1f} req/s), "
        f"{args.concurrency} workers",
        f"latency ms: p50 {percentile(every, 0.5):.2f}, p99 {percentile(every, 0.99):.2f}, "
        f"max {every[-1] if every else 0:.2f}",
        f"unexpected answers: {unexpected} (5xx, connection errors, timeouts: {stats.fatal})",
    ]
    for (kind, status), count in sorted(stats.unexpected.items(), key=lambda i: -i[1]):
        lines.append(f"  {kind} {status}: {count}")
    first = next((row for row in rows if row["minute"] == 1 and row["rss"] is not None), None)
    last = next((row for row in reversed(rows) if row["rss"] is not None), None)
    if first:
        lines.append(f"resident memory: {first['rss']:.1f} MB at minute 1, "
                     f"{last['rss']:.1f} MB at minute {last['minute']}")
        lines.append(f"open file descriptors: {first['fds']} at minute 1, "
                     f"{last['fds']} at minute {last['minute']}")
    later = [(row["minute"], row["rss"]) for row in rows
             if row["minute"] > 5 and row["rss"] is not None]
    growth = slope(later)
    if growth is None:
        lines.append("memory growth after minute 5: n/a (needs at least minutes 6 and 7)")
    else:
        lines.append(f"memory growth after minute 5: {growth * 10:+.2f} MB per 10 min "
                     f"(least squares over minutes {later[0][0]}-{later[-1][0]})")
    lines.append("by kind: requests, p50 ms, p99 ms")
    for kind in sorted(stats.by_kind):
        values = sorted(stats.by_kind[kind])
        lines.append(f"  {kind:<22} {len(values):>9} {percentile(values, 0.5):>9.2f} "
                     f"{percentile(values, 0.99):>9.2f}")
    if server_gone:
        lines.append("the server process exited during the run")
    text = "\n".join(lines)
    print(text, flush=True)
    with open(os.path.join(args.outdir, "summary.txt"), "w") as summary:
        summary.write(text + "\n")
    if stats.fatal or server_gone:
        return 1
    return 2 if unexpected else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--pid", type=int, required=True, help="the server's process id")
    parser.add_argument("--agents", required=True, help="JSON Lines of the imported agents")
    parser.add_argument("--minutes", type=int, default=30)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--outdir", required=True)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if args.minutes < 1 or args.concurrency < 1:
        parser.error("--minutes and --concurrency must be at least 1")
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
