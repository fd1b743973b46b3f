"""LangGraph: a node guard.

    from steward_sdk.integrations.langgraph import guard_node
    graph.add_node("export", guard_node(steward, export_node, action="export_data",
                                         resource="reports/q3",
                                         context=lambda state: {"records": state["records"]}))

The wrapped node runs only when Steward allows it (guard, policy check, approval); its state
update is written to the audit log. ``resource``, ``context`` and ``reasoning`` may be
callables of the state (keyword ``state``). On refusal the guard raises
:class:`~steward_sdk.errors.ActionDenied`, or, with ``on_deny`` given, returns
``on_deny(state, error)`` as the node's update (route the graph to a refusal branch).
Prompt-like string values of the state (keys named like ``prompt``, ``input``, ``question``)
and the content of the last message of ``state["messages"]`` go through the prompt guard.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Optional

from ..errors import ActionDenied
from ..governance import PROMPT_ARGUMENTS, Steward, ToolSpec

INTEGRATION = "agent_framework"


def _state_args(state: Any) -> dict[str, Any]:
    args: dict[str, Any] = {"state": state}
    if isinstance(state, dict):
        for k, v in state.items():
            if k in PROMPT_ARGUMENTS and isinstance(v, str):
                args[k] = v
        msgs = state.get("messages")
        if isinstance(msgs, list) and msgs:
            content = getattr(msgs[-1], "content", None)
            if isinstance(content, str):
                args["message"] = content
    return args


def _callable_of_state(v: Any) -> Any:
    if callable(v):
        return lambda **a: v(a["state"])
    return v


def guard_node(
    steward: Steward,
    node: Callable[..., Any],
    *,
    name: Optional[str] = None,
    action: Optional[str] = None,
    resource: Any = None,
    context: Any = None,
    reasoning: Any = None,
    approval_timeout: Optional[float] = None,
    on_deny: Optional[Callable[[Any, ActionDenied], Any]] = None,
) -> Callable[..., Any]:
    """Wrap a LangGraph node (``state -> update``, sync or async) with Steward's governance."""
    spec = ToolSpec(
        name=name or str(getattr(node, "__name__", "node")),
        action=action,
        resource=_callable_of_state(resource),
        context=_callable_of_state(context),
        reasoning=_callable_of_state(reasoning),
        approval_timeout=approval_timeout,
        guard_args=set(PROMPT_ARGUMENTS) | {"message"},
    )

    if inspect.iscoroutinefunction(node):

        @functools.wraps(node)
        async def aguarded(state: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return await steward.acall(spec, _state_args(state), lambda: node(state, *args, **kwargs))
            except ActionDenied as e:
                if on_deny is None:
                    raise
                return on_deny(state, e)

        return aguarded

    @functools.wraps(node)
    def guarded(state: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return steward.call(spec, _state_args(state), lambda: node(state, *args, **kwargs))
        except ActionDenied as e:
            if on_deny is None:
                raise
            return on_deny(state, e)

    return guarded


def status(steward: Steward) -> Any:
    """``GET /integrations/agent_framework/status``."""
    return steward.integration_status(INTEGRATION)
