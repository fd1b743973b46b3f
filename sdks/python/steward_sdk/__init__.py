"""Steward SDK for Python.

- :class:`StewardClient` / :class:`AsyncStewardClient`: typed clients of every API operation,
  generated from ``/openapi.json`` (``steward_sdk._generated``).
- :class:`Steward`: the governance layer, ``Steward(...).govern(tool)``.
- :mod:`steward_sdk.integrations`: LangChain, LangGraph and OpenAI Agents SDK adapters.
- :func:`sign_webhook` / :func:`verify_webhook`: the ``X-Webhook-Signature`` of ``POST /webhooks/agent``.
"""

from . import models
from ._generated.client import AsyncStewardClient, StewardClient
from ._transport import WEBHOOK_SIGNATURE_HEADER, sign_webhook, verify_webhook
from .errors import (
    ActionDenied,
    AgentNotRegistered,
    ApprovalRejected,
    ApprovalTimeout,
    AuditFailed,
    PromptBlocked,
    StewardAPIError,
    StewardConfigError,
    StewardConnectionError,
    StewardError,
)
from .governance import Permit, Steward, ToolSpec, note

__version__ = "0.1.0"

__all__ = [
    "ActionDenied",
    "AgentNotRegistered",
    "ApprovalRejected",
    "ApprovalTimeout",
    "AuditFailed",
    "AsyncStewardClient",
    "Permit",
    "PromptBlocked",
    "Steward",
    "StewardAPIError",
    "StewardClient",
    "StewardConfigError",
    "StewardConnectionError",
    "StewardError",
    "ToolSpec",
    "WEBHOOK_SIGNATURE_HEADER",
    "models",
    "note",
    "sign_webhook",
    "verify_webhook",
]
