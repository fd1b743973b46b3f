"""The governance layer: ``Steward(...).govern(tool)``.

Around each call of a governed tool (sync or async) the layer

1. validates the prompt-like string arguments through the prompt guard (optional; a blocked
   prompt raises :class:`PromptBlocked`),
2. runs the policy check (``POST /policies/check``),
3. when the check answers ``required_approval``: creates the HITL request, polls
   ``GET /hitl/status/{id}`` with exponential back-off until a decision or the caller's timeout,
   and re-checks the same action with ``context.approval_id`` (approvals are bound to the exact
   action and single use, docs/hitl.md),
4. runs the tool,
5. writes the audit entry (input, output, reasoning, risk score, approval).

A refused action raises :class:`ActionDenied` (or a subclass) carrying the server's reason. An
agent that is not registered in the tenant is reported to discovery (the specification's
"discovery fallback", contract 12.5) and :class:`AgentNotRegistered` is raised. While the agent
runs, a background thread sends heartbeats.

The two phases are public for adapters: :meth:`Steward.authorize` (steps 1-3, returns a
:class:`Permit`) and :meth:`Steward.record` (step 5); ``a``-prefixed twins are async.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Iterable, Mapping, Optional, TypeVar, Union, overload

from pydantic_core import to_jsonable_python

from ._generated.client import AsyncStewardClient, StewardClient
from ._generated.models import CheckResponse as PolicyCheckResponse
from ._generated.models import HitlRequest
from .errors import (
    ActionDenied,
    AgentNotRegistered,
    ApprovalRejected,
    ApprovalTimeout,
    AuditFailed,
    PromptBlocked,
    StewardAPIError,
    StewardConnectionError,
    StewardError,
)

log = logging.getLogger("steward_sdk")

F = TypeVar("F", bound=Callable[..., Any])

#: Argument names treated as prompt-like (checked by the guard) when they hold a string.
PROMPT_ARGUMENTS = frozenset(
    {"prompt", "query", "question", "message", "input", "text", "instruction", "instructions",
     "content", "request", "task", "user_input"}
)

ContextArg = Union[None, Mapping[str, Any], Callable[..., Mapping[str, Any]]]
ResourceArg = Union[None, str, Callable[..., str]]

_notes: contextvars.ContextVar[Optional[list[str]]] = contextvars.ContextVar("steward_notes", default=None)


def _transient(e: StewardError) -> bool:
    """An error worth asking again: the server unreachable or answering 5xx. A transient
    failure while a human decides is polled again, not taken for a refusal (the request stays
    pending and may still be approved)."""
    return isinstance(e, StewardConnectionError) or (isinstance(e, StewardAPIError) and e.status >= 500)


def note(text: str) -> None:
    """Add a line of reasoning to the audit entry of the governed call in progress."""
    notes = _notes.get()
    if notes is not None:
        notes.append(str(text))


def _jsonable(value: Any) -> Any:
    try:
        return to_jsonable_python(value, fallback=repr)
    except Exception:  # pragma: no cover - defensive
        return repr(value)


@dataclass
class Permit:
    """What :meth:`Steward.authorize` grants: the decision that allowed the call."""

    action: str
    resource: str
    context: dict[str, Any]
    arguments: dict[str, Any]
    decision: PolicyCheckResponse
    tool: str = ""
    approval: Optional[HitlRequest] = None
    guard: list[Any] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)

    @property
    def approval_id(self) -> Optional[str]:
        return self.approval.approval_id if self.approval is not None else None

    @property
    def risk_score(self) -> float:
        return float(self.decision.risk_score or 0.0)


@dataclass
class ToolSpec:
    """How one tool is governed."""

    name: str
    action: Optional[str] = None
    resource: ResourceArg = None
    context: ContextArg = None
    guard_args: Optional[Iterable[str]] = None
    reasoning: Union[None, str, Iterable[str], Callable[..., Iterable[str]]] = None
    approval_timeout: Optional[float] = None

    def resolve(self, arguments: Mapping[str, Any]) -> tuple[str, str, dict[str, Any]]:
        action = self.action or self.name
        if callable(self.resource):
            resource = str(self.resource(**arguments))
        elif isinstance(self.resource, str):
            try:
                resource = self.resource.format(**arguments)
            except (KeyError, IndexError, ValueError):
                resource = self.resource
        else:
            resource = f"tool/{self.name}"
        if callable(self.context):
            context = dict(self.context(**arguments))
        else:
            context = dict(self.context or {})
        return action, resource, context

    def notes(self, arguments: Mapping[str, Any]) -> list[str]:
        r = self.reasoning
        if r is None:
            return []
        if callable(r):
            r = r(**arguments)
        if isinstance(r, str):
            return [r]
        return [str(x) for x in r]


class _Heartbeat(threading.Thread):
    def __init__(self, steward: "Steward", interval: float) -> None:
        super().__init__(name="steward-heartbeat", daemon=True)
        self.steward = steward
        self.interval = interval
        self.stopped = threading.Event()
        self.sent = 0
        self.last_error: Optional[BaseException] = None

    def run(self) -> None:
        client = StewardClient(self.steward.base_url, api_key=self.steward._api_key, timeout=self.steward._timeout)
        try:
            while not self.stopped.is_set():
                agent_id = self.steward._agent_id
                if agent_id:
                    try:
                        client.agents_heartbeat(agent_id, body={"status": "active"})
                        self.sent += 1
                        self.last_error = None
                    except Exception as e:  # keep beating; report once per failure streak
                        if self.last_error is None:
                            log.warning("steward heartbeat failed: %s", e)
                        self.last_error = e
                self.stopped.wait(self.interval)
        finally:
            client.close()


class Steward:
    """Governs an agent's tools against a Steward server.

    ``api_key`` is the tenant (or user) API key. The agent is ``agent_id`` (a registered agent)
    or ``agent_name``: with ``register=True`` the name is registered when unknown (type
    ``agent_type``, ``capabilities``); without it, an unknown name is reported to discovery on
    its first governed call. ``source`` is the discovery source of such reports
    (``agent_framework`` or ``model_provider``, contract 12.5/12.6).
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        agent_id: Optional[str] = None,
        agent_name: Optional[str] = None,
        register: bool = False,
        agent_type: str = "custom",
        capabilities: Optional[list[str]] = None,
        guard: bool = True,
        approval_timeout: Optional[float] = 300.0,
        poll_initial: float = 0.2,
        poll_max: float = 5.0,
        poll_factor: float = 2.0,
        heartbeat_interval: Optional[float] = 30.0,
        audit: bool = True,
        audit_denied: bool = True,
        source: str = "agent_framework",
        on_approval_request: Optional[Callable[[HitlRequest], Any]] = None,
        timeout: float = 10.0,
    ) -> None:
        if not agent_id and not agent_name:
            raise ValueError("Steward needs agent_id or agent_name")
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key
        self._timeout = timeout
        self._agent_id: Optional[str] = agent_id
        self.agent_name = agent_name
        self.register = register
        self.agent_type = agent_type
        self.capabilities = list(capabilities or [])
        self.guard = guard
        self.approval_timeout = approval_timeout
        self.poll_initial = poll_initial
        self.poll_max = poll_max
        self.poll_factor = poll_factor
        self.heartbeat_interval = heartbeat_interval
        self.audit = audit
        self.audit_denied = audit_denied
        self.source = source
        self.on_approval_request = on_approval_request
        self._resolved = agent_id is not None
        self._lock = threading.Lock()
        self.client = StewardClient(self.base_url, api_key=api_key, timeout=timeout)
        self._aclient: Optional[AsyncStewardClient] = None
        # The event loop `_aclient` is bound to: an httpx.AsyncClient serves one loop only.
        self._aclient_loop: Optional[asyncio.AbstractEventLoop] = None
        self._heartbeat: Optional[_Heartbeat] = None

    # -- lifecycle -------------------------------------------------------------------------
    @property
    def aclient(self) -> AsyncStewardClient:
        """The async client of the running event loop (a new one when the loop changed: a
        second ``asyncio.run`` gets its own; the old loop's client went with it)."""
        try:
            loop: Optional[asyncio.AbstractEventLoop] = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if self._aclient is None or (loop is not None and loop is not self._aclient_loop):
            self._aclient = AsyncStewardClient(self.base_url, api_key=self._api_key, timeout=self._timeout)
            self._aclient_loop = loop
        return self._aclient

    def start(self) -> "Steward":
        """Resolve the agent and start the heartbeat thread (done on the first governed call too)."""
        self.agent_id  # noqa: B018 - resolves
        self._start_heartbeat()
        return self

    def _start_heartbeat(self) -> None:
        if self.heartbeat_interval and self._heartbeat is None and self._agent_id and self._is_uuid_agent:
            with self._lock:
                if self._heartbeat is None:
                    self._heartbeat = _Heartbeat(self, self.heartbeat_interval)
                    self._heartbeat.start()

    @property
    def heartbeats_sent(self) -> int:
        return self._heartbeat.sent if self._heartbeat else 0

    def close(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.stopped.set()
            self._heartbeat.join(timeout=5)
            self._heartbeat = None
        self.client.close()

    async def aclose(self) -> None:
        self.close()
        if self._aclient is not None:
            await self._aclient.aclose()
            self._aclient = None
            self._aclient_loop = None

    def __enter__(self) -> "Steward":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> "Steward":
        return self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- the agent -------------------------------------------------------------------------
    @property
    def agent_id(self) -> str:
        """The agent's id; for an agent that is not registered, its name."""
        if not self._resolved:
            with self._lock:
                if not self._resolved:
                    self._agent_id = self._resolve_agent()
                    self._resolved = True
        return self._agent_id or self.agent_name or ""

    @property
    def _is_uuid_agent(self) -> bool:
        a = self._agent_id or ""
        return len(a) == 36 and a.count("-") == 4

    def _resolve_agent(self) -> Optional[str]:
        name = self.agent_name or ""
        if self.register:
            try:
                agent = self.client.agents_register(
                    {"name": name, "type": self.agent_type, "capabilities": self.capabilities}
                )
                return agent.id
            except StewardAPIError as e:
                if e.status != 409:
                    raise
        return self.find_agent(name)

    def find_agent(self, name: str) -> Optional[str]:
        """Id of the tenant's agent called ``name`` (case-insensitive), or None."""
        skip = 0
        while True:
            page = self.client.agents_list(skip=skip, limit=200)
            for a in page.items:
                if a.name.lower() == name.lower():
                    return a.id
            skip += len(page.items)
            if not page.items or skip >= page.total:
                return None

    # -- decorator / wrapper ---------------------------------------------------------------
    @overload
    def govern(self, tool: F, **options: Any) -> F: ...

    @overload
    def govern(self, tool: None = None, **options: Any) -> Callable[[F], F]: ...

    def govern(self, tool: Optional[F] = None, **options: Any) -> Any:
        """Govern ``tool`` (a function or coroutine function): decorator or wrapper.

        Options: ``name`` (tool name, default the function's), ``action`` (default the name),
        ``resource`` (str with ``{arg}`` placeholders, or a callable of the arguments; default
        ``tool/<name>``), ``context`` (dict or callable of the arguments), ``guard_args``
        (names of the arguments the guard checks; default the prompt-like names),
        ``reasoning`` (str, list or callable), ``approval_timeout`` (seconds).
        """
        if tool is None:
            return lambda f: self.govern(f, **options)
        spec = ToolSpec(name=options.pop("name", None) or getattr(tool, "__name__", "tool"), **options)
        sig = inspect.signature(tool)

        def bind(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
            try:
                bound = sig.bind(*args, **kwargs)
                bound.apply_defaults()
                return dict(bound.arguments)
            except TypeError:
                return {**{f"arg{i}": a for i, a in enumerate(args)}, **kwargs}

        if inspect.iscoroutinefunction(tool):

            @functools.wraps(tool)
            async def agoverned(*args: Any, **kwargs: Any) -> Any:
                arguments = bind(args, kwargs)
                return await self.acall(spec, arguments, lambda: tool(*args, **kwargs))

            agoverned.__steward_spec__ = spec  # type: ignore[attr-defined]
            return agoverned

        @functools.wraps(tool)
        def governed(*args: Any, **kwargs: Any) -> Any:
            arguments = bind(args, kwargs)
            return self.call(spec, arguments, lambda: tool(*args, **kwargs))

        governed.__steward_spec__ = spec  # type: ignore[attr-defined]
        return governed

    def call(self, spec: ToolSpec, arguments: dict[str, Any], run: Callable[[], Any]) -> Any:
        """Govern one call: authorize, run, record."""
        token = _notes.set([])
        try:
            permit = self.authorize(spec, arguments)
            try:
                result = run()
            except BaseException as e:
                try:
                    self.record(permit, error=e)
                except StewardError as ae:
                    raise AuditFailed(ae, error=e, action=permit.action, resource=permit.resource) from e
                raise
            # The tool ran: a failed audit write must not look like a refusal (a caller that
            # retries a refusal would run the side effect again), so it carries the result.
            try:
                self.record(permit, output=result)
            except StewardError as ae:
                raise AuditFailed(ae, result=result, action=permit.action, resource=permit.resource) from ae
            return result
        finally:
            _notes.reset(token)

    async def acall(self, spec: ToolSpec, arguments: dict[str, Any], run: Callable[[], Awaitable[Any]]) -> Any:
        token = _notes.set([])
        try:
            permit = await self.aauthorize(spec, arguments)
            try:
                result = await run()
            except BaseException as e:
                try:
                    await self.arecord(permit, error=e)
                except StewardError as ae:
                    raise AuditFailed(ae, error=e, action=permit.action, resource=permit.resource) from e
                raise
            try:
                await self.arecord(permit, output=result)
            except StewardError as ae:
                raise AuditFailed(ae, result=result, action=permit.action, resource=permit.resource) from ae
            return result
        finally:
            _notes.reset(token)

    # -- phase 1: authorize ----------------------------------------------------------------
    def _prompts(self, spec: ToolSpec, arguments: Mapping[str, Any]) -> list[tuple[str, str]]:
        if not self.guard:
            return []
        names = set(spec.guard_args) if spec.guard_args is not None else PROMPT_ARGUMENTS
        return [(k, v) for k, v in arguments.items() if k in names and isinstance(v, str) and v.strip()]

    def _guard_body(self, spec: ToolSpec, arg: str, prompt: str) -> dict[str, Any]:
        return {"agent_id": self.agent_id, "prompt": prompt, "context": {"tool": spec.name, "argument": arg}}

    def _blocked(self, spec: ToolSpec, action: str, resource: str, arg: str, g: Any) -> PromptBlocked:
        reason = "; ".join(g.reasons or []) or f"prompt blocked ({g.threat_level})"
        return PromptBlocked(
            f"prompt guard blocked argument '{arg}': {reason}", argument=arg, guard=g, action=action,
            resource=resource, severity="high", risk_score=g.score, audit_id=g.audit_id,
        )

    def _check_body(self, action: str, resource: str, context: dict[str, Any]) -> dict[str, Any]:
        return {"agent_id": self.agent_id, "action": action, "resource": resource, "context": context}

    def _denied(self, d: PolicyCheckResponse, action: str, resource: str) -> ActionDenied:
        return ActionDenied(d.reason or "denied", action=action, resource=resource, severity=d.severity,
                            risk_score=d.risk_score, decision=d)

    def _is_unregistered(self, d: PolicyCheckResponse) -> bool:
        return not d.allowed and not d.required_approval and "not registered" in (d.reason or "")

    def _ingest_body(self, spec: ToolSpec, action: str, resource: str) -> dict[str, Any]:
        name = self.agent_name or self.agent_id
        return {
            "name": name[:128],
            "source": self.source,
            "fingerprint": name.strip().lower()[:128],
            "type": self.agent_type,
            "capabilities": self.capabilities,
            "evidence": {"sdk": "python", "tool": spec.name, "action": action, "resource": resource},
        }

    def _unregistered(self, d: PolicyCheckResponse, candidate: Any, action: str, resource: str) -> AgentNotRegistered:
        return AgentNotRegistered(
            f"{d.reason}; reported to discovery as candidate {getattr(candidate, 'id', '?')}",
            candidate=candidate, action=action, resource=resource, severity=d.severity,
            risk_score=d.risk_score, decision=d,
        )

    def _new_permit(self, spec: ToolSpec, arguments: dict[str, Any]) -> tuple[Permit, list[tuple[str, str]]]:
        action, resource, context = spec.resolve(arguments)
        permit = Permit(action=action, resource=resource, context=context, arguments=arguments,
                        decision=None, tool=spec.name)  # type: ignore[arg-type]
        permit.reasoning.extend(spec.notes(arguments))
        return permit, self._prompts(spec, arguments)

    def _refresh_unregistered(self) -> None:
        """An agent reported to discovery may have been confirmed since: look its name up again."""
        if self._resolved and not self._is_uuid_agent and self.agent_name:
            found = self.find_agent(self.agent_name)
            if found:
                self._agent_id = found

    def authorize(self, spec: ToolSpec, arguments: dict[str, Any]) -> Permit:
        """Guard, policy check and (when required) human approval. Raises when refused."""
        if self._resolved:
            self._refresh_unregistered()
        self._start_heartbeat() if self._resolved else self.start()
        permit, prompts = self._new_permit(spec, arguments)
        action, resource, context = permit.action, permit.resource, permit.context
        for arg, prompt in prompts:
            g = self.client.guard_validate(self._guard_body(spec, arg, prompt))
            permit.guard.append(g)
            if g.blocked:
                raise self._blocked(spec, action, resource, arg, g)
        d = self.client.policies_check(self._check_body(action, resource, context))
        if not d.allowed and d.required_approval:
            req = self.client.hitl_request({"agent_id": self.agent_id, "action": action, "resource": resource,
                                            "context": context})
            if self.on_approval_request:
                self.on_approval_request(req)
            req = self._wait(req, spec, action, resource, d)
            permit.approval = req
            permit.reasoning.append(f"approved by {req.approver} (approval {req.approval_id})")
            d = self.client.policies_check(self._check_body(action, resource, {**context, "approval_id": req.approval_id}))
        if not d.allowed:
            if self._is_unregistered(d):
                cand = self.client.discovery_ingest(self._ingest_body(spec, action, resource))
                raise self._unregistered(d, cand, action, resource)
            err = self._denied(d, action, resource)
            if self.audit and self.audit_denied and self._is_uuid_agent:
                permit.decision = d
                try:
                    e = self.record(permit, denied=err)
                    err.audit_id = e.id if e is not None else None
                except StewardError as ae:  # e.g. 403 agent_suspended, unreachable: the refusal stands
                    log.warning("steward: the refusal could not be audited: %s", ae)
            raise err
        permit.decision = d
        permit.reasoning.append(f"policy: {d.reason}")
        return permit

    def _wait(self, req: HitlRequest, spec: ToolSpec, action: str, resource: str, d: PolicyCheckResponse) -> HitlRequest:
        timeout = spec.approval_timeout if spec.approval_timeout is not None else self.approval_timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = self.poll_initial
        while req.status == "pending":
            if deadline is not None and time.monotonic() >= deadline:
                raise ApprovalTimeout(f"no decision on approval {req.approval_id} within {timeout} s ({d.reason})",
                                      approval_id=req.approval_id, action=action, resource=resource,
                                      severity=d.severity, risk_score=d.risk_score, decision=d)
            time.sleep(delay if deadline is None else max(0.0, min(delay, deadline - time.monotonic())))
            delay = min(delay * self.poll_factor, self.poll_max)
            try:
                req = self.client.hitl_status(req.approval_id)
            except StewardError as e:
                if not _transient(e):
                    raise
                log.warning("steward: approval %s not read (%s); polling again", req.approval_id, e)
        if req.status != "approved":
            raise ApprovalRejected(
                f"approval {req.approval_id} {req.status} by {req.approver}: {req.rejection_reason or 'no reason given'}",
                approval=req, action=action, resource=resource, severity=d.severity, risk_score=d.risk_score,
                decision=d,
            )
        return req

    async def aauthorize(self, spec: ToolSpec, arguments: dict[str, Any]) -> Permit:
        """Async twin of :meth:`authorize`."""
        if not self._resolved:
            await asyncio.to_thread(self.start)
        elif not self._is_uuid_agent:
            await asyncio.to_thread(self._refresh_unregistered)
        self._start_heartbeat()
        c = self.aclient
        permit, prompts = self._new_permit(spec, arguments)
        action, resource, context = permit.action, permit.resource, permit.context
        for arg, prompt in prompts:
            g = await c.guard_validate(self._guard_body(spec, arg, prompt))
            permit.guard.append(g)
            if g.blocked:
                raise self._blocked(spec, action, resource, arg, g)
        d = await c.policies_check(self._check_body(action, resource, context))
        if not d.allowed and d.required_approval:
            req = await c.hitl_request({"agent_id": self.agent_id, "action": action, "resource": resource,
                                        "context": context})
            if self.on_approval_request:
                r = self.on_approval_request(req)
                if inspect.isawaitable(r):
                    await r
            req = await self._await(req, spec, action, resource, d)
            permit.approval = req
            permit.reasoning.append(f"approved by {req.approver} (approval {req.approval_id})")
            d = await c.policies_check(self._check_body(action, resource, {**context, "approval_id": req.approval_id}))
        if not d.allowed:
            if self._is_unregistered(d):
                cand = await c.discovery_ingest(self._ingest_body(spec, action, resource))
                raise self._unregistered(d, cand, action, resource)
            err = self._denied(d, action, resource)
            if self.audit and self.audit_denied and self._is_uuid_agent:
                permit.decision = d
                try:
                    e = await self.arecord(permit, denied=err)
                    err.audit_id = e.id if e is not None else None
                except StewardError as ae:  # e.g. 403 agent_suspended, unreachable: the refusal stands
                    log.warning("steward: the refusal could not be audited: %s", ae)
            raise err
        permit.decision = d
        permit.reasoning.append(f"policy: {d.reason}")
        return permit

    async def _await(self, req: HitlRequest, spec: ToolSpec, action: str, resource: str, d: PolicyCheckResponse) -> HitlRequest:
        timeout = spec.approval_timeout if spec.approval_timeout is not None else self.approval_timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = self.poll_initial
        while req.status == "pending":
            if deadline is not None and time.monotonic() >= deadline:
                raise ApprovalTimeout(f"no decision on approval {req.approval_id} within {timeout} s ({d.reason})",
                                      approval_id=req.approval_id, action=action, resource=resource,
                                      severity=d.severity, risk_score=d.risk_score, decision=d)
            await asyncio.sleep(delay if deadline is None else max(0.0, min(delay, deadline - time.monotonic())))
            delay = min(delay * self.poll_factor, self.poll_max)
            try:
                req = await self.aclient.hitl_status(req.approval_id)
            except StewardError as e:
                if not _transient(e):
                    raise
                log.warning("steward: approval %s not read (%s); polling again", req.approval_id, e)
        if req.status != "approved":
            raise ApprovalRejected(
                f"approval {req.approval_id} {req.status} by {req.approver}: {req.rejection_reason or 'no reason given'}",
                approval=req, action=action, resource=resource, severity=d.severity, risk_score=d.risk_score,
                decision=d,
            )
        return req

    # -- phase 2: record -------------------------------------------------------------------
    def _audit_body(self, permit: Permit, output: Any, error: Optional[BaseException],
                    denied: Optional[ActionDenied]) -> dict[str, Any]:
        inp: dict[str, Any] = {"tool": permit.tool, "arguments": _jsonable(permit.arguments),
                               "context": _jsonable(permit.context)}
        if permit.approval is not None:
            inp["approval"] = {"approval_id": permit.approval.approval_id, "approver": permit.approval.approver}
        if denied is not None:
            out: dict[str, Any] = {"denied": denied.reason, "severity": denied.severity}
        elif error is not None:
            out = {"error": f"{type(error).__name__}: {error}"}
        else:
            out = {"result": _jsonable(output)}
        reasoning = list(permit.reasoning)
        if denied is not None:
            reasoning.append(f"policy: {denied.reason}")
        notes = _notes.get()
        if notes:
            reasoning.extend(notes)
        risk = permit.decision.risk_score if permit.decision is not None else 0.0
        return {
            "agent_id": self.agent_id, "action": permit.action, "resource": permit.resource[:512],
            "input": inp, "output": out, "reasoning": reasoning,
            "risk_score": min(1.0, max(0.0, float(risk or 0.0))),
            "is_approved": denied is None,
        }

    def record(self, permit: Permit, *, output: Any = None, error: Optional[BaseException] = None,
               denied: Optional[ActionDenied] = None) -> Any:
        """Write the audit entry of a governed call; returns the entry (None when audit is off)."""
        if not self.audit:
            return None
        return self.client.audit_log(self._audit_body(permit, output, error, denied))

    async def arecord(self, permit: Permit, *, output: Any = None, error: Optional[BaseException] = None,
                      denied: Optional[ActionDenied] = None) -> Any:
        if not self.audit:
            return None
        return await self.aclient.audit_log(self._audit_body(permit, output, error, denied))

    # -- helpers ---------------------------------------------------------------------------
    def check(self, action: str, resource: str, context: Optional[Mapping[str, Any]] = None) -> PolicyCheckResponse:
        """One policy check for this agent, without running anything."""
        return self.client.policies_check(self._check_body(action, resource, dict(context or {})))

    def integration_status(self, integration: Optional[str] = None) -> Any:
        """``GET /integrations/{integration}/status`` (default: this Steward's ``source``)."""
        return self.client.discovery_integration(integration or self.source)
