// Vercel AI SDK: governed tools in generateText with a scripted mock model (ai/test), no network.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { generateText, jsonSchema, stepCountIs, tool } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { ActionDenied, PromptBlocked, Steward } from '../src/index.js';
import { governTool, governTools } from '../src/ai.js';
import { INJECTION, PII_NO_CONSENT, PII_OK, URL, tenant } from './helpers.mjs';

const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } };

/** A model that calls `toolName` with `input`, then answers "done". */
function scripted(toolName, input) {
  let n = 0;
  return new MockLanguageModelV3({
    doGenerate: async () => {
      n += 1;
      if (n === 1) {
        return { content: [{ type: 'tool-call', toolCallId: 'call-1', toolName, input: JSON.stringify(input) }],
          finishReason: { unified: 'tool-calls', raw: 'tool_calls' }, usage, warnings: [] };
      }
      return { content: [{ type: 'text', text: 'done' }], finishReason: { unified: 'stop', raw: 'stop' }, usage, warnings: [] };
    },
  });
}

const ran = [];
const exportContacts = tool({
  description: 'Export rows of a CRM table',
  inputSchema: jsonSchema({ type: 'object', properties: { table: { type: 'string' }, records: { type: 'number' } }, required: ['table', 'records'] }),
  execute: async ({ table, records }) => { ran.push([table, records]); return `exported ${records} rows of ${table}`; },
});
const searchKb = tool({
  description: 'Search the knowledge base',
  inputSchema: jsonSchema({ type: 'object', properties: { query: { type: 'string' } }, required: ['query'] }),
  execute: async ({ query }) => { ran.push(query); return '3 articles'; },
});

let t1;
let t2;
before(async () => {
  t1 = await tenant();
  t2 = await tenant({ hitl: true });
});
const stewardFor = async (t) => new Steward({ baseUrl: URL, apiKey: t.key, agentId: (await t.agent('ai')).id, pollInitialMs: 50, pollMaxMs: 300, approvalTimeoutMs: 30000, heartbeatIntervalMs: 0 });
const toolParts = (r) => r.steps.flatMap((s) => s.content).filter((p) => p.type === 'tool-result' || p.type === 'tool-error');

test('allowed: the tool runs inside generateText and the audit has its output', async () => {
  ran.length = 0;
  const s = await stewardFor(t1);
  const tools = governTools(s, { exportContacts }, { exportContacts: { action: 'read_data', resource: 'crm/{table}', context: PII_OK } });
  const r = await generateText({ model: scripted('exportContacts', { table: 'contacts', records: 4 }), tools, prompt: 'export', stopWhen: stepCountIs(3) });
  assert.equal(r.text, 'done');
  assert.deepEqual(ran, [['contacts', 4]]);
  const [part] = toolParts(r);
  assert.equal(part.type, 'tool-result');
  assert.equal(part.output, 'exported 4 rows of contacts');
  const [e] = await t1.audit(await s.agentId());
  assert.deepEqual(e.output, { result: 'exported 4 rows of contacts' });
});

test('denied: ActionDenied reaches the model as a tool error, or a denied result', async () => {
  ran.length = 0;
  const s = await stewardFor(t1);
  const opts = { name: 'exportContacts', action: 'read_data', resource: 'crm/{table}', context: PII_NO_CONSENT };
  const r = await generateText({ model: scripted('exportContacts', { table: 'contacts', records: 4 }),
    tools: { exportContacts: governTool(s, exportContacts, opts) }, prompt: 'export', stopWhen: stepCountIs(3) });
  const [part] = toolParts(r);
  assert.equal(part.type, 'tool-error');
  assert.ok(part.error instanceof ActionDenied);
  assert.match(part.error.reason, /consent/);
  const r2 = await generateText({ model: scripted('exportContacts', { table: 'contacts', records: 4 }),
    tools: { exportContacts: governTool(s, exportContacts, { ...opts, onDeny: 'result' }) }, prompt: 'export', stopWhen: stepCountIs(3) });
  const [p2] = toolParts(r2);
  assert.equal(p2.type, 'tool-result');
  assert.equal(p2.output.denied, true);
  assert.match(p2.output.reason, /consent/);
  assert.deepEqual(ran, []);
});

test('approval: a bulk export waits for the analyst, then runs', async () => {
  ran.length = 0;
  const s = await stewardFor(t2);
  const tools = governTools(s, { exportContacts }, { exportContacts: { action: 'export_data', resource: 'reports/{table}', context: ({ records }) => ({ records }) } });
  const human = t2.approver('approve');
  let r;
  try {
    r = await generateText({ model: scripted('exportContacts', { table: 'q3', records: 4000 }), tools, prompt: 'export', stopWhen: stepCountIs(3) });
  } finally {
    await human.stop();
  }
  assert.equal(toolParts(r)[0].type, 'tool-result');
  assert.deepEqual(ran, [['q3', 4000]]);
  const [e] = (await t2.audit(await s.agentId())).filter((x) => x.action === 'export_data');
  assert.equal(e.input.approval.approval_id, human.decided[0].approval_id);
});

test('guard block: an injected query never reaches the tool', async () => {
  ran.length = 0;
  const s = await stewardFor(t1);
  const tools = governTools(s, { searchKb }, { searchKb: { action: 'read_data', resource: 'kb' } });
  const r = await generateText({ model: scripted('searchKb', { query: INJECTION }), tools, prompt: 'search', stopWhen: stepCountIs(3) });
  const [part] = toolParts(r);
  assert.equal(part.type, 'tool-error');
  assert.ok(part.error instanceof PromptBlocked);
  assert.deepEqual(ran, []);
});
