// Start-up: sign-in (local or SSO), navigation by the URL fragment (#/agents), live updates.
import { api, can, get, post, session, ApiError } from './api.js';
import { connect, disconnect } from './live.js';
import { clear, h, showError } from './ui.js';
import { screens } from './views.js';

const $ = (id) => document.getElementById(id);

// Screens in the navigation, each shown only to a role that can use it.
const NAV = [
  ['overview', 'Overview', 'stats'],
  ['agents', 'Agents', 'agents.read'],
  ['policies', 'Policies', 'policies.read'],
  ['audit', 'Audit', 'audit.read'],
  ['anomalies', 'Anomalies', 'anomalies'],
  ['hitl', 'Approvals', 'hitl'],
  ['guard', 'Guard', 'guard.stats'],
  ['discovery', 'Discovery', 'discovery'],
];

let current = null; // the screen's cleanup function

/** sessionStorage key of the single sign-on flow this tab started. */
const SSO_FLOW = 'steward.sso_flow';

/** The reasons of contract 7.3's failed callbacks, in words; any other value is not shown. */
const SSO_REASONS = {
  invalid_state: 'invalid state (the sign-in took too long or was already used)',
  provider_error: 'the identity provider refused or failed',
  not_provisioned: 'no account exists for you here',
  email_conflict: 'a local account already uses your e-mail',
  user_blocked: 'your account is blocked',
};

function randomId() {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

async function showLogin(message) {
  disconnect();
  $('shell').hidden = true;
  $('login').hidden = false;
  const err = $('login-error');
  if (message) { err.textContent = message; err.hidden = false; } else { err.hidden = true; }
  try {
    const { providers } = await get('/auth/sso/providers');
    const box = clear($('sso-buttons'));
    for (const p of providers || []) {
      if (p.enabled === false) continue;
      // The flow id comes back in the redirect beside the code; only a flow started in this
      // tab is finished (see boot), so a code from someone else's link is never exchanged.
      const flow = randomId();
      const back = `/dashboard?sso_flow=${flow}`;
      const href = `/api/v1/auth/sso/login?provider=${encodeURIComponent(p.id)}&redirect=${encodeURIComponent(back)}`;
      const on = { click: () => sessionStorage.setItem(SSO_FLOW, flow) };
      box.append(h('a', { href, on, 'data-testid': `sso-${p.id}` }, h('button', { type: 'button' }, p.name)));
    }
    $('sso').hidden = !box.children.length;
  } catch { $('sso').hidden = true; }
}

async function startSession(login) {
  session.set({ token: login.access_token, user: login.user });
  // The role is read again from the server: it may have changed since the token was issued.
  try {
    const me = await get('/auth/me');
    session.set({ token: login.access_token, user: me });
  } catch { /* keep the login's user */ }
}

async function onLogin(ev) {
  ev.preventDefault();
  const btn = $('login-submit');
  btn.disabled = true;
  try {
    const login = await api('POST', '/auth/login', { email: $('login-email').value, password: $('login-password').value });
    await startSession(login);
    $('login-password').value = '';
    if (!location.hash || location.hash === '#/login') location.hash = '#/overview';
    await showShell();
  } catch (e) {
    showError($('login-error'), e instanceof ApiError && e.status === 401 ? new Error('Wrong email or password.') : e);
  } finally {
    btn.disabled = false;
  }
}

async function showShell() {
  const s = session.get();
  $('login').hidden = true;
  $('shell').hidden = false;
  $('whoami').textContent = `${s.user.email} · ${s.user.role}`;
  $('whoami').dataset.role = s.user.role;
  const nav = clear($('nav'));
  for (const [id, title, perm] of NAV) {
    if (can(perm)) nav.append(h('a', { href: `#/${id}`, 'data-nav': id }, title));
  }
  connect();
  await route();
}

async function route() {
  if (!session.get()) return;
  const [name, ...args] = (location.hash.replace(/^#\/?/, '') || 'overview').split('/');
  const entry = NAV.find(([id]) => id === name);
  const view = $('view');
  if (current) { try { current(); } catch { /* ignore */ } current = null; }
  clear(view);
  for (const a of $('nav').querySelectorAll('a')) a.classList.toggle('active', a.dataset.nav === name);
  if (!entry || !screens[name]) {
    view.append(h('p.muted', 'No such screen.'));
    return;
  }
  if (!can(entry[2])) {
    view.append(h('p.muted', { 'data-testid': 'not-allowed' }, 'Your role cannot use this screen.'));
    return;
  }
  view.dataset.screen = name;
  try {
    current = (await screens[name](view, args.map(decodeURIComponent))) || null;
  } catch (e) {
    const box = h('p.error');
    showError(box, e);
    view.append(box);
  }
}

async function boot() {
  $('login-form').addEventListener('submit', onLogin);
  $('logout').addEventListener('click', async () => {
    try { await post('/auth/logout'); } catch { /* the session ends here anyway */ }
    session.clear();
    showLogin();
  });
  window.addEventListener('hashchange', route);
  window.addEventListener('steward:signed-out', () => showLogin('Your session has ended; sign in again.'));

  // SSO: the callback sends the browser back with ?sso_code=… (or to /login?sso_error=…).
  const params = new URLSearchParams(location.search);
  const code = params.get('sso_code');
  const ssoError = params.get('sso_error');
  if (code || ssoError || location.pathname !== '/dashboard') {
    history.replaceState(null, '', `/dashboard${location.hash || '#/overview'}`);
  }
  const started = sessionStorage.getItem(SSO_FLOW);
  if (code || ssoError) sessionStorage.removeItem(SSO_FLOW);
  if (code) {
    // A code this tab did not ask for (a link or page of someone else's, which would sign
    // this browser into their account) is never exchanged.
    if (!started || params.get('sso_flow') !== started) {
      return showLogin('A single sign-on answer arrived that this browser did not ask for; it was ignored. Sign in again.');
    }
    try {
      await startSession(await api('POST', '/auth/sso/exchange', { code }));
    } catch (e) {
      return showLogin(`Single sign-on failed: ${e.message}`);
    }
  }
  if (ssoError) return showLogin(`Single sign-on failed: ${(Object.hasOwn(SSO_REASONS, ssoError) ? SSO_REASONS[ssoError] : 'unknown reason')}.`);
  if (session.get()) return showShell();
  return showLogin();
}

boot();
