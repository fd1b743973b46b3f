#!/usr/bin/env python3
"""The Python SDK's own cost per governed tool call, over loopback.

A governed call of an allowed tool makes the HTTP calls a careful hand-written integration would
make anyway: ``POST /policies/check`` and ``POST /audit/log`` (plus ``POST /guard/validate`` per
prompt-like argument). The SDK's overhead is what it adds on top of those calls: building the
bodies, binding the arguments, parsing the typed responses, the audit payload. Measured as

  overhead = wall time of the governed call  -  wall time of the same HTTP calls made raw
             (httpx, one keep-alive connection, pre-serialised bodies, no response parsing)

with raw and governed calls interleaved one by one (so server and machine drift hit both), and
the SDK's CPU time per call (process CPU time of the governed loop minus the raw loop). Cases:
``check+audit`` (a tool without prompt-like arguments) and ``guard+check+audit`` (one prompt
argument). Prints p50 / p99 and exits 1 when the p50 overhead exceeds ``--budget-ms``.

    python3 sdks/python/bench/overhead.py --url http://127.0.0.1:8080 --admin-key KEY --calls 2000
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402

from steward_sdk import Steward  # noqa: E402


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", required=True)
    ap.add_argument("--admin-key", required=True)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--budget-ms", type=float, default=2.0)
    a = ap.parse_args()
    url = a.url.rstrip("/")
    http = httpx.Client(base_url=url, timeout=10)
    t = http.post("/api/v1/tenants", json={"name": f"bench-sdk-{uuid.uuid4().hex[:8]}"},
                  headers={"X-Admin-Key": a.admin_key}).json()
    key = t["api_key"]
    raw = httpx.Client(base_url=url, timeout=10, headers={"x-api-key": key, "content-type": "application/json"})
    agent = raw.post("/api/v1/agents/register", content=json.dumps({"name": "bench-agent"})).json()
    aid = agent["id"]
    steward = Steward(url, key, agent_id=aid, heartbeat_interval=None)

    @steward.govern(action="read_data", resource="crm/{table}", context={"purpose": "bench"})
    def lookup(table: str, limit: int) -> dict:
        return {"rows": limit}

    @steward.govern(action="read_data", resource="kb/search")
    def search(query: str) -> str:
        return "3 articles"

    check_body = json.dumps({"agent_id": aid, "action": "read_data", "resource": "crm/contacts",
                             "context": {"purpose": "bench"}}).encode()
    audit_body = json.dumps({"agent_id": aid, "action": "read_data", "resource": "crm/contacts",
                             "input": {"tool": "lookup", "arguments": {"table": "contacts", "limit": 5},
                                       "context": {"purpose": "bench"}},
                             "output": {"result": {"rows": 5}}, "reasoning": ["policy: allowed"],
                             "risk_score": 0.1, "is_approved": True}).encode()
    guard_body = json.dumps({"agent_id": aid, "prompt": "what is our refund policy?",
                             "context": {"tool": "search", "argument": "query"}}).encode()

    def raw_call(with_guard: bool) -> None:
        if with_guard:
            raw.post("/api/v1/guard/validate", content=guard_body).raise_for_status()
        raw.post("/api/v1/policies/check", content=check_body).raise_for_status()
        raw.post("/api/v1/audit/log", content=audit_body).raise_for_status()

    def sdk_call(with_guard: bool) -> None:
        if with_guard:
            search("what is our refund policy?")
        else:
            lookup("contacts", 5)

    results = {}
    for case, with_guard in (("check+audit", False), ("guard+check+audit", True)):
        for _ in range(a.warmup):
            raw_call(with_guard)
            sdk_call(with_guard)
        raw_ms: list[float] = []
        sdk_ms: list[float] = []
        raw_cpu: list[float] = []
        sdk_cpu: list[float] = []
        for _ in range(a.calls):
            c0, t0 = time.process_time(), time.perf_counter()
            raw_call(with_guard)
            t1, c1 = time.perf_counter(), time.process_time()
            sdk_call(with_guard)
            t2, c2 = time.perf_counter(), time.process_time()
            raw_ms.append((t1 - t0) * 1000)
            sdk_ms.append((t2 - t1) * 1000)
            raw_cpu.append((c1 - c0) * 1000)
            sdk_cpu.append((c2 - c1) * 1000)
        diffs = [s - r for s, r in zip(sdk_ms, raw_ms)]
        cpu_diffs = [s - r for s, r in zip(sdk_cpu, raw_cpu)]
        results[case] = {
            "raw_p50": statistics.median(raw_ms), "raw_p99": pct(raw_ms, 99),
            "sdk_p50": statistics.median(sdk_ms), "sdk_p99": pct(sdk_ms, 99),
            "paired_p50": statistics.median(diffs),
            "cpu_p50": statistics.median(cpu_diffs), "cpu_p99": pct(cpu_diffs, 99),
            "cpu_mean": (sum(sdk_cpu) - sum(raw_cpu)) / a.calls,
        }
    steward.close()
    print(f"SDK overhead per governed call, {a.calls} calls per case, loopback, {url}")
    print("wall: raw HTTP calls vs the governed call; added wall = median of the paired differences;")
    print("added CPU = the SDK's process CPU time per call minus that of the raw calls (p50, p99, mean)")
    print(f"{'case':<20}{'raw p50':>9}{'raw p99':>9}{'sdk p50':>9}{'sdk p99':>9}{'added wall':>12}"
          f"{'CPU p50':>9}{'CPU p99':>9}{'CPU mean':>10}  (ms)")
    worst = 0.0
    for case, r in results.items():
        print(f"{case:<20}{r['raw_p50']:>9.3f}{r['raw_p99']:>9.3f}{r['sdk_p50']:>9.3f}{r['sdk_p99']:>9.3f}"
              f"{r['paired_p50']:>12.3f}{r['cpu_p50']:>9.3f}{r['cpu_p99']:>9.3f}{r['cpu_mean']:>10.3f}")
        worst = max(worst, r["paired_p50"], r["cpu_p50"])
    if worst > a.budget_ms:
        print(f"over budget: the SDK adds {worst:.3f} ms (p50) per governed call, budget {a.budget_ms} ms")
        return 1
    print(f"within budget: at most {worst:.3f} ms added per governed call (p50), budget {a.budget_ms} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
