import type { ActionDenied, GovernOptions, Steward } from './index.js';

/** Options of one governed AI SDK tool: `name` is its key in the `tools` object. */
export interface GovernToolOptions<A = any> extends GovernOptions<A> {
  name: string;
  /** `throw` (default): a refusal throws ActionDenied; `result`: it becomes the tool's result. */
  onDeny?: 'throw' | 'result';
}

export interface DeniedResult {
  denied: true;
  reason: string;
  action: string | undefined;
  resource: string | undefined;
}

/** The tool with its `execute` governed by `steward`. */
export declare function governTool<T extends { execute?: (...args: any[]) => any }>(
  steward: Steward,
  tool: T,
  options: GovernToolOptions,
): T;

/** Every tool of a `tools` object governed; `options` by tool name. */
export declare function governTools<TS extends Record<string, { execute?: (...args: any[]) => any }>>(
  steward: Steward,
  tools: TS,
  options?: { [K in keyof TS]?: Omit<GovernToolOptions, 'name'> },
): TS;

export type { ActionDenied };
