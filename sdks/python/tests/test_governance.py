"""The governance layer itself: allow / deny / approval / rejection / timeout / guard block /
unregistered agent / audit / heartbeat, sync and async, against the real server."""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from conftest import INJECTION, PII_NO_CONSENT, PII_OK, Approver, Tenant, URL, approve_all, reject_all
from steward_sdk import (
    ActionDenied,
    AgentNotRegistered,
    ApprovalRejected,
    ApprovalTimeout,
    PromptBlocked,
    Steward,
    note,
)


def make(tenant: Tenant, **kw) -> Steward:
    agent = tenant.agent("gov")
    kw.setdefault("poll_initial", 0.05)
    kw.setdefault("poll_max", 0.3)
    kw.setdefault("approval_timeout", 30)
    return Steward(URL, tenant.key, agent_id=agent["id"], **kw)


def test_allowed_call_runs_and_is_audited(t1: Tenant) -> None:
    s = make(t1)
    calls = []

    @s.govern(action="read_data", resource="crm/{table}", context=lambda table, limit: PII_OK,
              reasoning="the user asked for the contact list")
    def read_contacts(table: str, limit: int = 10) -> dict:
        calls.append(table)
        note("read from the replica")
        return {"rows": limit}

    assert read_contacts("contacts", limit=3) == {"rows": 3}
    assert calls == ["contacts"]
    [entry] = t1.audit(s.agent_id)
    assert entry["action"] == "read_data" and entry["resource"] == "crm/contacts"
    assert entry["input"]["arguments"] == {"table": "contacts", "limit": 3}
    assert entry["input"]["context"] == PII_OK
    assert entry["output"] == {"result": {"rows": 3}}
    assert entry["is_approved"] is True
    assert entry["reasoning"][0] == "the user asked for the contact list"
    assert any(r.startswith("policy: allowed by") for r in entry["reasoning"])
    assert "read from the replica" in entry["reasoning"]
    assert 0.0 <= entry["risk_score"] <= 1.0
    s.close()


def test_denied_call_raises_with_reason_and_never_runs(t1: Tenant) -> None:
    s = make(t1)
    ran = []

    def export_contacts(table: str) -> str:
        ran.append(table)
        return "exported"

    governed = s.govern(export_contacts, action="read_data", resource="crm/contacts", context=PII_NO_CONSENT)
    with pytest.raises(ActionDenied) as ei:
        governed("contacts")
    e = ei.value
    assert type(e) is ActionDenied
    assert "consent" in e.reason and e.severity == "high"
    assert e.decision is not None and e.decision.allowed is False
    assert ran == []
    [entry] = t1.audit(s.agent_id)
    assert entry["is_approved"] is False and "consent" in entry["output"]["denied"]
    assert e.audit_id == entry["id"]
    s.close()


def test_tool_error_is_audited_and_reraised(t1: Tenant) -> None:
    s = make(t1)

    @s.govern(action="read_data", resource="crm/contacts")
    def broken() -> None:
        raise RuntimeError("database down")

    with pytest.raises(RuntimeError, match="database down"):
        broken()
    [entry] = t1.audit(s.agent_id)
    assert entry["output"] == {"error": "RuntimeError: database down"} and entry["is_approved"] is True
    s.close()


def test_approval_approved_rechecks_with_approval_id_and_runs(t2: Tenant) -> None:
    seen = []
    s = make(t2, on_approval_request=seen.append)

    @s.govern(action="export_data", resource="reports/q3", context=lambda records: {"records": records})
    def export(records: int) -> str:
        return f"exported {records}"

    with Approver(t2, approve_all) as human:
        assert export(5000) == "exported 5000"
    assert len(seen) == 1 and seen[0].status == "pending"
    [decided] = [d for d in human.decided if d["approval_id"] == seen[0].approval_id]
    assert decided["status"] == "approved" and decided["context"] == {"records": 5000}
    entries = t2.audit(s.agent_id)
    mine = [e for e in entries if e["action"] == "export_data"]
    assert len(mine) == 1
    assert mine[0]["input"]["approval"] == {"approval_id": seen[0].approval_id, "approver": "analyst@sdk.test"}
    assert mine[0]["output"] == {"result": "exported 5000"} and mine[0]["is_approved"] is True
    # The server consumed the approval on the SDK's re-check (docs/hitl.md): single use.
    consumed = [e for e in entries if e["action"] == "hitl.consumed"]
    assert len(consumed) == 1 and consumed[0]["output"]["approval_id"] == seen[0].approval_id
    again = s.check("export_data", "reports/q3", {"records": 5000, "approval_id": seen[0].approval_id})
    assert again.allowed is False and "already used" in (again.reason or "")
    s.close()


def test_approval_rejected_raises_typed_exception(t2: Tenant) -> None:
    s = make(t2)
    ran = []
    governed = s.govern(lambda: ran.append(1), name="wipe", action="delete_data", resource="tmp/cache")
    with Approver(t2, reject_all):
        with pytest.raises(ApprovalRejected) as ei:
            governed()
    assert "not this quarter" in ei.value.reason and ei.value.approval.status == "rejected"
    assert ran == []
    s.close()


def test_approval_timeout(t2: Tenant) -> None:
    s = make(t2, approval_timeout=0.6)
    governed = s.govern(lambda: "x", name="firewall", action="change_security_policy", resource="policies/firewall")
    t0 = time.monotonic()
    with pytest.raises(ApprovalTimeout) as ei:
        governed()
    assert 0.5 <= time.monotonic() - t0 < 5
    status = t2.http.get(f"/api/v1/hitl/status/{ei.value.approval_id}").json()
    assert status["status"] == "pending"
    # leave no pending request behind for the approvers of later tests
    r = t2.analyst.post(f"/api/v1/hitl/reject/{ei.value.approval_id}", json={"approver": "cleanup"})
    assert r.status_code == 200
    s.close()


def test_guard_blocks_prompt_argument_before_the_check(t1: Tenant) -> None:
    s = make(t1)
    ran = []

    @s.govern(action="read_data", resource="kb/search")
    def search(query: str) -> str:
        ran.append(query)
        return "ok"

    with pytest.raises(PromptBlocked) as ei:
        search(INJECTION)
    assert ei.value.argument == "query" and ei.value.guard.blocked is True
    assert "ignore_instructions" in ei.value.guard.detected_patterns
    assert ran == []
    # The guard wrote its own audit entry (guard.blocked) for the agent.
    assert ei.value.audit_id is not None
    assert search("what is our refund policy?") == "ok"
    s.close()


def test_guard_can_be_disabled(t1: Tenant) -> None:
    s = make(t1, guard=False)
    assert s.govern(lambda query: "ok", name="search", action="read_data", resource="kb")(INJECTION) == "ok"
    s.close()


def test_unregistered_agent_is_reported_to_discovery(t1: Tenant) -> None:
    name = f"shadow-{time.time_ns()}"
    before = t1.http.get("/api/v1/integrations/agent_framework/status").json()["events_received"]
    s = Steward(URL, t1.key, agent_name=name, agent_type="tool")
    with pytest.raises(AgentNotRegistered) as ei:
        s.govern(lambda: 1, name="t", action="read_data", resource="x")()
    cand = ei.value.candidate
    assert cand.name == name and cand.source == "agent_framework" and cand.status == "pending"
    assert "not registered" in ei.value.reason
    st = s.integration_status()
    assert st.integration == "agent_framework" and st.discovery_fallback is True
    assert st.events_received == before + 1
    # an operator confirms the candidate: the same Steward finds the new agent and is allowed
    confirmed = t1.http.post(f"/api/v1/discovery/candidates/{cand.id}/confirm", json={})
    assert confirmed.status_code == 200, confirmed.text
    assert s.govern(lambda: 1, name="t", action="read_data", resource="x")() == 1
    assert s.agent_id == confirmed.json()["agent"]["id"]
    s.close()


def test_register_by_name_and_heartbeats(t1: Tenant) -> None:
    name = f"beating-{time.time_ns()}"
    with Steward(URL, t1.key, agent_name=name, register=True, heartbeat_interval=0.2) as s:
        assert len(s.agent_id) == 36
        time.sleep(0.5)
        assert s.heartbeats_sent >= 2
        agent = t1.http.get(f"/api/v1/agents/{s.agent_id}").json()
        assert agent["last_heartbeat"] is not None and agent["status"] == "active"
    # a second Steward with the same name finds the same agent (409 on register)
    s2 = Steward(URL, t1.key, agent_name=name.upper(), register=True, heartbeat_interval=None)
    assert s2.agent_id == s.agent_id
    s2.close()


async def test_async_tools_allow_deny_approval(t2: Tenant) -> None:
    s = make(t2)

    @s.govern(action="export_data", resource="reports/{name}", context=lambda name, records: {"records": records})
    async def export(name: str, records: int) -> dict:
        await asyncio.sleep(0)
        return {"name": name, "records": records}

    assert await export("small", 10) == {"name": "small", "records": 10}
    with Approver(t2, approve_all):
        assert await export("big", 5000) == {"name": "big", "records": 5000}

    @s.govern(action="read_data", resource="crm/contacts", context=PII_NO_CONSENT)
    async def leak() -> str:
        return "leaked"

    with pytest.raises(ActionDenied, match="consent"):
        await leak()
    actions = [(e["action"], e["is_approved"]) for e in t2.audit(s.agent_id) if not e["action"].startswith("hitl.")]
    assert actions == [("read_data", False), ("export_data", True), ("export_data", True)]
    await s.aclose()


def test_suspended_agent_is_refused_with_the_reason(t1: Tenant) -> None:
    # No heartbeat thread here: a heartbeat racing the suspend can undo it on the server (a lost
    # update reported with issue 19: suspend answers 200 "suspended", the concurrent heartbeat
    # 200 "active", and the agent ends active), which is not what this test is about.
    s = make(t1, heartbeat_interval=None)
    governed = s.govern(lambda: "ran", name="t", action="read_data", resource="crm/contacts")
    assert governed() == "ran"
    assert t1.http.post(f"/api/v1/agents/{s.agent_id}/suspend").status_code == 200
    with pytest.raises(ActionDenied) as ei:
        governed()
    assert "suspended" in ei.value.reason and ei.value.audit_id is None  # the server refuses audit writes
    s.close()


def test_bare_approved_flag_follows_the_server_setting(t2: Tenant) -> None:
    """The SDK approves through the approval_id only; a bare `approved: true` counts only while
    HITL_REQUIRE_APPROVAL_ID is false (STEWARD_STRICT_HITL=1 says the server runs with true)."""
    s = make(t2)
    d = s.check("delete_data", "tmp/cache", {"approved": True})
    strict = os.environ.get("STEWARD_STRICT_HITL") == "1"
    assert d.allowed is (not strict)
    if strict:
        assert d.required_approval is True
    s.close()


def test_an_audit_failure_after_the_run_carries_the_result(t1: Tenant) -> None:
    """The tool ran: a failed audit write raises AuditFailed with the result, not a refusal."""
    from steward_sdk import AuditFailed, StewardAPIError

    s = make(t1)
    runs = []

    @s.govern(action="read_data", resource="crm/contacts", context=PII_OK)
    def read() -> dict:
        runs.append(1)
        return {"rows": 2}

    def down(*_a, **_k):
        raise StewardAPIError(503, {"code": "service_unavailable", "detail": "down"}, "POST", "/api/v1/audit/log")

    s.client.audit_log = down  # type: ignore[method-assign]
    with pytest.raises(AuditFailed) as ei:
        read()
    assert runs == [1] and ei.value.result == {"rows": 2}
    assert not isinstance(ei.value, ActionDenied)
    s.close()


def test_results_holding_nan_are_audited_as_null(t1: Tenant) -> None:
    s = make(t1)

    @s.govern(action="read_data", resource="stats/mean", context=PII_OK)
    def stats(col: str) -> dict:
        return {"mean": float("nan"), "max": float("inf"), "n": 3}

    out = stats("a")
    assert out["n"] == 3
    [entry] = t1.audit(s.agent_id)
    assert entry["output"] == {"result": {"mean": None, "max": None, "n": 3}}
    s.close()


def test_async_tools_on_two_event_loops(t1: Tenant) -> None:
    """Each asyncio.run has its own loop: the async client follows it."""
    s = make(t1)

    @s.govern(action="read_data", resource="crm/contacts", context=PII_OK)
    async def read(x: int) -> int:
        return x

    assert asyncio.run(read(1)) == 1
    assert asyncio.run(read(2)) == 2
    s.close()


def test_a_transient_failure_while_waiting_keeps_waiting(t2: Tenant) -> None:
    from steward_sdk import StewardAPIError

    s = make(t2)
    real = s.client.hitl_status
    failures = []

    def flaky(approval_id: str):
        if not failures:
            failures.append(approval_id)
            raise StewardAPIError(503, {"code": "service_unavailable"}, "GET", "/api/v1/hitl/status")
        return real(approval_id)

    s.client.hitl_status = flaky  # type: ignore[method-assign]
    governed = s.govern(lambda records: f"exported {records}", name="export", action="export_data",
                        resource="reports/q3", context=lambda records: {"records": records})
    with Approver(t2, approve_all):
        assert governed(5000) == "exported 5000"
    assert len(failures) == 1
    s.close()
