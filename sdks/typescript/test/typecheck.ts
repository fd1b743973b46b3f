// Compiled by `tsc -p tsconfig.json` (no emit): the public types resolve and fit together.
import {
  Steward, StewardClient, ActionDenied, StewardConfigError, signWebhook, verifyWebhook, type CheckResponse, type WebhookAccepted,
} from '../src/index.js';
import { governTools } from '../src/ai.js';

async function typed(): Promise<void> {
  const client = new StewardClient({ baseUrl: 'http://127.0.0.1:8080', apiKey: 'stw_x' });
  const decision: CheckResponse = await client.policiesCheck({ agent_id: 'a', action: 'read_data', resource: 'crm', context: {} });
  const allowed: boolean = decision.allowed;
  const page = await client.agentsList({ limit: 10 });
  const names: string[] = page.items.map((a) => a.name);
  const steward = new Steward({ baseUrl: 'http://127.0.0.1:8080', apiKey: 'stw_x', agentName: 'typed', register: true });
  const exportRows = steward.govern(async (args: { table: string; records: number }) => args.records * 2, {
    action: 'export_data',
    resource: (a) => `reports/${a.table}`,
    context: (a) => ({ records: a.records }),
  });
  const n: number = await exportRows({ table: 'q3', records: 10 });
  // The docs' form: arguments destructured without an annotation (probe K-8).
  const exportContacts = steward.govern(async ({ segment, records }) => ({ file: `exports/${segment}.csv`, records }),
    { name: 'export_contacts', action: 'export_data', resource: 'crm/{segment}', context: ({ records }) => ({ records }) });
  await exportContacts({ segment: 'churn', records: 1 });
  steward.close();
  const tools = governTools(steward, { t: { execute: async (x: { q: string }) => x.q } });
  const out: string = await tools.t.execute({ q: 'x' });
  try {
    await exportRows({ table: 'q3', records: 1 });
  } catch (e) {
    if (e instanceof ActionDenied) {
      const reason: string = e.reason;
      void reason;
    }
  }
  // Signed webhooks: the client signs POST /webhooks/agent; the helpers are async (Web Crypto).
  const hooks = new StewardClient({ baseUrl: 'http://127.0.0.1:8080', apiKey: 'stw_x', webhookSecret: 'dev-webhook-secret-change-me' });
  const accepted: WebhookAccepted = await hooks.discoveryWebhook({ event: 'agent.action',
    payload: { agent_name: 'bot', action: 'read_data', resource: 'db/x' } });
  const signature: string = await signWebhook('secret', new TextEncoder().encode('{}'));
  const valid: boolean = await verifyWebhook('secret', '{}', signature);
  const misconfigured: boolean = new Error('x') instanceof StewardConfigError;
  void allowed; void names; void n; void out; void accepted; void valid; void misconfigured;
}
void typed;
