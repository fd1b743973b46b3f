"""The HTTP base of the generated clients (httpx, sync and async)."""

from __future__ import annotations

import hashlib
import hmac
import json
import math
from typing import Any, Mapping, Union

import httpx
from pydantic import TypeAdapter

from .errors import StewardAPIError, StewardConfigError, StewardConnectionError

_USER_AGENT = "steward-sdk-python/0.1.0"

#: Paths whose requests are signed with the client's ``webhook_secret`` (contract 21).
WEBHOOK_PATHS = frozenset({"/webhooks/agent"})
#: The header that carries the signature, ``sha256=<lower-case hex HMAC-SHA256 of the body>``.
WEBHOOK_SIGNATURE_HEADER = "X-Webhook-Signature"

Bytes = Union[bytes, bytearray, memoryview]


def _as_bytes(value: Union[str, Bytes], what: str) -> bytes:
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"{what} must be bytes or str, not {type(value).__name__}")


def _secret_bytes(secret: Union[str, Bytes, None]) -> bytes:
    if secret is None or len(secret) == 0:
        raise StewardConfigError("the webhook secret is empty: pass the server's WEBHOOK_SECRET")
    return _as_bytes(secret, "the webhook secret")


def sign_webhook(secret: Union[str, Bytes], body: Union[str, Bytes]) -> str:
    """The ``X-Webhook-Signature`` value of ``body``: ``sha256=`` and the lower-case hex
    HMAC-SHA256 of the body's bytes (a ``str`` body is UTF-8), keyed with ``secret`` (the
    server's ``WEBHOOK_SECRET``). Sign exactly the bytes that are sent."""
    mac = hmac.new(_secret_bytes(secret), _as_bytes(body, "the body"), hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def verify_webhook(secret: Union[str, Bytes], body: Union[str, Bytes], header: Union[str, None]) -> bool:
    """Whether ``header`` (an ``X-Webhook-Signature`` value: ``sha256=<hex>``, or the bare hex,
    any case) is the HMAC-SHA256 of ``body``'s raw bytes with ``secret``, compared in constant
    time. A missing or malformed header is ``False``; an empty secret raises
    :class:`StewardConfigError`."""
    expected = sign_webhook(secret, body)[len("sha256="):]
    if not isinstance(header, str):
        return False
    given = header.strip()
    for prefix in ("sha256=", "SHA256="):
        if given.startswith(prefix):
            given = given[len(prefix):]
            break
    if not given.isascii():
        return False
    return hmac.compare_digest(expected.encode("ascii"), given.lower().encode("ascii"))


class _Secret:
    """A secret kept out of repr(), str() and logs (``reveal()`` gives the bytes)."""

    __slots__ = ("_value",)

    def __init__(self, value: bytes) -> None:
        self._value = value

    def reveal(self) -> bytes:
        return self._value

    def __repr__(self) -> str:
        return "<hidden>"

    __str__ = __repr__


def _webhook_secret(secret: Union[str, Bytes, None]) -> _Secret | None:
    if secret is None or len(secret) == 0:
        return None
    return _Secret(_as_bytes(secret, "webhook_secret"))


def _signature(secret: _Secret | None, method: str, path: str, content: bytes | None) -> dict[str, str]:
    """The signature header of a webhook request (``{}`` for other paths); without a secret
    a :class:`StewardConfigError`, before anything is sent."""
    if path not in WEBHOOK_PATHS:
        return {}
    if secret is None:
        raise StewardConfigError(
            f"{method} {path} must be signed: create the client with webhook_secret=<the server's WEBHOOK_SECRET>"
        )
    return {WEBHOOK_SIGNATURE_HEADER: sign_webhook(secret.reveal(), content or b"")}


def _headers(api_key: str | None, token: str | None, admin_key: str | None) -> dict[str, str]:
    h = {"user-agent": _USER_AGENT, "accept": "application/json"}
    if api_key:
        h["x-api-key"] = api_key
    if token:
        h["authorization"] = f"Bearer {token}"
    if admin_key:
        h["x-admin-key"] = admin_key
    return h


def _clean_query(query: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not query:
        return None
    out: dict[str, Any] = {}
    for k, v in query.items():
        if v is None:
            continue
        out[k] = ("true" if v else "false") if isinstance(v, bool) else v
    return out or None


def _finite(value: Any) -> Any:
    """JSON has no NaN or infinity: they are sent as null (numpy and pandas results hold them)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _encode_body(body: Any) -> bytes | None:
    if body is None:
        return None
    if hasattr(body, "model_dump"):
        body = body.model_dump(mode="json", exclude_unset=True)
    try:
        text = json.dumps(body, separators=(",", ":"), default=str, allow_nan=False)
    except ValueError:
        text = json.dumps(_finite(body), separators=(",", ":"), default=str, allow_nan=False)
    return text.encode()


def _is_json(ctype: str) -> bool:
    """``application/json`` or a ``+json`` type; JSON lines (``x-ndjson``) are text."""
    media = ctype.split(";", 1)[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


def _decode(resp: httpx.Response, adapter: TypeAdapter[Any] | None, method: str, path: str) -> Any:
    if resp.status_code >= 400:
        try:
            problem = resp.json()
        except ValueError:
            problem = {"detail": resp.text}
        raise StewardAPIError(resp.status_code, problem if isinstance(problem, dict) else None, method, path)
    if resp.status_code == 204 or not resp.content:
        return None
    ctype = resp.headers.get("content-type", "")
    if not _is_json(ctype):
        return resp.text
    if adapter is None:
        return resp.json()
    return adapter.validate_json(resp.content)


def _repr(client: "BaseClient | BaseAsyncClient") -> str:
    secret = ", webhook_secret=<hidden>" if client._webhook_secret is not None else ""
    return f"{type(client).__name__}(base_url={client.base_url!r}{secret})"


class BaseClient:
    """Synchronous transport: one keep-alive httpx.Client."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        token: str | None = None,
        admin_key: str | None = None,
        timeout: float = 10.0,
        webhook_secret: Union[str, Bytes, None] = None,
        http_client: httpx.Client | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        # Signs POST /webhooks/agent; hidden from repr() and str().
        self._webhook_secret = _webhook_secret(webhook_secret)
        self._http = http_client or httpx.Client(
            base_url=self.base_url, timeout=timeout, headers=_headers(api_key, token, admin_key)
        )

    def _request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        adapter: TypeAdapter[Any] | None = None,
    ) -> Any:
        content = _encode_body(body)  # encoded once: the signature covers exactly these bytes
        headers = {"content-type": "application/json"} if content is not None else {}
        headers.update(_signature(self._webhook_secret, method, path, content))
        try:
            resp = self._http.request(method, path, params=_clean_query(query), content=content, headers=headers or None)
        except httpx.TransportError as e:
            raise StewardConnectionError(method, path, e) from e
        return _decode(resp, adapter, method, path)

    def __repr__(self) -> str:
        return _repr(self)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "BaseClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class BaseAsyncClient:
    """Asynchronous transport: one keep-alive httpx.AsyncClient."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        token: str | None = None,
        admin_key: str | None = None,
        timeout: float = 10.0,
        webhook_secret: Union[str, Bytes, None] = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        # Signs POST /webhooks/agent; hidden from repr() and str().
        self._webhook_secret = _webhook_secret(webhook_secret)
        self._http = http_client or httpx.AsyncClient(
            base_url=self.base_url, timeout=timeout, headers=_headers(api_key, token, admin_key)
        )

    async def _request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        adapter: TypeAdapter[Any] | None = None,
    ) -> Any:
        content = _encode_body(body)  # encoded once: the signature covers exactly these bytes
        headers = {"content-type": "application/json"} if content is not None else {}
        headers.update(_signature(self._webhook_secret, method, path, content))
        try:
            resp = await self._http.request(
                method, path, params=_clean_query(query), content=content, headers=headers or None
            )
        except httpx.TransportError as e:
            raise StewardConnectionError(method, path, e) from e
        return _decode(resp, adapter, method, path)

    def __repr__(self) -> str:
        return _repr(self)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> "BaseAsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
