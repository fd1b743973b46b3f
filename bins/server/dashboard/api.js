// The public API, with the session's JWT as `Authorization: Bearer` (contract 5).
// The token lives in sessionStorage: it ends with the tab and is never sent as a cookie.

const KEY = 'steward.session';

export class ApiError extends Error {
  constructor(status, problem) {
    super((problem && (problem.detail || problem.title)) || `HTTP ${status}`);
    this.status = status;
    this.problem = problem || {};
  }
  // Field errors of a 422 as "field: message" lines.
  fields() {
    return (this.problem.errors || []).map((e) => `${e.field}: ${e.message}`);
  }
}

export const session = {
  get() {
    try { return JSON.parse(sessionStorage.getItem(KEY)) || null; } catch { return null; }
  },
  set(s) { sessionStorage.setItem(KEY, JSON.stringify(s)); },
  clear() { sessionStorage.removeItem(KEY); },
};

// Calls the API: `path` below /api/v1, `body` sent as JSON; resolves to the parsed body (or
// the raw Response when `raw`), rejects with ApiError carrying the problem document.
export async function api(method, path, body, { raw = false } = {}) {
  const s = session.get();
  const headers = { Accept: 'application/json' };
  if (s && s.token) headers.Authorization = `Bearer ${s.token}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(`/api/v1${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: 'omit',
  });
  if (res.status === 401 && s && !path.startsWith('/auth/')) {
    session.clear();
    window.dispatchEvent(new Event('steward:signed-out'));
  }
  if (!res.ok) {
    let problem = null;
    try { problem = await res.json(); } catch { /* not JSON */ }
    // A blocked account is signed out as an expired one is: its token will never work again.
    if (res.status === 403 && s && problem && problem.code === 'user_blocked') {
      session.clear();
      window.dispatchEvent(new Event('steward:signed-out'));
    }
    throw new ApiError(res.status, problem);
  }
  if (raw) return res;
  if (res.status === 204) return null;
  const type = res.headers.get('Content-Type') || '';
  return type.includes('json') ? res.json() : res.text();
}

export const get = (path) => api('GET', path);
export const post = (path, body) => api('POST', path, body === undefined ? {} : body);
export const put = (path, body) => api('PUT', path, body);
export const patch = (path, body) => api('PATCH', path, body);
export const del = (path) => api('DELETE', path);

// Query string of the defined, non-empty values.
export function qs(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  }
  const s = q.toString();
  return s ? `?${s}` : '';
}

// Roles, lowest first (contract 6.1), and what each screen and control needs (contract 6.3).
const RANKS = ['viewer', 'developer', 'security_analyst', 'admin', 'super_admin'];
const NEEDS = {
  'stats': 'viewer',
  'audit.read': 'viewer',
  'audit.export': 'security_analyst',
  'guard.stats': 'viewer',
  'guard.validate': 'developer',
  'agents.read': 'developer',
  'agents.admin': 'admin',
  'policies.read': 'developer',
  'policies.check': 'developer',
  'policies.write': 'admin',
  'discovery': 'developer',
  'anomalies': 'security_analyst',
  'hitl': 'security_analyst',
};

export function can(permission) {
  const s = session.get();
  const role = s && s.user && s.user.role;
  const need = NEEDS[permission];
  if (!role || !need) return false;
  return RANKS.indexOf(role) >= RANKS.indexOf(need);
}
