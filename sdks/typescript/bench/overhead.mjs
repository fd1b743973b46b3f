#!/usr/bin/env node
// The TypeScript SDK's own cost per governed call, over loopback: a governed call (check + audit,
// or guard + check + audit) against the same HTTP calls made raw with fetch (keep-alive, bodies
// serialised once, responses not parsed), interleaved one by one. Prints p50 / p99 of both, the
// median of the paired differences and the process CPU time added per call; exits 1 when the
// median added time exceeds --budget-ms.
//   node sdks/typescript/bench/overhead.mjs --url http://127.0.0.1:8080 --admin-key KEY --calls 2000
import { randomUUID } from 'node:crypto';
import { Steward } from '../src/index.js';

const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : dflt;
};
const url = arg('url').replace(/\/+$/, '');
const adminKey = arg('admin-key');
const calls = Number(arg('calls', 2000));
const warmup = Number(arg('warmup', 50));
const budget = Number(arg('budget-ms', 2));

const post = async (path, body, headers) => {
  const r = await fetch(url + path, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
  const text = await r.text();
  if (r.status >= 300) throw new Error(`${path} -> ${r.status} ${text}`);
  return text;
};
const t = JSON.parse(await post('/api/v1/tenants', JSON.stringify({ name: `bench-js-${randomUUID().slice(0, 8)}` }), { 'x-admin-key': adminKey }));
const key = { 'x-api-key': t.api_key };
const agent = JSON.parse(await post('/api/v1/agents/register', JSON.stringify({ name: 'bench-agent' }), key));
const steward = new Steward({ baseUrl: url, apiKey: t.api_key, agentId: agent.id, heartbeatIntervalMs: 0 });
const lookup = steward.govern(({ limit }) => ({ rows: limit }), { name: 'lookup', action: 'read_data', resource: 'crm/{table}', context: { purpose: 'bench' } });
const search = steward.govern(() => '3 articles', { name: 'search', action: 'read_data', resource: 'kb/search' });

const checkBody = JSON.stringify({ agent_id: agent.id, action: 'read_data', resource: 'crm/contacts', context: { purpose: 'bench' } });
const auditBody = JSON.stringify({ agent_id: agent.id, action: 'read_data', resource: 'crm/contacts',
  input: { tool: 'lookup', arguments: { table: 'contacts', limit: 5 }, context: { purpose: 'bench' } },
  output: { result: { rows: 5 } }, reasoning: ['policy: allowed'], risk_score: 0.1, is_approved: true });
const guardBody = JSON.stringify({ agent_id: agent.id, prompt: 'what is our refund policy?', context: { tool: 'search', argument: 'query' } });

const raw = async (guard) => {
  if (guard) await post('/api/v1/guard/validate', guardBody, key);
  await post('/api/v1/policies/check', checkBody, key);
  await post('/api/v1/audit/log', auditBody, key);
};
const sdk = (guard) => (guard ? search({ query: 'what is our refund policy?' }) : lookup({ table: 'contacts', limit: 5 }));
const pct = (v, p) => { const s = [...v].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.round((p / 100) * (s.length - 1)))]; };
const cpuMs = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; };

console.log(`TypeScript SDK overhead per governed call, ${calls} calls per case, loopback, ${url}`);
console.log('case                  raw p50  raw p99  sdk p50  sdk p99  added wall  CPU p50  CPU p99  (ms)');
let worst = 0;
for (const [name, guard] of [['check+audit', false], ['guard+check+audit', true]]) {
  for (let i = 0; i < warmup; i++) { await raw(guard); await sdk(guard); }
  const rw = []; const sw = []; const rc = []; const sc = [];
  for (let i = 0; i < calls; i++) {
    const c0 = cpuMs(); const t0 = performance.now();
    await raw(guard);
    const t1 = performance.now(); const c1 = cpuMs();
    await sdk(guard);
    const t2 = performance.now(); const c2 = cpuMs();
    rw.push(t1 - t0); sw.push(t2 - t1); rc.push(c1 - c0); sc.push(c2 - c1);
  }
  const diff = sw.map((s, i) => s - rw[i]);
  const cdiff = sc.map((s, i) => s - rc[i]);
  const f = (x) => x.toFixed(3).padStart(9);
  console.log(`${name.padEnd(20)}${f(pct(rw, 50))}${f(pct(rw, 99))}${f(pct(sw, 50))}${f(pct(sw, 99))}${pct(diff, 50).toFixed(3).padStart(12)}${f(pct(cdiff, 50))}${f(pct(cdiff, 99))}`);
  worst = Math.max(worst, pct(diff, 50));
}
if (worst > budget) {
  console.log(`over budget: the SDK adds ${worst.toFixed(3)} ms (p50) per governed call, budget ${budget} ms`);
  process.exit(1);
}
console.log(`within budget: at most ${worst.toFixed(3)} ms added per governed call (p50), budget ${budget} ms`);
