"""Signed inbound webhooks (contract 21): ``discovery_webhook`` sends ``X-Webhook-Signature`` over
the exact body bytes; ``sign_webhook`` / ``verify_webhook``; the secret stays hidden.

The first tests use an httpx.MockTransport (no server); the last two run against the server of
STEWARD_URL, started by .ci/e2e/sdk.sh with WEBHOOK_SECRET=sdk-webhook."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import uuid
from typing import Any, Callable

import httpx
import pytest

from conftest import URL, Tenant
from steward_sdk import (
    AsyncStewardClient,
    StewardAPIError,
    StewardClient,
    StewardConfigError,
    StewardError,
    sign_webhook,
    verify_webhook,
)

SECRET = "s3cret-for-tests"
WEBHOOK_SECRET = os.environ.get("STEWARD_WEBHOOK_SECRET", "sdk-webhook")
EVENT: dict[str, Any] = {
    "event": "agent.action",
    # Non-ASCII text, a float and nesting: the bytes signed must be the bytes sent.
    "payload": {"agent_name": "Ünïcode-bot ✓", "action": "read_data", "resource": "db/invoices",
                "input": {"rows": 3, "ratio": 0.1, "q": "naïve \"quoted\""}},
}
ACCEPTED = {"accepted": True, "event": "agent.action", "audit_id": None, "candidate_id": "c-1"}


def independent_hmac(secret: str, data: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), data, hashlib.sha256).hexdigest()


class Recorder:
    """An httpx.MockTransport handler that keeps every request; the webhook answers 202, the rest 204."""

    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if request.url.path != "/webhooks/agent":
            return httpx.Response(204)
        return httpx.Response(202, json=ACCEPTED)


def mock_client(recorder: Callable[[httpx.Request], httpx.Response], **kw: Any) -> StewardClient:
    http = httpx.Client(base_url="http://steward.test", transport=httpx.MockTransport(recorder),
                        headers={"x-api-key": "stw_test"})
    return StewardClient("http://steward.test", http_client=http, **kw)


def test_the_signature_is_the_hmac_of_the_bytes_sent() -> None:
    rec = Recorder()
    c = mock_client(rec, webhook_secret=SECRET)
    out = c.discovery_webhook(EVENT)
    assert out.accepted is True and out.candidate_id == "c-1"
    (req,) = rec.requests
    sent = req.content
    assert json.loads(sent) == EVENT
    header = req.headers["x-webhook-signature"]
    assert header == independent_hmac(SECRET, sent)
    assert header.startswith("sha256=") and header[7:] == header[7:].lower() and len(header) == 7 + 64
    assert req.headers["x-api-key"] == "stw_test" and req.headers["content-type"] == "application/json"
    # Other paths are not signed.
    c.agents_delete("a-1")
    assert "x-webhook-signature" not in rec.requests[1].headers


def test_a_pydantic_body_is_signed_as_sent_too() -> None:
    from steward_sdk.models import WebhookEvent

    rec = Recorder()
    c = mock_client(rec, webhook_secret=SECRET.encode())  # bytes secrets work as well
    c.discovery_webhook(WebhookEvent.model_validate(EVENT))
    (req,) = rec.requests
    assert req.headers["x-webhook-signature"] == independent_hmac(SECRET, req.content)


async def test_async_client_signs_the_bytes_sent() -> None:
    rec = Recorder()
    http = httpx.AsyncClient(base_url="http://steward.test", transport=httpx.MockTransport(rec))
    async with AsyncStewardClient("http://steward.test", http_client=http, webhook_secret=SECRET) as c:
        out = await c.discovery_webhook(EVENT)
    assert out.accepted is True
    (req,) = rec.requests
    assert req.headers["x-webhook-signature"] == independent_hmac(SECRET, req.content)


@pytest.mark.parametrize("secret", [None, ""])
def test_without_a_secret_the_call_fails_before_any_request(secret: Any) -> None:
    rec = Recorder()
    c = mock_client(rec, webhook_secret=secret)
    with pytest.raises(StewardConfigError, match="webhook_secret") as e:
        c.discovery_webhook(EVENT)
    assert isinstance(e.value, StewardError) and isinstance(e.value, ValueError)
    assert rec.requests == []


async def test_async_without_a_secret_the_call_fails_before_any_request() -> None:
    rec = Recorder()
    http = httpx.AsyncClient(base_url="http://steward.test", transport=httpx.MockTransport(rec))
    async with AsyncStewardClient("http://steward.test", http_client=http) as c:
        with pytest.raises(StewardConfigError):
            await c.discovery_webhook(EVENT)
    assert rec.requests == []


def test_sign_and_verify() -> None:
    body = json.dumps(EVENT).encode()
    sig = sign_webhook(SECRET, body)
    assert sig == independent_hmac(SECRET, body)
    assert sign_webhook(SECRET, body.decode()) == sig  # str bodies are UTF-8
    assert verify_webhook(SECRET, body, sig)
    assert verify_webhook(SECRET, bytearray(body), sig)
    assert verify_webhook(SECRET, body, sig[7:])  # bare hex, as the server accepts
    assert verify_webhook(SECRET, body, "SHA256=" + sig[7:].upper())
    assert verify_webhook(SECRET, body, f"  {sig}\n")
    # Bad: another secret, another body, a changed digit, malformed or missing headers.
    assert not verify_webhook("other", body, sig)
    assert not verify_webhook(SECRET, body + b" ", sig)
    flipped = sig[:-1] + ("0" if sig[-1] != "0" else "1")
    assert not verify_webhook(SECRET, body, flipped)
    for bad in ["", "sha256=", "sha256=zz", sig[:-2], sig + "00", "sha1=" + sig[7:], "sha256=ü" + sig[8:], "md5"]:
        assert not verify_webhook(SECRET, body, bad), bad
    assert not verify_webhook(SECRET, body, None)
    with pytest.raises(StewardConfigError):
        sign_webhook("", body)
    with pytest.raises(StewardConfigError):
        verify_webhook("", body, sig)


def test_the_secret_stays_out_of_repr_and_str() -> None:
    for c in (StewardClient("http://steward.test", api_key="stw_k", webhook_secret=SECRET),
              AsyncStewardClient("http://steward.test", api_key="stw_k", webhook_secret=SECRET)):
        for text in (repr(c), str(c), repr(vars(c)), str(vars(c))):
            assert SECRET not in text, text
        assert "webhook_secret=<hidden>" in repr(c)
    assert SECRET not in repr(StewardConfigError("x"))


# -- against the server (.ci/e2e/sdk.sh) ----------------------------------------------------------

def test_webhook_accepted_by_the_server(t1: Tenant) -> None:
    agent = t1.agent("webhook")
    with StewardClient(URL, api_key=t1.key, webhook_secret=WEBHOOK_SECRET) as c:
        out = c.discovery_webhook({"event": "agent.action", "payload": {
            "agent_id": agent["id"], "action": "read_data", "resource": "db/ünïcode", "input": {"rows": 2}}})
        assert out.accepted is True and out.event == "agent.action" and out.audit_id and out.candidate_id is None
        (entry,) = [e for e in t1.audit(agent["id"]) if e["id"] == out.audit_id]
        assert entry["resource"] == "db/ünïcode" and entry["input"] == {"rows": 2}
        name = f"webhook-shadow-{uuid.uuid4().hex[:8]}"
        out = c.discovery_webhook({"event": "agent.action", "payload": {"agent_name": name, "action": "read_data",
                                                                        "resource": "db/x"}})
        assert out.accepted is True and out.candidate_id and out.audit_id is None


async def test_webhook_with_a_wrong_secret_is_refused(t1: Tenant) -> None:
    body = {"event": "agent.action", "payload": {"agent_name": "wrong-secret", "action": "read_data", "resource": "x"}}
    with StewardClient(URL, api_key=t1.key, webhook_secret=WEBHOOK_SECRET + "-wrong") as c:
        with pytest.raises(StewardAPIError) as e:
            c.discovery_webhook(body)
    assert e.value.status == 401 and e.value.code == "invalid_signature"
    async with AsyncStewardClient(URL, api_key=t1.key, webhook_secret="not-the-secret") as ac:
        with pytest.raises(StewardAPIError) as ae:
            await ac.discovery_webhook(body)
    assert ae.value.status == 401 and ae.value.code == "invalid_signature"
