import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import {
  ActionDenied, AgentNotRegistered, ApprovalRejected, ApprovalTimeout, AuditFailed, PromptBlocked, Steward, StewardAPIError,
  StewardClient, StewardConnectionError, OPERATION_COUNT,
} from '../src/index.js';
import { INJECTION, PII_NO_CONSENT, PII_OK, URL, tenant } from './helpers.mjs';

let t1;
let t2;
before(async () => {
  t1 = await tenant();
  t2 = await tenant({ hitl: true });
});

const stewardFor = async (t, opts = {}) => {
  const a = await t.agent();
  return new Steward({ baseUrl: URL, apiKey: t.key, agentId: a.id, pollInitialMs: 50, pollMaxMs: 300, approvalTimeoutMs: 30000, heartbeatIntervalMs: 0, ...opts });
};

test('generated client: one method per operation, typed errors', async () => {
  const doc = await (await fetch(`${URL}/openapi.json`)).json();
  const ids = Object.values(doc.paths).flatMap((item) => Object.entries(item)
    .filter(([m]) => ['get', 'put', 'post', 'delete', 'patch'].includes(m)).map(([, op]) => op.operationId));
  assert.equal(OPERATION_COUNT, ids.length);
  const c = new StewardClient({ baseUrl: URL, apiKey: t1.key });
  for (const id of ids) {
    const name = id.replace(/_([a-z0-9])/g, (_m, ch) => ch.toUpperCase());
    assert.equal(typeof c[name], 'function', name);
  }
  const a = await c.agentsRegister({ name: 'js-typed', type: 'tool' });
  await assert.rejects(c.agentsRegister({ name: 'js-typed' }), (e) => e instanceof StewardAPIError && e.status === 409 && e.code === 'conflict');
  const page = await c.agentsList({ limit: 1 });
  assert.equal(page.limit, 1);
  assert.equal((await c.agentsGet(a.id)).name, 'js-typed');
});

test('allowed call runs and is audited', async () => {
  const s = await stewardFor(t1);
  const ran = [];
  const read = s.govern(async ({ table, limit }) => { ran.push(table); return { rows: limit }; },
    { name: 'read_contacts', action: 'read_data', resource: 'crm/{table}', context: PII_OK, reasoning: 'asked by the user' });
  assert.deepEqual(await read({ table: 'contacts', limit: 3 }), { rows: 3 });
  assert.deepEqual(ran, ['contacts']);
  const [e] = await t1.audit(await s.agentId());
  assert.equal(e.resource, 'crm/contacts');
  assert.deepEqual(e.output, { result: { rows: 3 } });
  assert.deepEqual(e.input.arguments, { table: 'contacts', limit: 3 });
  assert.equal(e.is_approved, true);
  assert.equal(e.reasoning[0], 'asked by the user');
  assert.ok(e.reasoning.some((r) => r.startsWith('policy: allowed by')));
});

test('denied call throws ActionDenied with the reason, never runs, audit says not approved', async () => {
  const s = await stewardFor(t1);
  let ran = false;
  const exp = s.govern(() => { ran = true; }, { name: 'exp', action: 'read_data', resource: 'crm/contacts', context: PII_NO_CONSENT });
  await assert.rejects(exp({}), (e) => e instanceof ActionDenied && e.constructor === ActionDenied && /consent/.test(e.reason) && e.severity === 'high');
  assert.equal(ran, false);
  const [e] = await t1.audit(await s.agentId());
  assert.equal(e.is_approved, false);
  assert.match(e.output.denied, /consent/);
});

test('approval: request, wait, re-check with the approval_id, run', async () => {
  const seen = [];
  const s = await stewardFor(t2, { onApprovalRequest: (r) => seen.push(r) });
  const exp = s.govern(({ records }) => `exported ${records}`,
    { name: 'export', action: 'export_data', resource: 'reports/q3', context: ({ records }) => ({ records }) });
  const human = t2.approver('approve');
  try {
    assert.equal(await exp({ records: 5000 }), 'exported 5000');
  } finally {
    await human.stop();
  }
  assert.equal(seen.length, 1);
  const entries = await t2.audit(await s.agentId());
  const [e] = entries.filter((x) => x.action === 'export_data');
  assert.equal(e.input.approval.approval_id, seen[0].approval_id);
  assert.equal(entries.filter((x) => x.action === 'hitl.consumed').length, 1);
  const again = await s.check('export_data', 'reports/q3', { records: 5000, approval_id: seen[0].approval_id });
  assert.equal(again.allowed, false);
  assert.match(again.reason, /already used/);
});

test('approval rejected and approval timeout', async () => {
  const s = await stewardFor(t2);
  const wipe = s.govern(() => 'wiped', { name: 'wipe', action: 'delete_data', resource: 'tmp/cache' });
  const human = t2.approver('reject', 'not today');
  try {
    await assert.rejects(wipe({}), (e) => e instanceof ApprovalRejected && /not today/.test(e.reason));
  } finally {
    await human.stop();
  }
  const fw = s.govern(() => 'changed', { name: 'fw', action: 'change_security_policy', resource: 'policies/fw', approvalTimeoutMs: 500 });
  const t0 = Date.now();
  let pendingId;
  await assert.rejects(fw({}), (e) => { pendingId = e.approvalId; return e instanceof ApprovalTimeout && typeof e.approvalId === 'string'; });
  assert.ok(Date.now() - t0 >= 450);
  assert.equal((await t2.get(`/api/v1/hitl/status/${pendingId}`)).status, 'pending');
});

test('guard blocks a prompt-like argument before the check', async () => {
  const s = await stewardFor(t1);
  let ran = 0;
  const search = s.govern(({ query }) => { ran += 1; return 'ok'; }, { name: 'search', action: 'read_data', resource: 'kb' });
  await assert.rejects(search({ query: INJECTION }), (e) => e instanceof PromptBlocked && e.argument === 'query' && e.guard.blocked === true);
  assert.equal(ran, 0);
  assert.equal(await search({ query: 'refund policy?' }), 'ok');
});

test('unregistered agent is reported to discovery; integration status counts it', async () => {
  const name = `js-shadow-${Date.now()}`;
  const s = new Steward({ baseUrl: URL, apiKey: t1.key, agentName: name, source: 'model_provider', heartbeatIntervalMs: 0 });
  const before = (await s.integrationStatus()).events_received;
  const f = s.govern(() => 1, { name: 't', action: 'read_data', resource: 'x' });
  await assert.rejects(f({}), (e) => e instanceof AgentNotRegistered && e.candidate.source === 'model_provider' && e.candidate.name === name);
  const st = await s.integrationStatus();
  assert.equal(st.integration, 'model_provider');
  assert.equal(st.events_received, before + 1);
  const pending = (await t1.get('/api/v1/discovery/candidates')).items.find((c) => c.name === name);
  const res = await fetch(`${URL}/api/v1/discovery/candidates/${pending.id}/confirm`, { method: 'POST', headers: { 'x-api-key': t1.key } });
  assert.equal(res.status, 200);
  const { agent } = await res.json();
  assert.equal(await f({}), 1);
  assert.equal(await s.agentId(), agent.id);
});

test('register by name and heartbeats', async () => {
  const s = new Steward({ baseUrl: URL, apiKey: t1.key, agentName: `js-beat-${Date.now()}`, register: true, heartbeatIntervalMs: 200 });
  await s.start();
  await new Promise((r) => setTimeout(r, 500));
  s.stop();
  assert.ok(s.heartbeatsSent >= 2, `heartbeats: ${s.heartbeatsSent}`);
  const a = await t1.get(`/api/v1/agents/${await s.agentId()}`);
  assert.notEqual(a.last_heartbeat, null);
});

test('a suspended agent is refused with the reason', async () => {
  const s = await stewardFor(t1);
  const f = s.govern(() => 'ran', { name: 't', action: 'read_data', resource: 'crm/contacts' });
  assert.equal(await f({}), 'ran');
  const res = await fetch(`${URL}/api/v1/agents/${await s.agentId()}/suspend`, { method: 'POST', headers: { 'x-api-key': t1.key } });
  assert.equal(res.status, 200);
  await assert.rejects(f({}), (e) => e instanceof ActionDenied && /suspended/.test(e.reason) && e.auditId === null);
});

test('a failed audit write after the run is AuditFailed with the result, not a refusal', async () => {
  const s = await stewardFor(t1);
  const ran = [];
  const read = s.govern(async () => { ran.push(1); return { rows: 2 }; },
    { name: 'read_contacts', action: 'read_data', resource: 'crm/contacts', context: PII_OK });
  s.client.auditLog = async () => { throw new StewardAPIError(503, { code: 'service_unavailable' }, 'POST', '/api/v1/audit/log'); };
  await assert.rejects(read({}), (e) => e instanceof AuditFailed && !(e instanceof ActionDenied) && e.result.rows === 2);
  assert.deepEqual(ran, [1]);
});

test('a transient failure while waiting for approval keeps waiting', async () => {
  const s = await stewardFor(t2);
  const real = s.client.hitlStatus.bind(s.client);
  let failed = 0;
  s.client.hitlStatus = async (id) => {
    if (failed === 0) { failed += 1; throw new StewardConnectionError('GET', `/api/v1/hitl/status/${id}`, new Error('reset')); }
    return real(id);
  };
  const exp = s.govern(({ records }) => `exported ${records}`,
    { name: 'export', action: 'export_data', resource: 'reports/q3', context: ({ records }) => ({ records }) });
  const human = t2.approver('approve');
  try {
    assert.equal(await exp({ records: 5000 }), 'exported 5000');
  } finally {
    await human.stop();
  }
  assert.equal(failed, 1);
});

test('an aborted run stops waiting for approval and never runs the tool', async () => {
  const s = await stewardFor(t2);
  const ran = [];
  const exp = s.govern(({ records }) => { ran.push(records); return 'done'; },
    { name: 'export', action: 'export_data', resource: 'reports/q4', context: ({ records }) => ({ records }) });
  const abort = new AbortController();
  setTimeout(() => abort.abort(new Error('the user gave up')), 300);
  const started = Date.now();
  await assert.rejects(s.call({ ...exp.stewardSpec, signal: abort.signal }, { records: 5000 }, () => ran.push(1)),
    /the user gave up/);
  assert.ok(Date.now() - started < 5000);
  assert.deepEqual(ran, []);
});

test('an unnamed function is governed as tool; an unreachable server is StewardConnectionError', async () => {
  const s = await stewardFor(t1);
  const anon = s.govern((() => async () => 1)());
  assert.equal(anon.stewardSpec.name, 'tool');
  const c = new StewardClient({ baseUrl: 'http://127.0.0.1:9', apiKey: 'stw_x', timeoutMs: 2000 });
  await assert.rejects(c.agentsList({}), (e) => e instanceof StewardConnectionError);
  assert.ok(!JSON.stringify(c).includes('stw_x'));
});
