"""LangChain: a governed tool wrapper and a callback handler (langchain-core).

    from steward_sdk.integrations.langchain import govern_tool
    safe_export = govern_tool(steward, export_tool, resource="crm/{table}",
                              context=lambda **a: {"personal_data": True, "purpose": a["purpose"]})

``govern_tool`` returns a ``StructuredTool`` with the same name, description and argument
schema; each invocation (sync or async) goes through :meth:`Steward.call`. A refused call
raises :class:`~steward_sdk.errors.ActionDenied` (``on_deny="raise"``, the default) or, with
``on_deny="message"``, returns the refusal as the tool's result so that the model can react.

:class:`StewardCallbackHandler` governs every tool run of a chain or agent it is attached to:
``on_tool_start`` authorizes (raising ``ActionDenied`` aborts the tool, the handler sets
``raise_error``), ``on_tool_end`` / ``on_tool_error`` write the audit entry.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Optional
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.tools import BaseTool, StructuredTool

from ..errors import ActionDenied
from ..governance import Permit, Steward, ToolSpec

INTEGRATION = "agent_framework"


def _denied_message(e: ActionDenied) -> str:
    return f"Steward refused {e.action} on {e.resource}: {e.reason}"


def govern_tool(
    steward: Steward,
    tool: BaseTool,
    *,
    action: Optional[str] = None,
    resource: Any = None,
    context: Any = None,
    guard_args: Any = None,
    reasoning: Any = None,
    approval_timeout: Optional[float] = None,
    on_deny: str = "raise",
) -> StructuredTool:
    """Wrap a LangChain tool so that each call is governed by ``steward``."""
    if on_deny not in ("raise", "message"):
        raise ValueError("on_deny must be 'raise' or 'message'")
    spec = ToolSpec(name=tool.name, action=action, resource=resource, context=context, guard_args=guard_args,
                    reasoning=reasoning, approval_timeout=approval_timeout)

    def _input(kwargs: dict[str, Any]) -> Any:
        if tool.args_schema is None and set(kwargs) == {"tool_input"}:
            return kwargs["tool_input"]
        return kwargs

    def _run(**kwargs: Any) -> Any:
        try:
            return steward.call(spec, kwargs, lambda: tool.invoke(_input(kwargs)))
        except ActionDenied as e:
            if on_deny == "message":
                return _denied_message(e)
            raise

    async def _arun(**kwargs: Any) -> Any:
        try:
            return await steward.acall(spec, kwargs, lambda: tool.ainvoke(_input(kwargs)))
        except ActionDenied as e:
            if on_deny == "message":
                return _denied_message(e)
            raise

    governed = StructuredTool.from_function(
        func=_run,
        coroutine=_arun,
        name=tool.name,
        description=tool.description,
        args_schema=tool.args_schema,
        return_direct=tool.return_direct,
    )
    governed.metadata = {**(tool.metadata or {}), "steward": {"action": spec.action or spec.name}}
    return governed


class StewardCallbackHandler(BaseCallbackHandler):
    """Governs every tool run it sees: authorize on start, audit on end or error.

    ``tools`` maps a tool name to the :class:`ToolSpec` options of that tool
    (``{"export_contacts": {"resource": "crm/contacts", "context": {...}}}``); tools not in the
    map are governed with the defaults (action = tool name, resource ``tool/<name>``).
    """

    raise_error = True  # an ActionDenied raised in on_tool_start aborts the tool

    def __init__(self, steward: Steward, tools: Optional[Mapping[str, Mapping[str, Any]]] = None) -> None:
        self.steward = steward
        self.tools = {k: dict(v) for k, v in (tools or {}).items()}
        self.permits: dict[UUID, Permit] = {}
        self.denied: list[ActionDenied] = []

    def _spec(self, name: str) -> ToolSpec:
        return ToolSpec(name=name, **self.tools.get(name, {}))

    def on_tool_start(
        self,
        serialized: dict[str, Any],
        input_str: str,
        *,
        run_id: UUID,
        inputs: Optional[dict[str, Any]] = None,
        **kwargs: Any,
    ) -> None:
        name = (serialized or {}).get("name") or kwargs.get("name") or "tool"
        arguments = dict(inputs) if isinstance(inputs, dict) else _parse(input_str)
        try:
            self.permits[run_id] = self.steward.authorize(self._spec(name), arguments)
        except ActionDenied as e:
            self.denied.append(e)
            raise

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        permit = self.permits.pop(run_id, None)
        if permit is not None:
            content = getattr(output, "content", output)
            self.steward.record(permit, output=content)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        permit = self.permits.pop(run_id, None)
        if permit is not None:
            self.steward.record(permit, error=error)

    def status(self) -> Any:
        return self.steward.integration_status(INTEGRATION)


def _parse(input_str: str) -> dict[str, Any]:
    try:
        v = json.loads(input_str)
        if isinstance(v, dict):
            return v
    except (TypeError, ValueError):
        pass
    return {"input": input_str}


def status(steward: Steward) -> Any:
    """``GET /integrations/agent_framework/status``."""
    return steward.integration_status(INTEGRATION)
