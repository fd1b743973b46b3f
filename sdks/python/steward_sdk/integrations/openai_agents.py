"""OpenAI Agents SDK: tool guardrails (openai-agents).

    from steward_sdk.integrations.openai_agents import StewardToolGuardrails
    guard = StewardToolGuardrails(steward, tools={"export_contacts": {"resource": "crm/contacts"}})
    export = guard.protect(function_tool(export_contacts))     # or govern_function_tool(...)
    agent = Agent(name="exporter", tools=[export], model=...)

The input guardrail authorizes each call (prompt guard, policy check, approval); the output
guardrail writes the audit entry with the tool's output. A refused call is, by default,
rejected with a message to the model (``on_deny="reject"``); ``on_deny="raise"`` halts the run
with ``ToolInputGuardrailTripwireTriggered`` whose ``output.output_info["error"]`` is the
:class:`~steward_sdk.errors.ActionDenied`. The discovery source of this integration is
``model_provider``.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Mapping, Optional

from agents import FunctionTool, ToolGuardrailFunctionOutput, function_tool
from agents.tool_guardrails import (
    ToolInputGuardrail,
    ToolInputGuardrailData,
    ToolOutputGuardrail,
    ToolOutputGuardrailData,
)

from ..errors import ActionDenied
from ..governance import Permit, Steward, ToolSpec

INTEGRATION = "model_provider"


class StewardToolGuardrails:
    """A pair of tool guardrails (input: authorize, output: audit) bound to one Steward."""

    def __init__(
        self,
        steward: Steward,
        tools: Optional[Mapping[str, Mapping[str, Any]]] = None,
        *,
        on_deny: str = "reject",
    ) -> None:
        if on_deny not in ("reject", "raise"):
            raise ValueError("on_deny must be 'reject' or 'raise'")
        self.steward = steward
        self.tools = {k: dict(v) for k, v in (tools or {}).items()}
        self.on_deny = on_deny
        self.permits: dict[str, Permit] = {}
        self.denied: list[ActionDenied] = []
        self.input_guardrail: ToolInputGuardrail[Any] = ToolInputGuardrail(
            guardrail_function=self._authorize, name="steward_authorize")
        self.output_guardrail: ToolOutputGuardrail[Any] = ToolOutputGuardrail(
            guardrail_function=self._record, name="steward_audit")

    async def _authorize(self, data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        ctx = data.context
        try:
            arguments = json.loads(ctx.tool_arguments or "{}")
        except ValueError:
            arguments = {"input": ctx.tool_arguments}
        if not isinstance(arguments, dict):
            arguments = {"input": arguments}
        spec = ToolSpec(name=ctx.tool_name, **self.tools.get(ctx.tool_name, {}))
        try:
            permit = await self.steward.aauthorize(spec, arguments)
        except ActionDenied as e:
            self.denied.append(e)
            info = {"error": e, "reason": e.reason, "action": e.action, "resource": e.resource}
            if self.on_deny == "raise":
                return ToolGuardrailFunctionOutput.raise_exception(output_info=info)
            return ToolGuardrailFunctionOutput.reject_content(
                f"Steward refused {e.action} on {e.resource}: {e.reason}", output_info=info)
        self.permits[ctx.tool_call_id] = permit
        return ToolGuardrailFunctionOutput.allow(
            output_info={"risk_score": permit.risk_score, "approval_id": permit.approval_id})

    async def _record(self, data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
        permit = self.permits.pop(data.context.tool_call_id, None)
        if permit is not None:
            await self.steward.arecord(permit, output=data.output)
        return ToolGuardrailFunctionOutput.allow()

    def protect(self, tool: FunctionTool) -> FunctionTool:
        """Attach both guardrails to an existing function tool (returns it)."""
        tool.tool_input_guardrails = [*(tool.tool_input_guardrails or []), self.input_guardrail]
        tool.tool_output_guardrails = [*(tool.tool_output_guardrails or []), self.output_guardrail]
        return tool

    def status(self) -> Any:
        return self.steward.integration_status(INTEGRATION)


def govern_function_tool(
    steward: Steward, fn: Callable[..., Any], *, on_deny: str = "reject", **options: Any
) -> FunctionTool:
    """``function_tool(fn)`` governed by ``steward`` (``options`` as in ``Steward.govern``)."""
    name = options.pop("name", None) or fn.__name__
    guard = StewardToolGuardrails(steward, {name: options}, on_deny=on_deny)
    return function_tool(fn, name_override=name, tool_input_guardrails=[guard.input_guardrail],
                         tool_output_guardrails=[guard.output_guardrail])


def status(steward: Steward) -> Any:
    """``GET /integrations/model_provider/status``."""
    return steward.integration_status(INTEGRATION)
