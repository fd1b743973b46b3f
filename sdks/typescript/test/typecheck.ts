// Compiled by `tsc -p tsconfig.json` (no emit): the public types resolve and fit together.
import { Steward, StewardClient, ActionDenied, type CheckResponse } from '../src/index.js';
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
  void allowed; void names; void n; void out;
}
void typed;
