// Signed inbound webhooks (contract 21): discoveryWebhook sends X-Webhook-Signature over the exact
// body bytes; signWebhook / verifyWebhook; the secret stays hidden. The first tests use a mock
// fetch (no server); the last two run against the server of STEWARD_URL (.ci/e2e/sdk.sh starts
// it with WEBHOOK_SECRET=sdk-webhook).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { inspect } from 'node:util';
import {
  StewardAPIError, StewardClient, StewardConfigError, StewardError, WEBHOOK_SIGNATURE_HEADER, signWebhook, verifyWebhook,
} from '../src/index.js';
import { URL, tenant } from './helpers.mjs';

const SECRET = 's3cret-for-tests';
const WEBHOOK_SECRET = process.env.STEWARD_WEBHOOK_SECRET ?? 'sdk-webhook';
const EVENT = {
  event: 'agent.action',
  // Non-ASCII text, a float and nesting: the bytes signed must be the bytes sent.
  payload: { agent_name: 'Ünïcode-bot ✓', action: 'read_data', resource: 'db/invoices', input: { rows: 3, ratio: 0.1, q: 'naïve "quoted"' } },
};
const ACCEPTED = { accepted: true, event: 'agent.action', audit_id: null, candidate_id: 'c-1' };

const independentHmac = (secret, bytes) => `sha256=${createHmac('sha256', secret).update(bytes).digest('hex')}`;

/** A fetch that records each request (with the body as the exact bytes) and answers 202 / 204. */
function mockFetch() {
  const calls = [];
  const fetchImpl = async (url, init) => {
    const body = init.body === undefined ? null : new Uint8Array(await new Response(init.body).arrayBuffer());
    calls.push({ url, method: init.method, headers: init.headers, body });
    if (new globalThis.URL(url).pathname !== '/webhooks/agent') return new Response(null, { status: 204 });
    return new Response(JSON.stringify(ACCEPTED), { status: 202, headers: { 'content-type': 'application/json' } });
  };
  return { calls, fetchImpl };
}

test('webhook: the signature is the HMAC of the bytes sent', async () => {
  const { calls, fetchImpl } = mockFetch();
  const c = new StewardClient({ baseUrl: 'http://steward.test', apiKey: 'stw_test', webhookSecret: SECRET, fetch: fetchImpl });
  assert.deepEqual(await c.discoveryWebhook(EVENT), ACCEPTED);
  assert.equal(calls.length, 1);
  const [req] = calls;
  assert.deepEqual(JSON.parse(new TextDecoder().decode(req.body)), EVENT);
  const header = req.headers['x-webhook-signature'];
  assert.equal(header, independentHmac(SECRET, req.body));
  assert.match(header, /^sha256=[0-9a-f]{64}$/);
  assert.equal(req.headers['x-api-key'], 'stw_test');
  assert.equal(req.headers['content-type'], 'application/json');
  // Other paths are not signed.
  await c.agentsDelete('a-1');
  assert.equal(calls[1].headers['x-webhook-signature'], undefined);
  // A Uint8Array secret works as well.
  const b = new StewardClient({ baseUrl: 'http://steward.test', webhookSecret: new TextEncoder().encode(SECRET), fetch: fetchImpl });
  await b.discoveryWebhook(EVENT);
  assert.equal(calls[2].headers['x-webhook-signature'], independentHmac(SECRET, calls[2].body));
});

test('webhook: without a secret the call throws StewardConfigError before any request', async () => {
  for (const webhookSecret of [undefined, null, '']) {
    const { calls, fetchImpl } = mockFetch();
    const c = new StewardClient({ baseUrl: 'http://steward.test', apiKey: 'stw_test', webhookSecret, fetch: fetchImpl });
    await assert.rejects(c.discoveryWebhook(EVENT),
      (e) => e instanceof StewardConfigError && e instanceof StewardError && /webhookSecret/.test(e.message));
    assert.equal(calls.length, 0);
  }
});

test('signWebhook and verifyWebhook', async () => {
  const text = JSON.stringify(EVENT);
  const bytes = new TextEncoder().encode(text);
  const sig = await signWebhook(SECRET, bytes);
  assert.equal(sig, independentHmac(SECRET, bytes));
  assert.equal(await signWebhook(SECRET, text), sig); // strings are UTF-8
  assert.equal(await signWebhook(SECRET, bytes.buffer), sig);
  assert.equal(WEBHOOK_SIGNATURE_HEADER, 'X-Webhook-Signature');
  assert.equal(await verifyWebhook(SECRET, bytes, sig), true);
  assert.equal(await verifyWebhook(SECRET, text, sig), true);
  assert.equal(await verifyWebhook(SECRET, bytes, sig.slice(7)), true); // bare hex, as the server accepts
  assert.equal(await verifyWebhook(SECRET, bytes, `SHA256=${sig.slice(7).toUpperCase()}`), true);
  assert.equal(await verifyWebhook(SECRET, bytes, ` ${sig}\n`), true);
  // Bad: another secret, another body, a changed digit, malformed or missing headers.
  assert.equal(await verifyWebhook('other', bytes, sig), false);
  assert.equal(await verifyWebhook(SECRET, `${text} `, sig), false);
  const flipped = sig.slice(0, -1) + (sig.endsWith('0') ? '1' : '0');
  assert.equal(await verifyWebhook(SECRET, bytes, flipped), false);
  for (const bad of ['', 'sha256=', 'sha256=zz', sig.slice(0, -2), `${sig}00`, `sha1=${sig.slice(7)}`, `sha256=ü${sig.slice(8)}`, 'md5', sig.slice(0, -1)]) {
    assert.equal(await verifyWebhook(SECRET, bytes, bad), false, bad);
  }
  assert.equal(await verifyWebhook(SECRET, bytes, undefined), false);
  assert.equal(await verifyWebhook(SECRET, bytes, null), false);
  await assert.rejects(signWebhook('', bytes), StewardConfigError);
  await assert.rejects(verifyWebhook('', bytes, sig), StewardConfigError);
});

test('webhook: the secret stays out of JSON.stringify, console.log and keys of the client', () => {
  const c = new StewardClient({ baseUrl: 'http://steward.test', apiKey: 'stw_k', webhookSecret: SECRET });
  for (const text of [JSON.stringify(c), inspect(c), inspect(c, { depth: 5 }), String(c), Object.keys(c).join(',')]) {
    assert.ok(!text.includes(SECRET), text);
  }
});

// -- against the server (.ci/e2e/sdk.sh) ------------------------------------------------------------

test('webhook accepted by the server', async () => {
  const t = await tenant();
  const agent = await t.agent('js-webhook');
  const c = new StewardClient({ baseUrl: URL, apiKey: t.key, webhookSecret: WEBHOOK_SECRET });
  const out = await c.discoveryWebhook({ event: 'agent.action',
    payload: { agent_id: agent.id, action: 'read_data', resource: 'db/ünïcode', input: { rows: 2 } } });
  assert.equal(out.accepted, true);
  assert.equal(out.event, 'agent.action');
  assert.equal(out.candidate_id, null);
  const entry = (await t.audit(agent.id)).find((e) => e.id === out.audit_id);
  assert.equal(entry.resource, 'db/ünïcode');
  assert.deepEqual(entry.input, { rows: 2 });
  const shadow = await c.discoveryWebhook({ event: 'agent.action',
    payload: { agent_name: `js-webhook-shadow-${Date.now()}`, action: 'read_data', resource: 'db/x' } });
  assert.equal(shadow.accepted, true);
  assert.equal(shadow.audit_id, null);
  assert.equal(typeof shadow.candidate_id, 'string');
});

test('webhook with a wrong secret is refused with invalid_signature', async () => {
  const t = await tenant();
  const c = new StewardClient({ baseUrl: URL, apiKey: t.key, webhookSecret: `${WEBHOOK_SECRET}-wrong` });
  await assert.rejects(c.discoveryWebhook({ event: 'agent.action', payload: { agent_name: 'wrong-secret', action: 'read_data', resource: 'x' } }),
    (e) => e instanceof StewardAPIError && e.status === 401 && e.code === 'invalid_signature');
});
