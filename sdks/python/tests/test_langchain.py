"""LangChain (langchain-core): the governed tool wrapper and the callback handler, driven by a
scripted fake chat model (GenericFakeChatModel, no network) through a minimal tool loop."""

from __future__ import annotations

import time
from typing import Any, Iterable

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool

from conftest import INJECTION, PII_NO_CONSENT, PII_OK, Approver, Tenant, URL, approve_all
from steward_sdk import ActionDenied, AgentNotRegistered, PromptBlocked, Steward
from steward_sdk.integrations.langchain import StewardCallbackHandler, govern_tool


def scripted(*calls: dict[str, Any]) -> GenericFakeChatModel:
    """A model that asks for each tool call in turn, then answers "done"."""
    msgs: list[AIMessage] = [
        AIMessage(content="", tool_calls=[{"name": c["name"], "args": c["args"], "id": f"call-{i}", "type": "tool_call"}])
        for i, c in enumerate(calls)
    ]
    msgs.append(AIMessage(content="done"))
    return GenericFakeChatModel(messages=iter(msgs))


def run_agent(model: GenericFakeChatModel, tools: Iterable[BaseTool], prompt: str, config: Any = None) -> list[BaseMessage]:
    by_name = {t.name: t for t in tools}
    history: list[BaseMessage] = [HumanMessage(prompt)]
    for _ in range(10):
        ai = model.invoke(history)
        history.append(ai)
        if not ai.tool_calls:
            return history
        for tc in ai.tool_calls:
            history.append(by_name[tc["name"]].invoke(tc, config=config))
    raise AssertionError("the scripted model did not finish")


RAN: list[dict[str, Any]] = []


@tool
def export_contacts(table: str, records: int) -> str:
    """Export rows of a CRM table."""
    RAN.append({"table": table, "records": records})
    return f"exported {records} rows of {table}"


@tool
def search_kb(query: str) -> str:
    """Search the knowledge base."""
    RAN.append({"query": query})
    return "3 articles"


def steward_for(tenant: Tenant, **kw: Any) -> Steward:
    a = tenant.agent("lc")
    return Steward(URL, tenant.key, agent_id=a["id"], poll_initial=0.05, poll_max=0.3, approval_timeout=30, **kw)


def test_wrapper_keeps_name_schema_and_allows(t1: Tenant) -> None:
    RAN.clear()
    s = steward_for(t1)
    gt = govern_tool(s, export_contacts, action="read_data", resource="crm/{table}", context=PII_OK)
    assert gt.name == "export_contacts" and gt.description == export_contacts.description
    assert gt.args == export_contacts.args
    history = run_agent(scripted({"name": "export_contacts", "args": {"table": "contacts", "records": 5}}), [gt], "go")
    tm = [m for m in history if isinstance(m, ToolMessage)]
    assert tm[0].content == "exported 5 rows of contacts" and history[-1].content == "done"
    assert RAN == [{"table": "contacts", "records": 5}]
    [entry] = t1.audit(s.agent_id)
    assert entry["resource"] == "crm/contacts" and entry["output"] == {"result": "exported 5 rows of contacts"}
    s.close()


def test_wrapper_deny_raises_or_tells_the_model(t1: Tenant) -> None:
    RAN.clear()
    s = steward_for(t1)
    raising = govern_tool(s, export_contacts, action="read_data", resource="crm/{table}", context=PII_NO_CONSENT)
    with pytest.raises(ActionDenied, match="consent"):
        run_agent(scripted({"name": "export_contacts", "args": {"table": "contacts", "records": 5}}), [raising], "go")
    telling = govern_tool(s, export_contacts, action="read_data", resource="crm/{table}", context=PII_NO_CONSENT,
                          on_deny="message")
    history = run_agent(scripted({"name": "export_contacts", "args": {"table": "contacts", "records": 5}}), [telling], "go")
    tm = [m for m in history if isinstance(m, ToolMessage)]
    assert "Steward refused read_data on crm/contacts" in tm[0].content and "consent" in tm[0].content
    assert RAN == []
    assert [e["is_approved"] for e in t1.audit(s.agent_id)] == [False, False]
    s.close()


async def test_wrapper_async_approval_path(t2: Tenant) -> None:
    RAN.clear()
    s = steward_for(t2)
    gt = govern_tool(s, export_contacts, action="export_data", resource="reports/{table}",
                     context=lambda table, records: {"records": records})
    with Approver(t2, approve_all) as human:
        out = await gt.ainvoke({"table": "q3", "records": 4000})
    assert out == "exported 4000 rows of q3" and RAN == [{"table": "q3", "records": 4000}]
    assert len(human.decided) == 1
    [entry] = [e for e in t2.audit(s.agent_id) if e["action"] == "export_data"]
    assert entry["input"]["approval"]["approval_id"] == human.decided[0]["approval_id"]
    await s.aclose()


def test_wrapper_guard_block(t1: Tenant) -> None:
    RAN.clear()
    s = steward_for(t1)
    gt = govern_tool(s, search_kb, action="read_data", resource="kb")
    with pytest.raises(PromptBlocked):
        run_agent(scripted({"name": "search_kb", "args": {"query": INJECTION}}), [gt], "go")
    assert RAN == []
    s.close()


def test_callback_handler_governs_every_tool(t1: Tenant) -> None:
    RAN.clear()
    s = steward_for(t1)
    handler = StewardCallbackHandler(s, {
        "export_contacts": {"action": "read_data", "resource": "crm/{table}",
                            "context": lambda table, records: PII_OK if records < 100 else PII_NO_CONSENT},
        "search_kb": {"action": "read_data", "resource": "kb"},
    })
    cfg = {"callbacks": [handler]}
    history = run_agent(scripted({"name": "export_contacts", "args": {"table": "contacts", "records": 5}},
                                 {"name": "search_kb", "args": {"query": "refund policy"}}),
                        [export_contacts, search_kb], "go", config=cfg)
    assert history[-1].content == "done"
    assert RAN == [{"table": "contacts", "records": 5}, {"query": "refund policy"}]
    with pytest.raises(ActionDenied, match="consent"):
        export_contacts.invoke({"table": "contacts", "records": 500}, config=cfg)
    with pytest.raises(PromptBlocked):
        search_kb.invoke({"query": INJECTION}, config=cfg)
    assert len(RAN) == 2 and len(handler.denied) == 2
    entries = t1.audit(s.agent_id)
    assert [(e["resource"], e["is_approved"]) for e in reversed(entries) if e["action"] == "read_data"] == [
        ("crm/contacts", True), ("kb", True), ("crm/contacts", False)]
    assert entries[-1]["output"] == {"result": "exported 5 rows of contacts"}
    # the blocked prompt: the guard's own audit entry, no tool entry
    assert [e["action"] for e in entries if e["resource"] == "guard/validate"] == ["guard.blocked"]
    s.close()


def test_unregistered_agent_reports_to_agent_framework_integration(t1: Tenant) -> None:
    s = Steward(URL, t1.key, agent_name=f"lc-shadow-{time.time_ns()}")
    handler = StewardCallbackHandler(s)
    before = handler.status().events_received
    with pytest.raises(AgentNotRegistered):
        search_kb.invoke({"query": "hello"}, config={"callbacks": [handler]})
    after = handler.status()
    assert after.integration == "agent_framework" and after.status == "ok"
    assert after.events_received == before + 1
    s.close()


def test_callback_handler_waits_for_approval(t2: Tenant) -> None:
    RAN.clear()
    s = steward_for(t2)
    handler = StewardCallbackHandler(s, {"export_contacts": {
        "action": "export_data", "resource": "reports/{table}", "context": lambda table, records: {"records": records}}})
    with Approver(t2, approve_all) as human:
        out = export_contacts.invoke({"table": "q4", "records": 2500}, config={"callbacks": [handler]})
    assert out == "exported 2500 rows of q4" and RAN == [{"table": "q4", "records": 2500}]
    [e] = [x for x in t2.audit(s.agent_id) if x["action"] == "export_data"]
    assert e["input"]["approval"]["approval_id"] == human.decided[0]["approval_id"]
    assert e["output"] == {"result": "exported 2500 rows of q4"} and handler.permits == {}
    s.close()
