#!/usr/bin/env python3
"""The load scripts' query set: the phrases of eval/queries.jsonl, topped up to 1,200 distinct
phrases of 2 to 5 words cut from the agents' own descriptions (a fixed seed, so every run asks
the same). Usage: bench-queries.py AGENTS.jsonl SEED > phrases.txt (one phrase a line, sorted)."""
import json
import random
import sys

agents, seed = sys.argv[1], int(sys.argv[2])
random.seed(seed)
phrases = set()
with open("eval/queries.jsonl") as f:
    phrases.update(json.loads(line)["query"] for line in f if line.strip())
descriptions = [json.loads(line)["description"] for line in open(agents)]
while len(phrases) < 1200:
    words = [w for w in random.choice(descriptions).split() if w.isalnum()]
    if len(words) < 5:
        continue
    n = random.randint(2, 5)
    start = random.randrange(len(words) - n + 1)
    phrases.add(" ".join(words[start:start + n]).lower())
for phrase in sorted(phrases):
    print(phrase)
print(f"{len(phrases)} distinct queries", file=sys.stderr)
