// Steward SDK for TypeScript / JavaScript (ESM). Types: ./index.d.ts.
//
// - StewardClient: fetch-based client, one method per operation of /openapi.json
//   (generated: ./generated/client.js, ./generated/types.d.ts).
// - Steward: the governance layer, `steward.govern(fn, options)`: prompt guard, policy check,
//   human approval (HITL request, polling with back-off, re-check with the approval_id), the
//   call, the audit entry. A refusal throws ActionDenied (or a subclass) carrying the reason;
//   an unregistered agent is reported to discovery; heartbeats run while the agent runs.
import { GeneratedClient } from './generated/client.js';

export { OPERATION_COUNT } from './generated/client.js';

export class StewardError extends Error {}

export class StewardAPIError extends StewardError {
  constructor(status, problem, method, path) {
    const p = problem && typeof problem === 'object' ? problem : {};
    super(`${method} ${path} -> ${status} ${p.code ?? ''}: ${p.detail ?? ''}`);
    this.name = 'StewardAPIError';
    this.status = status;
    this.problem = p;
    this.code = p.code ?? null;
    this.detail = p.detail ?? null;
  }
}

/** The server could not be reached or did not answer in time; `cause` is fetch's error. */
export class StewardConnectionError extends StewardError {
  constructor(method, path, cause) {
    super(`${method} ${path}: ${cause?.name ?? 'Error'}: ${cause?.message ?? cause}`);
    this.name = 'StewardConnectionError';
    this.method = method;
    this.path = path;
    this.cause = cause;
  }
}

/**
 * The governed tool ran, but its audit entry could not be written. `result` is the tool's
 * value (undefined when it threw; `error` is then its exception), so that a caller need not run
 * the side effect again; `cause` is the audit write's error.
 */
export class AuditFailed extends StewardError {
  constructor(cause, { result, error, action, resource } = {}) {
    super(`${action || 'action'} on ${resource || '?'} ran, but its audit entry was not written: ${cause?.message ?? cause}`);
    this.name = 'AuditFailed';
    this.cause = cause;
    this.result = result;
    this.error = error;
    this.action = action;
    this.resource = resource;
  }
}

/** The client is not configured for the call (e.g. `discoveryWebhook` without `webhookSecret`); thrown before anything is sent. */
export class StewardConfigError extends StewardError {
  constructor(message) {
    super(message);
    this.name = 'StewardConfigError';
  }
}

/** Paths whose requests are signed with the client's `webhookSecret` (contract 21). */
const WEBHOOK_PATHS = new Set(['/webhooks/agent']);
/** The header that carries the signature: `sha256=<lower-case hex HMAC-SHA256 of the body>`. */
export const WEBHOOK_SIGNATURE_HEADER = 'X-Webhook-Signature';

const utf8 = new TextEncoder();
const noSecret = (s) => s === undefined || s === null || (typeof s === 'string' ? s.length : s.byteLength) === 0;

function bytesOf(value, what) {
  if (typeof value === 'string') return utf8.encode(value);
  if (value instanceof ArrayBuffer) return new Uint8Array(value);
  if (ArrayBuffer.isView(value)) return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
  throw new TypeError(`${what} must be a string, an ArrayBuffer or a typed array`);
}

// Web Crypto (Node >= 20 and browsers): no node: import, so the SDK keeps running in browsers.
function subtle() {
  const s = globalThis.crypto?.subtle;
  if (!s) throw new StewardConfigError('webhook signatures need Web Crypto (globalThis.crypto.subtle)');
  return s;
}

function hmacKey(secret, usage) {
  if (noSecret(secret)) throw new StewardConfigError("the webhook secret is empty: pass the server's WEBHOOK_SECRET");
  return subtle().importKey('raw', bytesOf(secret, 'the webhook secret'), { name: 'HMAC', hash: 'SHA-256' }, false, [usage]);
}

/**
 * The `X-Webhook-Signature` value of `body`: `sha256=` and the lower-case hex HMAC-SHA256 of the
 * body's bytes (a string is UTF-8), keyed with `secret` (the server's WEBHOOK_SECRET). Async
 * (Web Crypto). Sign exactly the bytes that are sent.
 */
export async function signWebhook(secret, body) {
  const key = await hmacKey(secret, 'sign');
  const mac = new Uint8Array(await subtle().sign('HMAC', key, bytesOf(body, 'the body')));
  return `sha256=${Array.from(mac, (b) => b.toString(16).padStart(2, '0')).join('')}`;
}

/**
 * Whether `header` (`sha256=<hex>`, or the bare hex, any case) is the HMAC-SHA256 of `body`'s
 * raw bytes with `secret`; Web Crypto's verify compares in constant time. A missing or malformed
 * header is false; an empty secret throws StewardConfigError. Async.
 */
export async function verifyWebhook(secret, body, header) {
  const key = await hmacKey(secret, 'verify');
  const data = bytesOf(body, 'the body');
  if (typeof header !== 'string') return false;
  let hex = header.trim();
  if (hex.startsWith('sha256=') || hex.startsWith('SHA256=')) hex = hex.slice(7);
  if (hex.length === 0 || hex.length % 2 !== 0 || !/^[0-9a-fA-F]+$/.test(hex)) return false;
  const sig = new Uint8Array(hex.length / 2);
  for (let i = 0; i < sig.length; i += 1) sig[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return subtle().verify('HMAC', key, sig, data);
}

/** `application/json` or a `+json` type; JSON lines (`x-ndjson`) are text. */
function isJson(ctype) {
  const media = ctype.split(';')[0].trim().toLowerCase();
  return media === 'application/json' || media.endsWith('+json');
}

export class ActionDenied extends StewardError {
  constructor(reason, { action, resource, severity = null, riskScore = null, decision = null, auditId = null } = {}) {
    super(`${action ?? 'action'} on ${resource ?? '?'} denied: ${reason}`);
    this.name = 'ActionDenied';
    this.reason = reason;
    this.action = action;
    this.resource = resource;
    this.severity = severity;
    this.riskScore = riskScore;
    this.decision = decision;
    this.auditId = auditId;
  }
}

export class PromptBlocked extends ActionDenied {
  constructor(reason, { argument, guard, ...rest }) {
    super(reason, rest);
    this.name = 'PromptBlocked';
    this.argument = argument;
    this.guard = guard;
  }
}

export class ApprovalRejected extends ActionDenied {
  constructor(reason, { approval, ...rest }) {
    super(reason, rest);
    this.name = 'ApprovalRejected';
    this.approval = approval;
    this.approvalId = approval?.approval_id ?? null;
  }
}

export class ApprovalTimeout extends ActionDenied {
  constructor(reason, { approvalId, ...rest }) {
    super(reason, rest);
    this.name = 'ApprovalTimeout';
    this.approvalId = approvalId;
  }
}

export class AgentNotRegistered extends ActionDenied {
  constructor(reason, { candidate, ...rest }) {
    super(reason, rest);
    this.name = 'AgentNotRegistered';
    this.candidate = candidate;
  }
}

export class StewardClient extends GeneratedClient {
  constructor({ baseUrl, apiKey, token, adminKey, webhookSecret, fetch: fetchImpl, timeoutMs = 10000 } = {}) {
    super();
    if (!baseUrl) throw new TypeError('StewardClient needs baseUrl');
    this.baseUrl = baseUrl.replace(/\/+$/, '');
    this.timeoutMs = timeoutMs;
    this._fetch = fetchImpl ?? globalThis.fetch;
    this.headers = { accept: 'application/json', 'user-agent': 'steward-sdk-js/0.1.0' };
    if (apiKey) this.headers['x-api-key'] = apiKey;
    if (token) this.headers.authorization = `Bearer ${token}`;
    if (adminKey) this.headers['x-admin-key'] = adminKey;
    // The credentials stay out of JSON.stringify and console.log of the client.
    Object.defineProperty(this, 'headers', { value: this.headers, enumerable: false, writable: true });
    // So does the webhook secret (it signs POST /webhooks/agent).
    Object.defineProperty(this, '_webhookSecret', { value: noSecret(webhookSecret) ? null : webhookSecret, enumerable: false, writable: true });
  }

  async request(method, path, query, body) {
    let url = this.baseUrl + path;
    if (query) {
      const qs = new URLSearchParams();
      for (const [k, v] of Object.entries(query)) {
        if (v !== undefined && v !== null) qs.append(k, String(v));
      }
      const s = qs.toString();
      if (s) url += `?${s}`;
    }
    const headers = { ...this.headers };
    let payload;
    if (body !== undefined) {
      headers['content-type'] = 'application/json';
      payload = JSON.stringify(body);
    }
    if (WEBHOOK_PATHS.has(path)) {
      if (noSecret(this._webhookSecret)) {
        throw new StewardConfigError(`${method} ${path} must be signed: create the client with webhookSecret (the server's WEBHOOK_SECRET)`);
      }
      // Serialised once: the signature covers exactly the bytes sent.
      payload = utf8.encode(payload ?? '');
      headers['x-webhook-signature'] = await signWebhook(this._webhookSecret, payload);
    }
    let res;
    let text;
    try {
      res = await this._fetch(url, { method, headers, body: payload, signal: AbortSignal.timeout(this.timeoutMs) });
      text = await res.text();
    } catch (e) {
      throw new StewardConnectionError(method, path, e);
    }
    const ctype = res.headers.get('content-type') ?? '';
    if (res.status >= 400) {
      let problem = null;
      try { problem = JSON.parse(text); } catch { problem = { detail: text }; }
      throw new StewardAPIError(res.status, problem, method, path);
    }
    if (res.status === 204 || text === '') return null;
    return isJson(ctype) ? JSON.parse(text) : text;
  }
}

/** Argument names checked by the prompt guard when they hold a string. */
export const PROMPT_ARGUMENTS = new Set([
  'prompt', 'query', 'question', 'message', 'input', 'text', 'instruction', 'instructions',
  'content', 'request', 'task', 'user_input',
]);

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Waits `ms`, or less when `signal` aborts (then throws its reason). */
const sleep = (ms, signal) => new Promise((resolve, reject) => {
  if (signal?.aborted) { reject(signal.reason ?? new Error('aborted')); return; }
  const onAbort = () => { clearTimeout(t); reject(signal.reason ?? new Error('aborted')); };
  const t = setTimeout(() => { signal?.removeEventListener?.('abort', onAbort); resolve(); }, ms);
  signal?.addEventListener?.('abort', onAbort, { once: true });
});

function jsonable(v) {
  try {
    return JSON.parse(JSON.stringify(v ?? null, (_k, x) => (typeof x === 'bigint' ? x.toString() : x)));
  } catch {
    return String(v);
  }
}

export class Steward {
  constructor({
    baseUrl, apiKey, agentId, agentName, register = false, agentType = 'custom', capabilities = [],
    guard = true, approvalTimeoutMs = 300000, pollInitialMs = 200, pollMaxMs = 5000, pollFactor = 2,
    heartbeatIntervalMs = 30000, audit = true, auditDenied = true, source = 'agent_framework',
    onApprovalRequest, fetch: fetchImpl, client, timeoutMs, logger = console,
  }) {
    if (!agentId && !agentName) throw new TypeError('Steward needs agentId or agentName');
    this.client = client ?? new StewardClient({ baseUrl, apiKey, fetch: fetchImpl, timeoutMs });
    this.logger = logger;
    this._beatFailing = false;
    this._agentId = agentId ?? null;
    this.agentName = agentName ?? null;
    this.register = register;
    this.agentType = agentType;
    this.capabilities = capabilities;
    this.guard = guard;
    this.approvalTimeoutMs = approvalTimeoutMs;
    this.pollInitialMs = pollInitialMs;
    this.pollMaxMs = pollMaxMs;
    this.pollFactor = pollFactor;
    this.heartbeatIntervalMs = heartbeatIntervalMs;
    this.audit = audit;
    this.auditDenied = auditDenied;
    this.source = source;
    this.onApprovalRequest = onApprovalRequest;
    this._resolved = agentId != null ? Promise.resolve(agentId) : null;
    this._timer = null;
    this._started = null;
    this.heartbeatsSent = 0;
  }

  /** The agent's id (resolving or registering it by name on first use); its name when unregistered. */
  async agentId() {
    if (!this._resolved) this._resolved = this._resolveAgent();
    const id = await this._resolved;
    this._agentId = id;
    return id ?? this.agentName;
  }

  async _resolveAgent() {
    if (this.register) {
      try {
        const a = await this.client.agentsRegister({ name: this.agentName, type: this.agentType, capabilities: this.capabilities });
        return a.id;
      } catch (e) {
        if (!(e instanceof StewardAPIError) || e.status !== 409) throw e;
      }
    }
    return this.findAgent(this.agentName);
  }

  async findAgent(name) {
    let skip = 0;
    for (;;) {
      const page = await this.client.agentsList({ skip, limit: 200 });
      const hit = page.items.find((a) => a.name.toLowerCase() === name.toLowerCase());
      if (hit) return hit.id;
      skip += page.items.length;
      if (page.items.length === 0 || skip >= page.total) return null;
    }
  }

  /** Resolve the agent and start heartbeats (done by the first governed call too). */
  async start() {
    if (!this._started) {
      this._started = (async () => {
        const id = await this.agentId();
        if (this.heartbeatIntervalMs && UUID_RE.test(id ?? '')) {
          // A failure is logged once per streak of failures; the next interval tries again.
          const beat = () => this.client.agentsHeartbeat(id, { status: 'active' })
            .then(() => { this.heartbeatsSent += 1; this._beatFailing = false; })
            .catch((e) => {
              if (!this._beatFailing) this.logger?.warn?.(`steward: heartbeat failed (retrying every ${this.heartbeatIntervalMs} ms): ${e?.message ?? e}`);
              this._beatFailing = true;
            });
          this._timer = setInterval(beat, this.heartbeatIntervalMs);
          this._timer.unref?.();
          await beat();
        }
      })();
      this._started.catch(() => { this._started = null; });
    }
    await this._started;
    return this;
  }

  stop() {
    if (this._timer) clearInterval(this._timer);
    this._timer = null;
    this._started = null;
  }

  /** Stops the heartbeats (the same as `stop()`, named as in the Python SDK). */
  close() {
    this.stop();
  }

  /**
   * Govern `fn` (sync or async; called with one object argument, as tools are).
   * Options: name, action, resource (string with {arg} placeholders, or a function of the
   * arguments), context (object or function), guardArgs, reasoning, approvalTimeoutMs.
   */
  govern(fn, options = {}) {
    const spec = { name: options.name ?? (fn.name || 'tool'), ...options };
    const governed = async (args = {}, ...rest) => this.call(spec, args, () => fn(args, ...rest));
    Object.defineProperty(governed, 'name', { value: spec.name });
    governed.stewardSpec = spec;
    return governed;
  }

  async call(spec, args, run) {
    const permit = await this.authorize(spec, args);
    // Aborted while it was authorized (an approval that came too late): the tool does not run.
    if (spec.signal?.aborted) throw spec.signal.reason ?? new Error('aborted');
    let result;
    try {
      result = await run();
    } catch (e) {
      try {
        await this.record(permit, { error: e });
      } catch (auditError) {
        throw new AuditFailed(auditError, { error: e, action: permit.action, resource: permit.resource });
      }
      throw e;
    }
    // The tool ran: a failed audit write must not look like a refusal (a caller retrying a
    // refusal would run the side effect again), so it carries the result.
    try {
      await this.record(permit, { output: result });
    } catch (auditError) {
      throw new AuditFailed(auditError, { result, action: permit.action, resource: permit.resource });
    }
    return result;
  }

  _resolve(spec, args) {
    const a = args && typeof args === 'object' ? args : { input: args };
    const action = spec.action ?? spec.name;
    let resource;
    if (typeof spec.resource === 'function') resource = String(spec.resource(a));
    else if (typeof spec.resource === 'string') resource = spec.resource.replace(/\{(\w+)\}/g, (m, k) => (k in a ? String(a[k]) : m));
    else resource = `tool/${spec.name}`;
    const context = typeof spec.context === 'function' ? { ...spec.context(a) } : { ...(spec.context ?? {}) };
    let reasoning = typeof spec.reasoning === 'function' ? spec.reasoning(a) : spec.reasoning;
    if (reasoning == null) reasoning = [];
    if (typeof reasoning === 'string') reasoning = [reasoning];
    return { action, resource, context, arguments: a, reasoning: [...reasoning] };
  }

  /** Guard, policy check and (when required) approval; throws when refused. Returns a permit. */
  async authorize(spec, args) {
    if (this._resolved && !UUID_RE.test((await this._resolved) ?? '') && this.agentName) {
      // reported to discovery earlier: the candidate may have been confirmed since
      const found = await this.findAgent(this.agentName);
      if (found) { this._resolved = Promise.resolve(found); this._started = null; }
    }
    await this.start();
    const agentId = await this.agentId();
    const p = { tool: spec.name, ...this._resolve(spec, args), decision: null, approval: null, guard: [] };
    const { action, resource, context } = p;
    if (this.guard) {
      const names = spec.guardArgs ? new Set(spec.guardArgs) : PROMPT_ARGUMENTS;
      for (const [k, v] of Object.entries(p.arguments)) {
        if (!names.has(k) || typeof v !== 'string' || !v.trim()) continue;
        const g = await this.client.guardValidate({ agent_id: agentId, prompt: v, context: { tool: spec.name, argument: k } });
        p.guard.push(g);
        if (g.blocked) {
          throw new PromptBlocked(`prompt guard blocked argument '${k}': ${(g.reasons ?? []).join('; ') || g.threat_level}`,
            { argument: k, guard: g, action, resource, severity: 'high', riskScore: g.score, auditId: g.audit_id });
        }
      }
    }
    const check = (ctx) => this.client.policiesCheck({ agent_id: agentId, action, resource, context: ctx });
    let d = await check(context);
    const meta = () => ({ action, resource, severity: d.severity, riskScore: d.risk_score, decision: d });
    if (!d.allowed && d.required_approval) {
      let req = await this.client.hitlRequest({ agent_id: agentId, action, resource, context });
      if (this.onApprovalRequest) await this.onApprovalRequest(req);
      const timeout = spec.approvalTimeoutMs ?? this.approvalTimeoutMs;
      const deadline = timeout == null ? Infinity : Date.now() + timeout;
      let delay = this.pollInitialMs;
      while (req.status === 'pending') {
        if (Date.now() >= deadline) {
          throw new ApprovalTimeout(`no decision on approval ${req.approval_id} within ${timeout} ms (${d.reason})`,
            { approvalId: req.approval_id, ...meta() });
        }
        await sleep(Math.max(0, Math.min(delay, deadline - Date.now())), spec.signal);
        delay = Math.min(delay * this.pollFactor, this.pollMaxMs);
        // A transient failure (unreachable, 5xx) while a human decides is polled again, not
        // taken for a refusal: the request stays pending and may still be approved.
        try {
          req = await this.client.hitlStatus(req.approval_id);
        } catch (e) {
          const transient = e instanceof StewardConnectionError || (e instanceof StewardAPIError && e.status >= 500);
          if (!transient) throw e;
        }
      }
      if (req.status !== 'approved') {
        throw new ApprovalRejected(`approval ${req.approval_id} ${req.status} by ${req.approver}: ${req.rejection_reason ?? 'no reason given'}`,
          { approval: req, ...meta() });
      }
      p.approval = req;
      p.reasoning.push(`approved by ${req.approver} (approval ${req.approval_id})`);
      d = await check({ ...context, approval_id: req.approval_id });
    }
    p.decision = d;
    if (!d.allowed) {
      if (!d.required_approval && (d.reason ?? '').includes('not registered')) {
        const name = this.agentName ?? agentId;
        const candidate = await this.client.discoveryIngest({
          name: name.slice(0, 128), source: this.source, fingerprint: name.trim().toLowerCase().slice(0, 128),
          type: this.agentType, capabilities: this.capabilities,
          evidence: { sdk: 'typescript', tool: spec.name, action, resource },
        });
        throw new AgentNotRegistered(`${d.reason}; reported to discovery as candidate ${candidate.id}`, { candidate, ...meta() });
      }
      const err = new ActionDenied(d.reason ?? 'denied', meta());
      if (this.audit && this.auditDenied && UUID_RE.test(agentId)) {
        try {
          const entry = await this.record(p, { denied: err });
          err.auditId = entry?.id ?? null;
        } catch (e) {
          // e.g. 403 agent_suspended or the server unreachable: the refusal still stands.
          if (!(e instanceof StewardError)) throw e;
        }
      }
      throw err;
    }
    p.reasoning.push(`policy: ${d.reason}`);
    return p;
  }

  /** Write the audit entry of a governed call. */
  async record(permit, { output, error, denied } = {}) {
    if (!this.audit) return null;
    const input = { tool: permit.tool, arguments: jsonable(permit.arguments), context: jsonable(permit.context) };
    if (permit.approval) input.approval = { approval_id: permit.approval.approval_id, approver: permit.approval.approver };
    let out;
    if (denied) out = { denied: denied.reason, severity: denied.severity };
    else if (error) out = { error: `${error?.name ?? 'Error'}: ${error?.message ?? String(error)}` };
    else out = { result: jsonable(output) };
    const reasoning = [...permit.reasoning];
    if (denied) reasoning.push(`policy: ${denied.reason}`);
    const risk = Math.min(1, Math.max(0, Number(permit.decision?.risk_score ?? 0)));
    return this.client.auditLog({
      agent_id: await this.agentId(), action: permit.action, resource: permit.resource.slice(0, 512),
      input, output: out, reasoning, risk_score: risk, is_approved: !denied,
    });
  }

  /** One policy check for this agent. */
  async check(action, resource, context = {}) {
    return this.client.policiesCheck({ agent_id: await this.agentId(), action, resource, context });
  }

  /** GET /integrations/{integration}/status (default: this Steward's source). */
  integrationStatus(integration) {
    return this.client.discoveryIntegration(integration ?? this.source);
  }
}
