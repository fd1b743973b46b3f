// Vercel AI SDK tool wrapper: governs a tool's `execute` with Steward. Types: ./ai.d.ts.
//
//   import { tool, generateText } from 'ai';
//   import { governTools } from '@steward/sdk/ai';
//   const tools = governTools(steward, { exportContacts: tool({...}) },
//     { exportContacts: { resource: 'crm/contacts', context: (a) => ({ personal_data: true }) } });
//
// A refused call throws ActionDenied from `execute` (the AI SDK reports it to the model as a
// tool error); with `onDeny: 'result'` it returns `{ denied: true, reason }` as the tool's
// result instead.
import { ActionDenied } from './index.js';

export function governTool(steward, aiTool, options = {}) {
  const { onDeny = 'throw', ...rest } = options;
  if (!rest.name) throw new TypeError('governTool needs options.name (the key of the tool in `tools`)');
  if (typeof aiTool.execute !== 'function') throw new TypeError(`tool ${rest.name} has no execute function`);
  const execute = aiTool.execute;
  const spec = { ...rest };
  return {
    ...aiTool,
    execute: async (input, execOptions) => {
      try {
        // The run's abort signal also ends a wait for approval (the tool then never runs).
        const signal = execOptions?.abortSignal;
        return await steward.call(signal ? { ...spec, signal } : spec, input, () => execute(input, execOptions));
      } catch (e) {
        if (onDeny === 'result' && e instanceof ActionDenied) {
          return { denied: true, reason: e.reason, action: e.action, resource: e.resource };
        }
        throw e;
      }
    },
  };
}

export function governTools(steward, tools, options = {}) {
  const out = {};
  for (const [name, t] of Object.entries(tools)) out[name] = governTool(steward, t, { name, ...(options[name] ?? {}) });
  return out;
}
