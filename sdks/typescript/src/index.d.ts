// Types of the hand-written part of the SDK; the API types are generated (./generated/types.d.ts).
import { GeneratedClient } from './generated/client.js';
import type {
  AuditEntry,
  HitlRequest,
  GuardResult,
  IntegrationStatus,
  Operations,
  CheckResponse,
} from './generated/types.js';

export type * from './generated/types.js';
export { OPERATION_COUNT } from './generated/client.js';

export declare class StewardError extends Error {}

/** The server answered with an RFC 9457 problem document. */
export declare class StewardAPIError extends StewardError {
  status: number;
  problem: Record<string, unknown>;
  code: string | null;
  detail: string | null;
}

/** The server could not be reached or did not answer in time; `cause` is fetch's error. */
export declare class StewardConnectionError extends StewardError {
  method: string;
  path: string;
  cause: unknown;
}

/** The client is not configured for the call (e.g. `discoveryWebhook` without `webhookSecret`); thrown before anything is sent. */
export declare class StewardConfigError extends StewardError {}

/** Bytes or text (a string is signed as UTF-8). */
export type WebhookBytes = string | ArrayBuffer | ArrayBufferView;

/** `'X-Webhook-Signature'`, the header `POST /webhooks/agent` is signed with. */
export declare const WEBHOOK_SIGNATURE_HEADER: 'X-Webhook-Signature';

/**
 * The `X-Webhook-Signature` value of `body`: `sha256=<lower-case hex HMAC-SHA256 of the body's
 * bytes>`, keyed with `secret` (the server's WEBHOOK_SECRET). Async (Web Crypto). An empty
 * secret rejects with StewardConfigError.
 */
export declare function signWebhook(secret: WebhookBytes, body: WebhookBytes): Promise<string>;

/**
 * Whether `header` (`sha256=<hex>` or the bare hex, any case) signs `body`'s raw bytes with
 * `secret`, compared in constant time. A missing or malformed header resolves to false; an
 * empty secret rejects with StewardConfigError.
 */
export declare function verifyWebhook(secret: WebhookBytes, body: WebhookBytes, header: string | null | undefined): Promise<boolean>;

/** The governed tool ran, but its audit entry could not be written. */
export declare class AuditFailed extends StewardError {
  cause: unknown;
  /** The tool's value (undefined when it threw). */
  result: unknown;
  /** The tool's exception, when it threw. */
  error: unknown;
  action: string | undefined;
  resource: string | undefined;
}

/** A governed call was refused; `reason` is the server's reason. */
export declare class ActionDenied extends StewardError {
  reason: string;
  action: string | undefined;
  resource: string | undefined;
  severity: string | null;
  riskScore: number | null;
  decision: CheckResponse | null;
  auditId: string | null;
}
export declare class PromptBlocked extends ActionDenied {
  argument: string;
  guard: GuardResult;
}
export declare class ApprovalRejected extends ActionDenied {
  approval: HitlRequest;
  approvalId: string | null;
}
export declare class ApprovalTimeout extends ActionDenied {
  approvalId: string;
}
export declare class AgentNotRegistered extends ActionDenied {
  candidate: Operations['discovery_ingest']['response'];
}

export interface ClientOptions {
  baseUrl: string;
  apiKey?: string;
  token?: string;
  adminKey?: string;
  /**
   * The server's WEBHOOK_SECRET: `discoveryWebhook` (POST /webhooks/agent) sends
   * `X-Webhook-Signature` over the exact body bytes. Without it that call throws
   * StewardConfigError. Never shown by JSON.stringify or console.log of the client.
   */
  webhookSecret?: WebhookBytes;
  fetch?: typeof globalThis.fetch;
  timeoutMs?: number;
}

/** fetch-based client: one method per operation of /openapi.json. */
export declare class StewardClient extends GeneratedClient {
  constructor(options: ClientOptions);
  baseUrl: string;
}

export declare const PROMPT_ARGUMENTS: Set<string>;

/** How one tool is governed. `A` is the tool's argument object. */
export interface GovernOptions<A = any> {
  name?: string;
  /** Policy action; default the tool's name. */
  action?: string;
  /** Resource: a string with `{arg}` placeholders or a function of the arguments; default `tool/<name>`. */
  resource?: string | ((args: A) => string);
  /** Policy-check context: an object or a function of the arguments. */
  context?: Record<string, unknown> | ((args: A) => Record<string, unknown>);
  /** Names of the arguments checked by the prompt guard; default PROMPT_ARGUMENTS. */
  guardArgs?: string[];
  /** Reasoning lines written to the audit entry. */
  reasoning?: string | string[] | ((args: A) => string | string[]);
  approvalTimeoutMs?: number | null;
  /** Ends a wait for approval when aborted; the tool then does not run. */
  signal?: AbortSignal;
}

export interface StewardOptions {
  baseUrl?: string;
  apiKey?: string;
  agentId?: string;
  agentName?: string;
  /** Register `agentName` when it is unknown. */
  register?: boolean;
  agentType?: string;
  capabilities?: string[];
  guard?: boolean;
  approvalTimeoutMs?: number | null;
  pollInitialMs?: number;
  pollMaxMs?: number;
  pollFactor?: number;
  /** Heartbeat period; 0 or null: none. */
  heartbeatIntervalMs?: number | null;
  audit?: boolean;
  auditDenied?: boolean;
  /** Discovery source of an unregistered agent: agent_framework or model_provider. */
  source?: 'agent_framework' | 'model_provider';
  onApprovalRequest?: (request: HitlRequest) => unknown;
  fetch?: typeof globalThis.fetch;
  client?: StewardClient;
  /** Time-out of each HTTP call of the governed flow (default 10,000 ms; `timeout` in Python). */
  timeoutMs?: number;
  /** Where heartbeat failures are reported (once per streak; default `console`). */
  logger?: { warn?: (message: string) => void } | null;
}

/** What `authorize` grants. */
export interface Permit<A = any> {
  tool: string;
  action: string;
  resource: string;
  context: Record<string, unknown>;
  arguments: A;
  reasoning: string[];
  decision: CheckResponse;
  approval: HitlRequest | null;
  guard: GuardResult[];
}

export declare class Steward {
  constructor(options: StewardOptions);
  client: StewardClient;
  heartbeatsSent: number;
  agentId(): Promise<string>;
  findAgent(name: string): Promise<string | null>;
  start(): Promise<this>;
  stop(): void;
  /** The same as `stop()`, named as in the Python SDK. */
  close(): void;
  govern<A = any, R = any>(fn: (args: A, ...rest: any[]) => R | Promise<R>, options?: GovernOptions<A>): (args: A, ...rest: any[]) => Promise<R>;
  call<A, R>(spec: GovernOptions<A> & { name: string }, args: A, run: () => R | Promise<R>): Promise<R>;
  authorize<A>(spec: GovernOptions<A> & { name: string }, args: A): Promise<Permit<A>>;
  record(permit: Permit, outcome: { output?: unknown; error?: unknown; denied?: ActionDenied }): Promise<AuditEntry | null>;
  check(action: string, resource: string, context?: Record<string, unknown>): Promise<CheckResponse>;
  integrationStatus(integration?: 'agent_framework' | 'model_provider'): Promise<IntegrationStatus>;
}
