"""Driver of .ci/e2e/hitl_multi_instance.sh: HITL and WebSocket across two instances."""

import asyncio
import concurrent.futures
import json
import sys
import time
import uuid

import httpx
import websockets

A, B, ADMIN_KEY, SUPER_EMAIL, SUPER_PASSWORD = sys.argv[1:6]
API = "/api/v1"
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def call(base, method, path, *, key=None, jwt=None, admin=None, body=None):
    headers = {}
    if key:
        headers["X-API-Key"] = key
    if jwt:
        headers["Authorization"] = f"Bearer {jwt}"
    if admin:
        headers["X-Admin-Key"] = admin
    return httpx.request(method, base + API + path, headers=headers, json=body, timeout=10)


def login(base, email, password):
    r = call(base, "POST", "/auth/login", body={"email": email, "password": password})
    r.raise_for_status()
    return r.json()


def user(role, tenant_id, super_jwt):
    email = f"{role}-{uuid.uuid4().hex[:10]}@e2e.test"
    r = call(A, "POST", "/users", jwt=super_jwt,
             body={"email": email, "password": "E2e-password-123", "role": role, "tenant_id": tenant_id})
    r.raise_for_status()
    body = login(A, email, "E2e-password-123")
    return {"id": body["user"]["id"], "jwt": body["access_token"]}


async def recv_json(ws, timeout=5.0):
    return json.loads(await asyncio.wait_for(ws.recv(), timeout))


async def wait_event(ws, kind, pred, timeout=5.0):
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"no {kind} within {timeout}s")
        msg = await recv_json(ws, left)
        if msg.get("event") == kind and pred(msg.get("data", {})):
            return msg


def ws_url(base, jwt):
    return base.replace("http://", "ws://") + f"{API}/ws?token={jwt}"


async def main():
    sup = login(A, SUPER_EMAIL, SUPER_PASSWORD)["access_token"]
    r = call(A, "POST", "/tenants", admin=ADMIN_KEY, body={"name": f"e2e-{uuid.uuid4().hex[:8]}"})
    r.raise_for_status()
    tenant = r.json()
    key = tenant["api_key"]
    analyst = user("security_analyst", tenant["id"], sup)
    dev = user("developer", tenant["id"], sup)
    agent = call(A, "POST", "/agents/register", key=key, body={"name": f"agent-{uuid.uuid4().hex[:8]}"}).json()["id"]

    async with websockets.connect(ws_url(A, analyst["jwt"])) as on_a:
        hello = await recv_json(on_a)
        check(hello["event"] == "system.status" and hello["data"]["user_connections"] == 1,
              "system.status on A counts the first connection")
        async with websockets.connect(ws_url(B, analyst["jwt"])) as on_b:
            hello_b = await recv_json(on_b)
            check(hello_b["data"]["user_connections"] == 2 and hello_b["data"]["connections"] >= 2,
                  f"a connection on B counts the one on A too ({hello_b['data']})")

            # Created through A, approved through B, seen live on A.
            req = call(A, "POST", "/hitl/request", key=key,
                       body={"agent_id": agent, "action": "delete_data", "resource": "crm/1", "context": {"n": 1}})
            check(req.status_code == 201, "request created through A")
            rid = req.json()["approval_id"]
            await wait_event(on_a, "hitl.requested", lambda d: d.get("approval_id") == rid)
            check(True, "hitl.requested received on A")
            await wait_event(on_b, "hitl.requested", lambda d: d.get("approval_id") == rid)
            check(True, "hitl.requested received on B")
            r = call(B, "POST", f"/hitl/approve/{rid}", jwt=analyst["jwt"], body={"approver": "alice"})
            check(r.status_code == 200 and r.json()["status"] == "approved", "approved through B")
            msg = await wait_event(on_a, "hitl.resolved", lambda d: d.get("approval_id") == rid)
            check(msg["data"]["status"] == "approved", "hitl.resolved received on A")
            # The approval, bound to its action, is used once through A.
            ctx = {"n": 1, "approval_id": rid}
            first = call(A, "POST", "/policies/check", key=key,
                         body={"agent_id": agent, "action": "delete_data", "resource": "crm/1", "context": ctx}).json()
            second = call(B, "POST", "/policies/check", key=key,
                          body={"agent_id": agent, "action": "delete_data", "resource": "crm/1", "context": ctx}).json()
            check(first["allowed"] is True and second["allowed"] is False,
                  "an approval used through A cannot be used again through B")

    # A user blocked through B is disconnected from A within 2 s (1008).
    async with websockets.connect(ws_url(A, dev["jwt"])) as dev_ws:
        await recv_json(dev_ws)
        t0 = time.monotonic()
        r = call(B, "POST", f"/users/{dev['id']}/block", jwt=sup)
        check(r.status_code == 200, "user blocked through B")
        code = None
        try:
            while time.monotonic() - t0 < 3:
                await asyncio.wait_for(dev_ws.recv(), 3 - (time.monotonic() - t0))
        except websockets.ConnectionClosed as closed:
            code = closed.rcvd.code if closed.rcvd else None
        except asyncio.TimeoutError:
            pass
        took = time.monotonic() - t0
        check(code == 1008 and took < 2.0, f"disconnected from A with {code} after {took:.2f}s")

    # Concurrent decisions through A and B: exactly one 200 and one 409, every time.
    pool = concurrent.futures.ThreadPoolExecutor(2)
    for i in range(10):
        rid = call(A, "POST", "/hitl/request", key=key,
                   body={"agent_id": agent, "action": "delete_data", "resource": f"race/{i}"}).json()["approval_id"]
        fa = pool.submit(call, A, "POST", f"/hitl/approve/{rid}", jwt=analyst["jwt"], body={"approver": "a"})
        fb = pool.submit(call, B, "POST", f"/hitl/reject/{rid}", jwt=analyst["jwt"], body={"approver": "b"})
        codes = sorted([fa.result().status_code, fb.result().status_code])
        check(codes == [200, 409], f"race {i}: {codes}")


asyncio.run(main())
if failures:
    print(f"{len(failures)} check(s) failed", flush=True)
    sys.exit(1)
print("multi-instance HITL and WebSocket: all checks passed", flush=True)
