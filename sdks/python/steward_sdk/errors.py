"""Typed exceptions raised by the SDK."""

from __future__ import annotations

from typing import Any


class StewardError(Exception):
    """Base class of every error the SDK raises."""


class StewardConfigError(StewardError, ValueError):
    """The client is not configured for the call (e.g. ``discovery_webhook`` without a
    ``webhook_secret``); raised before anything is sent."""


class StewardAPIError(StewardError):
    """The server answered with an error (an RFC 9457 problem document, contract 3)."""

    def __init__(self, status: int, problem: dict[str, Any] | None, method: str = "", path: str = "") -> None:
        self.status = status
        self.problem: dict[str, Any] = problem or {}
        self.code: str | None = self.problem.get("code")
        self.detail: str | None = self.problem.get("detail")
        self.method = method
        self.path = path
        super().__init__(f"{method} {path} -> {status} {self.code or ''}: {self.detail or ''}".strip())


class StewardConnectionError(StewardError):
    """The server could not be reached or did not answer in time (connection refused or
    reset, DNS failure, time-out). ``cause`` is the transport's exception."""

    def __init__(self, method: str, path: str, cause: BaseException) -> None:
        self.method = method
        self.path = path
        self.cause = cause
        super().__init__(f"{method} {path}: {type(cause).__name__}: {cause}")


class AuditFailed(StewardError):
    """The governed tool ran, but its audit entry could not be written.

    ``result`` is the tool's return value (``None`` when the tool raised; ``error`` is then its
    exception), so that a caller does not run the side effect again to get it; ``cause`` is the
    error of the audit write.
    """

    def __init__(self, cause: BaseException, *, result: Any = None, error: BaseException | None = None,
                 action: str | None = None, resource: str | None = None) -> None:
        self.cause = cause
        self.result = result
        self.error = error
        self.action = action
        self.resource = resource
        super().__init__(f"{action or 'action'} on {resource or '?'} ran, but its audit entry was not written: {cause}")


class ActionDenied(StewardError):
    """A governed tool call was refused; ``reason`` is the server's reason.

    ``decision`` is the policy-check response (contract 13.7) when there was one.
    """

    def __init__(
        self,
        reason: str,
        *,
        action: str | None = None,
        resource: str | None = None,
        severity: str | None = None,
        risk_score: float | None = None,
        decision: Any = None,
        audit_id: str | None = None,
    ) -> None:
        self.reason = reason
        self.action = action
        self.resource = resource
        self.severity = severity
        self.risk_score = risk_score
        self.decision = decision
        self.audit_id = audit_id
        super().__init__(f"{action or 'action'} on {resource or '?'} denied: {reason}")


class PromptBlocked(ActionDenied):
    """The prompt guard blocked a prompt-like argument of the tool (contract 17)."""

    def __init__(self, reason: str, *, argument: str, guard: Any, **kw: Any) -> None:
        self.argument = argument
        self.guard = guard
        super().__init__(reason, **kw)


class ApprovalRejected(ActionDenied):
    """A human rejected the approval request (contract 16)."""

    def __init__(self, reason: str, *, approval: Any, **kw: Any) -> None:
        self.approval = approval
        self.approval_id: str | None = getattr(approval, "approval_id", None)
        super().__init__(reason, **kw)


class ApprovalTimeout(ActionDenied):
    """No decision arrived within the caller's timeout; the request stays pending."""

    def __init__(self, reason: str, *, approval_id: str, **kw: Any) -> None:
        self.approval_id = approval_id
        super().__init__(reason, **kw)


class AgentNotRegistered(ActionDenied):
    """The agent is not registered in the tenant; it was reported to discovery.

    ``candidate`` is the discovery candidate the report created or merged into (contract 12).
    """

    def __init__(self, reason: str, *, candidate: Any, **kw: Any) -> None:
        self.candidate = candidate
        super().__init__(reason, **kw)
