#!/usr/bin/env python3
"""A small governed agent: a GDPR-restricted export that is refused, asks for approval, is
approved from the console or the API, and succeeds.

Against a server started with `cargo run --release` (embedded defaults, port 8080):

    examples/gdpr_export/run.sh                 # waits for your decision (console, API or y/n here)
    examples/gdpr_export/run.sh --auto-approve  # a reviewer approves through the API after 1 s

What happens:
 1. Setup (admin key + super admin): a tenant `gdpr-demo-…` with the default policies (GDPR,
    HIPAA, FZ-152) plus the `hitl` template, a security analyst who decides approvals, and the
    agent `crm-exporter`.
 2. The agent exports 5,000 CRM contacts (personal data) with no consent on record: the GDPR
    policy refuses it (ActionDenied, reason "consent of the data subject is required").
 3. It gathers consent and a purpose and tries again: now the data may be processed, but 5,000
    records is a bulk export, so the `hitl` policy asks for a human approval. The SDK creates
    the HITL request and waits, polling with back-off.
 4. The analyst approves it: in the console (http://HOST/dashboard, log in with the analyst
    credentials printed below, page Approvals), with the printed curl command, by answering `y` here,
    or automatically with --auto-approve.
 5. The SDK re-checks the exact action with the approval id (single use), the export runs and
    the audit entry records input, output, reasoning, risk and the approval.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "sdks" / "python"))

import httpx  # noqa: E402

from steward_sdk import ActionDenied, Steward, note  # noqa: E402


def setup(url: str, admin_key: str, super_email: str, super_password: str) -> dict:
    http = httpx.Client(base_url=url, timeout=10)
    suffix = uuid.uuid4().hex[:6]
    tenant = http.post("/api/v1/tenants", json={"name": f"gdpr-demo-{suffix}"}, headers={"X-Admin-Key": admin_key})
    tenant.raise_for_status()
    t = tenant.json()
    key = t["api_key"]
    http.post("/api/v1/policies", json={"name": "hitl", "template": "hitl"}, headers={"X-API-Key": key}).raise_for_status()
    su = http.post("/api/v1/auth/login", json={"email": super_email, "password": super_password})
    su.raise_for_status()
    analyst = {"email": f"analyst-{suffix}@demo.test", "password": f"Analyst-{suffix}-pw"}
    http.post("/api/v1/users", json={**analyst, "role": "security_analyst", "tenant_id": t["id"], "full_name": "Demo Analyst"},
              headers={"Authorization": f"Bearer {su.json()['access_token']}"}).raise_for_status()
    login = http.post("/api/v1/auth/login", json=analyst)
    login.raise_for_status()
    # The agent gets a developer's personal key, never the tenant key: the tenant key acts as an
    # admin and could approve the agent's own requests (docs/sdk.md).
    developer = {"email": f"developer-{suffix}@demo.test", "password": f"Developer-{suffix}-pw"}
    http.post("/api/v1/users", json={**developer, "role": "developer", "tenant_id": t["id"], "full_name": "Agent Owner"},
              headers={"Authorization": f"Bearer {su.json()['access_token']}"}).raise_for_status()
    dev = http.post("/api/v1/auth/login", json=developer)
    dev.raise_for_status()
    agent_key = http.post("/api/v1/api-keys", json={"name": "crm-exporter"},
                          headers={"Authorization": f"Bearer {dev.json()['access_token']}"})
    agent_key.raise_for_status()
    return {"tenant": t, "key": key, "agent_key": agent_key.json()["key"], "analyst": analyst,
            "analyst_token": login.json()["access_token"]}


def approve(url: str, token: str, approval_id: str, approver: str) -> None:
    r = httpx.post(f"{url}/api/v1/hitl/approve/{approval_id}", json={"approver": approver},
                   headers={"Authorization": f"Bearer {token}"}, timeout=10)
    if r.status_code != 409:  # 409: already decided (e.g. in the console)
        r.raise_for_status()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default=os.environ.get("STEWARD_URL", "http://127.0.0.1:8080"))
    ap.add_argument("--admin-key", default=os.environ.get("ADMIN_API_KEY", "dev-admin-key-change-me"))
    ap.add_argument("--super-email", default=os.environ.get("SUPER_ADMIN_EMAIL", "admin@steward.local"))
    ap.add_argument("--super-password", default=os.environ.get("SUPER_ADMIN_PASSWORD", "change-me-now"))
    ap.add_argument("--auto-approve", action="store_true", help="approve through the API after 1 second")
    ap.add_argument("--timeout", type=float, default=600, help="seconds to wait for the decision")
    a = ap.parse_args()
    url = a.url.rstrip("/")
    env = setup(url, a.admin_key, a.super_email, a.super_password)
    print(f"[setup] tenant {env['tenant']['name']} (GDPR, HIPAA, FZ-152 + hitl), analyst {env['analyst']['email']}")

    def on_approval_request(req) -> None:
        print(f"[agent] approval required -> HITL request {req.approval_id} ({req.action} {req.resource})")
        print(f"        approve in the console: {url}/dashboard#/hitl  (Approvals; log in as {env['analyst']['email']} / "
              f"{env['analyst']['password']})")
        print(f"        or through the API:     curl -X POST {url}/api/v1/hitl/approve/{req.approval_id} "
              f"-H 'Authorization: Bearer {env['analyst_token']}' -H 'Content-Type: application/json' "
              f"-d '{{\"approver\": \"you\"}}'")
        if a.auto_approve:
            def later() -> None:
                time.sleep(1)
                approve(url, env["analyst_token"], req.approval_id, "auto-reviewer")
                print("[reviewer] approved through the API")
            threading.Thread(target=later, daemon=True).start()
        elif sys.stdin.isatty():
            def ask() -> None:
                if input("        or approve here? [y/N] ").strip().lower().startswith("y"):
                    approve(url, env["analyst_token"], req.approval_id, env["analyst"]["email"])
            threading.Thread(target=ask, daemon=True).start()
        print("[agent] waiting for the decision ...")

    steward = Steward(url, env["agent_key"], agent_name="crm-exporter", register=True, agent_type="tool",
                      capabilities=["crm.read", "export"], approval_timeout=a.timeout,
                      on_approval_request=on_approval_request)

    @steward.govern(action="export_data", resource="crm/{segment}",
                    context=lambda segment, records, consent: {
                        "personal_data": True, "records": records, "purpose": "quarterly churn analysis",
                        **({"consent": True} if consent else {})},
                    reasoning="the analyst asked for the churn-risk segment")
    def export_contacts(segment: str, records: int, consent: bool) -> dict:
        note(f"wrote {records} rows to exports/{segment}.csv")
        return {"file": f"exports/{segment}.csv", "rows": records}

    with steward:
        print(f"[agent] crm-exporter ({steward.agent_id}) exports 5000 contacts, no consent on record")
        try:
            export_contacts("churn-risk", 5000, consent=False)
            print("[agent] unexpected: the export was allowed")
            return 1
        except ActionDenied as e:
            print(f"[agent] refused: {e.reason}")
        print("[agent] consent collected; trying again")
        result = export_contacts("churn-risk", 5000, consent=True)
        print(f"[agent] export done: {json.dumps(result)}")
        entries = httpx.get(f"{url}/api/v1/audit", params={"agent_id": steward.agent_id, "action": "export_data"},
                            headers={"X-API-Key": env["key"]}).json()["items"]
        for e in reversed(entries):
            appr = e["input"].get("approval")
            print(f"[audit] seq {e['seq']} export_data approved={e['is_approved']} risk={e['risk_score']}"
                  f" approval={appr['approval_id'] if appr else None} output={json.dumps(e['output'])}")
        ok = [e for e in entries if e["is_approved"] and e["input"].get("approval")]
        return 0 if ok and result["rows"] == 5000 else 1


if __name__ == "__main__":
    sys.exit(main())
