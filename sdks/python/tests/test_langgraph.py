"""LangGraph: the node guard in a compiled StateGraph; the plan comes from a scripted fake chat
model (GenericFakeChatModel) that asks for the export, no network."""

from __future__ import annotations

import operator
from typing import Annotated, Any, Optional, TypedDict

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.graph import END, START, StateGraph

from conftest import INJECTION, PII_NO_CONSENT, PII_OK, Approver, Tenant, URL, approve_all, reject_all
from steward_sdk import ActionDenied, ApprovalRejected, PromptBlocked, Steward
from steward_sdk.integrations.langgraph import guard_node


class State(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], operator.add]
    records: int
    personal: bool
    result: Optional[str]


def build(s: Steward, model: GenericFakeChatModel, on_deny: Any = None):
    def plan(state: State) -> dict:
        ai = model.invoke(state["messages"])
        args = ai.tool_calls[0]["args"]
        return {"messages": [ai], "records": args["records"], "personal": args.get("personal", False)}

    def export(state: State) -> dict:
        return {"result": f"exported {state['records']}"}

    g = StateGraph(State)
    g.add_node("plan", plan)
    g.add_node("export", guard_node(
        s, export, action="export_data", resource="reports/q3",
        context=lambda st: {"records": st["records"], **(PII_NO_CONSENT if st.get("personal") else {})},
        reasoning=lambda st: [f"planned export of {st['records']} records"], on_deny=on_deny))
    g.add_edge(START, "plan")
    g.add_edge("plan", "export")
    g.add_edge("export", END)
    return g.compile()


def model_for(records: int, personal: bool = False) -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=iter([AIMessage(content="", tool_calls=[
        {"name": "export", "args": {"records": records, "personal": personal}, "id": "c1", "type": "tool_call"}])]))


def steward_for(t: Tenant) -> Steward:
    return Steward(URL, t.key, agent_id=t.agent("lg")["id"], poll_initial=0.05, poll_max=0.3, approval_timeout=30)


def test_node_guard_allow_and_audit(t2: Tenant) -> None:
    s = steward_for(t2)
    out = build(s, model_for(20)).invoke({"messages": [HumanMessage("export q3")]})
    assert out["result"] == "exported 20"
    [e] = t2.audit(s.agent_id)
    assert e["action"] == "export_data" and e["output"] == {"result": {"result": "exported 20"}}
    assert e["reasoning"][0] == "planned export of 20 records"
    s.close()


def test_node_guard_deny_raises_or_routes(t2: Tenant) -> None:
    s = steward_for(t2)
    with pytest.raises(ActionDenied, match="consent"):
        build(s, model_for(20, personal=True)).invoke({"messages": [HumanMessage("export")]})
    out = build(s, model_for(20, personal=True), on_deny=lambda st, e: {"result": f"refused: {e.reason}"}).invoke(
        {"messages": [HumanMessage("export")]})
    assert out["result"].startswith("refused: GDPR")
    s.close()


async def test_node_guard_approval_then_rejection(t2: Tenant) -> None:
    s = steward_for(t2)
    with Approver(t2, approve_all):
        out = await build(s, model_for(5000)).ainvoke({"messages": [HumanMessage("export")]})
    assert out["result"] == "exported 5000"
    with Approver(t2, reject_all):
        with pytest.raises(ApprovalRejected, match="not this quarter"):
            await build(s, model_for(6000)).ainvoke({"messages": [HumanMessage("export")]})
    await s.aclose()


def test_node_guard_checks_the_last_message_with_the_prompt_guard(t2: Tenant) -> None:
    s = steward_for(t2)
    graph = build(s, GenericFakeChatModel(messages=iter([AIMessage(content=INJECTION, tool_calls=[
        {"name": "export", "args": {"records": 1}, "id": "c1", "type": "tool_call"}])])))
    with pytest.raises(PromptBlocked):
        graph.invoke({"messages": [HumanMessage("hi")]})
    s.close()
