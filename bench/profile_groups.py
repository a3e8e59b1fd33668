#!/usr/bin/env python3
"""Self instructions of a callgrind dump (written with --compress-strings=no) per unit, grouped by
component, then the costliest functions. Usage: profile_groups.py CALLGRIND_FILE UNITS [TOP]"""
import collections
import re
import sys

GROUPS = [
    ("memset (mostly actix-http's header array, per byte under valgrind)", r"__memset"),
    ("memcpy/memcmp", r"__mem(cpy|cmp|move)"),
    ("allocator", r"^(mi_|_mi_|malloc|free|_int_|__libc_(malloc|free)|cfree|realloc|malloc_consolidate|__rust_(alloc|dealloc|realloc)|tcache|unlink_chunk)"),
    ("HTTP parse/write (actix-http, httparse, http, bytes)", r"^<?(actix_http|httparse|http::|bytes::)"),
    ("routing (actix-router, regex)", r"(actix_router|regex)"),
    ("actix-web services and extractors", r"^<?actix_web"),
    ("JSON (serde_json, serde, UTF-8 checks)", r"(serde_json|serde_core|serde::|core::str::converts::from_utf8)"),
    ("collections and hashing", r"(btree|hashbrown|core::hash|sip::|foldhash)"),
    ("async runtime (tokio, actix actors, futures)", r"(tokio|actix::|actix_rt|futures)"),
    ("mcp-harbor: HTTP edge (transport, tenant, auth)", r"mcp_harbor::(transport|tenant|auth)"),
    ("mcp-harbor: JSON-RPC reading (protocol)", r"mcp_harbor::protocol"),
    ("mcp-harbor: session core and actor", r"mcp_harbor::session"),
    ("mcp-harbor: methods, catalog, tools", r"mcp_harbor::(methods|catalog|tools|request|modern)"),
    ("mcp-harbor: metrics and telemetry", r"(mcp_harbor::(metrics|telemetry)|prometheus|opentelemetry|tracing)"),
    ("mcp-harbor: other", r"mcp_harbor"),
    ("libc system call wrappers", r"^(epoll|send|recv|clock_gettime|__errno|syscall|write|read|accept|close|getrandom)"),
]


def read_dump(path):
    """Self instructions per function, and the dump's total of each event it recorded (several
    with --cache-sim / --branch-sim), in one pass over the file."""
    costs = collections.Counter()
    events, totals = [], []
    fn, after_calls = None, False
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith("fn="):
                fn = line[3:].strip()
            elif line.startswith("calls="):
                after_calls = True
            elif line[:1].isdigit() or line[:1] in "+-*":
                parts = line.split()
                if len(parts) < 2:
                    continue
                try:
                    cost = int(parts[1])
                except ValueError:
                    continue
                if after_calls:
                    after_calls = False  # the inclusive cost of a call, not this function's own
                else:
                    costs[fn] += cost
            elif line.startswith("events:"):
                events = line.split()[1:]
            elif line.startswith("totals:"):
                totals = [int(v) for v in line.split()[1:]]
    return costs, dict(zip(events, totals))


# The simulated events (callgrind --cache-sim=yes --branch-sim=yes) worth a line per unit.
SIMULATED = [
    ("I1mr", "instruction fetches missing the first-level cache"),
    ("D1mr", "data reads missing the first-level cache"),
    ("D1mw", "data writes missing the first-level cache"),
    ("ILmr", "instruction fetches missing the last-level cache"),
    ("DLmr", "data reads missing the last-level cache"),
    ("Bcm", "mispredicted conditional branches"),
    ("Bim", "mispredicted indirect branches"),
]


def main():
    path, units = sys.argv[1], float(sys.argv[2])
    top = int(sys.argv[3]) if len(sys.argv) > 3 else 25
    costs, totals = read_dump(path)
    grouped = collections.Counter()
    for name, cost in costs.items():
        group = next((g for g, pattern in GROUPS if re.search(pattern, name or "")), "other")
        grouped[group] += cost
    for group in [g for g, _ in GROUPS] + ["other"]:
        print(f"{grouped[group] / units:10,.0f}  {group}")
    print(f"{sum(grouped.values()) / units:10,.0f}  total")
    if len(totals) > 1:  # more events than instructions: simulated
        print("\nsimulated caches and branch predictors, per unit:")
        for event, meaning in SIMULATED:
            if event in totals:
                print(f"{totals[event] / units:10,.0f}  {meaning} ({event})")
    print(f"\ncostliest functions (self):")
    for name, cost in costs.most_common(top):
        print(f"{cost / units:10,.0f}  {(name or '?')[:140]}")


if __name__ == "__main__":
    main()
