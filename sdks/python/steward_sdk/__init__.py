"""Steward SDK for Python.

- :class:`StewardClient` / :class:`AsyncStewardClient`: typed clients of every API operation,
  generated from ``/openapi.json`` (``steward_sdk._generated``).
- :class:`Steward`: the governance layer, ``Steward(...).govern(tool)``.
- :mod:`steward_sdk.integrations`: LangChain, LangGraph and OpenAI Agents SDK adapters.
"""

from . import models
from ._generated.client import AsyncStewardClient, StewardClient
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
    "StewardConnectionError",
    "StewardError",
    "ToolSpec",
    "models",
    "note",
]
