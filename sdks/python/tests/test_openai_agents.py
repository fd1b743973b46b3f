"""OpenAI Agents SDK (openai-agents): tool input/output guardrails, driven by a scripted model
(agents.testing.ScriptedModel, a custom Model implementation; no network, tracing off)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from agents import Agent, Runner, ToolInputGuardrailTripwireTriggered, function_tool, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call

from conftest import INJECTION, PII_NO_CONSENT, PII_OK, Approver, Tenant, URL, approve_all
from steward_sdk import ActionDenied, AgentNotRegistered, PromptBlocked, Steward
from steward_sdk.integrations.openai_agents import StewardToolGuardrails, govern_function_tool

set_tracing_disabled(True)

RAN: list[Any] = []


def export_contacts(table: str, records: int) -> str:
    """Export rows of a CRM table."""
    RAN.append((table, records))
    return f"exported {records} rows of {table}"


def search_kb(query: str) -> str:
    """Search the knowledge base."""
    RAN.append(query)
    return "3 articles"


def model(name: str, args: dict[str, Any]) -> ScriptedModel:
    return ScriptedModel([[function_call(name, args, call_id="call-1")], [assistant_message("done")]])


def tool_outputs(m: ScriptedModel) -> list[str]:
    """The function_call_output items the model received on its second call."""
    items = m.last_call.input if m.last_call is not None else []
    return [str(i.get("output")) for i in items if isinstance(i, dict) and i.get("type") == "function_call_output"]


def steward_for(t: Tenant, **kw: Any) -> Steward:
    return Steward(URL, t.key, agent_id=t.agent("oa")["id"], poll_initial=0.05, poll_max=0.3, approval_timeout=30, **kw)


async def test_allowed_tool_runs_and_output_is_audited(t1: Tenant) -> None:
    RAN.clear()
    s = steward_for(t1)
    tool = govern_function_tool(s, export_contacts, action="read_data", resource="crm/{table}", context=PII_OK)
    m = model("export_contacts", {"table": "contacts", "records": 7})
    result = await Runner.run(Agent(name="exporter", model=m, tools=[tool]), "export")
    assert result.final_output == "done" and RAN == [("contacts", 7)]
    assert tool_outputs(m) == ["exported 7 rows of contacts"]
    [e] = t1.audit(s.agent_id)
    assert e["output"] == {"result": "exported 7 rows of contacts"} and e["input"]["arguments"] == {"table": "contacts", "records": 7}
    await s.aclose()


async def test_denied_tool_is_rejected_to_the_model_or_raises(t1: Tenant) -> None:
    RAN.clear()
    s = steward_for(t1)
    tool = govern_function_tool(s, export_contacts, action="read_data", resource="crm/{table}", context=PII_NO_CONSENT)
    m = model("export_contacts", {"table": "contacts", "records": 7})
    result = await Runner.run(Agent(name="exporter", model=m, tools=[tool]), "export")
    assert result.final_output == "done" and RAN == []
    [out] = tool_outputs(m)
    assert "Steward refused read_data on crm/contacts" in out and "consent" in out

    raising = govern_function_tool(s, export_contacts, on_deny="raise", action="read_data", resource="crm/{table}",
                                   context=PII_NO_CONSENT)
    with pytest.raises(ToolInputGuardrailTripwireTriggered) as ei:
        await Runner.run(Agent(name="exporter", model=model("export_contacts", {"table": "c", "records": 1}),
                               tools=[raising]), "export")
    err = ei.value.output.output_info["error"]
    assert isinstance(err, ActionDenied) and "consent" in err.reason
    assert RAN == []
    await s.aclose()


async def test_approval_path_and_protect_existing_tool(t2: Tenant) -> None:
    RAN.clear()
    s = steward_for(t2)
    guard = StewardToolGuardrails(s, {"export_contacts": {
        "action": "export_data", "resource": "reports/{table}", "context": lambda table, records: {"records": records}}})
    tool = guard.protect(function_tool(export_contacts))
    m = model("export_contacts", {"table": "q3", "records": 3000})
    with Approver(t2, approve_all) as human:
        result = await Runner.run(Agent(name="exporter", model=m, tools=[tool]), "export")
    assert result.final_output == "done" and RAN == [("q3", 3000)]
    [e] = [x for x in t2.audit(s.agent_id) if x["action"] == "export_data"]
    assert e["input"]["approval"]["approval_id"] == human.decided[0]["approval_id"]
    assert guard.permits == {}
    await s.aclose()


async def test_guard_block_through_the_guardrail(t1: Tenant) -> None:
    RAN.clear()
    s = steward_for(t1)
    guard = StewardToolGuardrails(s, {"search_kb": {"action": "read_data", "resource": "kb"}})
    tool = guard.protect(function_tool(search_kb))
    m = model("search_kb", {"query": INJECTION})
    await Runner.run(Agent(name="helper", model=m, tools=[tool]), "search")
    assert RAN == [] and isinstance(guard.denied[0], PromptBlocked)
    assert "prompt guard blocked" in tool_outputs(m)[0]
    await s.aclose()


async def test_unregistered_agent_reports_to_model_provider_integration(t1: Tenant) -> None:
    s = Steward(URL, t1.key, agent_name=f"oa-shadow-{time.time_ns()}", source="model_provider")
    guard = StewardToolGuardrails(s)
    before = guard.status().events_received
    tool = guard.protect(function_tool(search_kb))
    await Runner.run(Agent(name="helper", model=model("search_kb", {"query": "hi"}), tools=[tool]), "search")
    assert isinstance(guard.denied[0], AgentNotRegistered)
    assert guard.denied[0].candidate.source == "model_provider"
    st = guard.status()
    assert st.integration == "model_provider" and st.events_received == before + 1
    await s.aclose()
