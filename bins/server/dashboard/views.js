// The screens. Each renders into `view` and may return a cleanup function.
import { api, can, del, get, patch, post, put, qs, session } from './api.js';
import { badge, clear, field, fmtNum, fmtTime, h, pager, short, showError, svg, table, toast } from './ui.js';

// Subscribes to live events for the life of a screen.
function onEvent(fn) {
  const handler = (e) => fn(e.detail);
  window.addEventListener('steward:event', handler);
  return () => window.removeEventListener('steward:event', handler);
}

function errorBox() { return h('div.error', { hidden: true, role: 'alert' }); }

function json(v) { return h('pre', JSON.stringify(v, null, 2)); }

// A name as one line of plain text for the browser's own dialogs: control and bidirectional
// formatting characters could otherwise rewrite the dialog's wording.
function oneLine(text) {
  return String(text).replace(/[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]/g, ' ').slice(0, 200);
}

function parseJson(text, name) {
  if (!text.trim()) return {};
  try { return JSON.parse(text); } catch (e) { throw new Error(`${name} is not valid JSON: ${e.message}`); }
}

// ---------------------------------------------------------------- overview

function activityChart(days) {
  const W = 560, H = 180, pad = 24, bw = (W - pad * 2) / days.length;
  const max = Math.max(1, ...days.map((d) => d.count));
  return svg('svg', { class: 'chart', viewBox: `0 0 ${W} ${H}`, width: '100%', role: 'img', 'aria-label': '7-day activity', 'data-testid': 'activity-chart' },
    days.map((d, i) => {
      const bh = Math.round((H - pad * 2) * d.count / max);
      const x = pad + i * bw + 6;
      return [
        svg('rect', { class: 'bar', x, y: H - pad - bh, width: bw - 12, height: bh, 'data-date': d.date, 'data-count': d.count },
          svg('title', {}, `${d.date}: ${d.count}`)),
        svg('text', { x: x + (bw - 12) / 2, y: H - pad - bh - 4, 'text-anchor': 'middle' }, String(d.count)),
        svg('text', { x: x + (bw - 12) / 2, y: H - 6, 'text-anchor': 'middle' }, d.date.slice(5)),
      ];
    }));
}

function recentList(items) {
  return h('ul.events', { 'data-testid': 'recent-events' }, items.map((e) => h('li', { 'data-id': e.id },
    h('span.mono', fmtTime(e.timestamp)), ' ', h('b', e.action), ' ', e.resource,
    e.agent_name ? h('span.muted', ` · ${e.agent_name}`) : null)));
}

async function overview(view) {
  const tiles = h('div.tiles');
  const chart = h('div.card', h('h2', 'Activity, last 7 days'));
  const status = h('div.card', h('h2', 'Service status'));
  const recent = h('div.card', h('h2', 'Recent events'));
  view.append(h('h1', 'Overview'), tiles, h('div.grid2', chart, status), recent);

  async function loadStats() {
    const s = await get('/stats');
    clear(tiles);
    const items = [
      ['total_agents', 'Agents'], ['active_policies', 'Active policies'], ['total_anomalies', 'Anomalies'],
      ['pending_hitl', 'Pending approvals'], ['guard_blocked', 'Prompts blocked'], ['guard_avg_ms', 'Guard avg ms'],
    ];
    for (const [k, label] of items) {
      tiles.append(h('div.tile', h('div.n', { 'data-stat': k }, fmtNum(s[k])), h('div.l', label)));
    }
    while (chart.children.length > 1) chart.lastChild.remove();
    chart.append(activityChart(s.activities));
    if (s.guard_top_patterns && s.guard_top_patterns.length) {
      chart.append(h('h3', 'Top guard patterns'),
        h('p', s.guard_top_patterns.map((p) => h('span.badge', `${p.pattern} × ${p.count}`)).flatMap((b) => [b, ' '])));
    }
  }
  async function loadStatus() {
    const st = await get('/status');
    while (status.children.length > 1) status.lastChild.remove();
    status.append(h('table', { 'data-testid': 'status' }, h('tbody',
      h('tr', h('th', 'Platform'), h('td', badge(st.status))),
      Object.entries(st.services).map(([k, v]) => h('tr', h('th', k.replace('_', ' ')), h('td', { 'data-service': k }, badge(v)))),
      h('tr', h('th', 'Tenant'), h('td', `${st.tenant.name} `, h('span.mono.muted', st.tenant.api_key_masked || ''))),
      h('tr', h('th', 'Version'), h('td', st.version)),
      h('tr', h('th', 'Uptime'), h('td', st.uptime)))));
  }
  async function loadRecent() {
    const env = await get('/audit?limit=10');
    while (recent.children.length > 1) recent.lastChild.remove();
    recent.append(env.items.length ? recentList(env.items) : h('p.muted', 'No audit entries yet.'));
  }
  await Promise.all([loadStats(), loadStatus(), loadRecent()]);
  let pending = null;
  return onEvent(({ event }) => {
    if (!['audit.created', 'hitl.requested', 'hitl.resolved', 'anomaly.detected'].includes(event)) return;
    clearTimeout(pending); // several events in a burst: one refresh
    pending = setTimeout(() => { loadRecent().catch(() => {}); loadStats().catch(() => {}); }, 250);
  });
}

// ---------------------------------------------------------------- agents

async function agentDetails(view, id) {
  const a = await get(`/agents/${encodeURIComponent(id)}/details`);
  const err = errorBox();
  const actions = h('div.row');
  if (can('agents.admin')) {
    const act = async (fn) => { try { await fn(); await rerender(); } catch (e) { showError(err, e); } };
    if (a.status === 'suspended') actions.append(h('button', { type: 'button', 'data-action': 'resume', on: { click: () => act(() => post(`/agents/${id}/resume`)) } }, 'Resume'));
    else actions.append(h('button', { type: 'button', 'data-action': 'suspend', on: { click: () => act(() => post(`/agents/${id}/suspend`)) } }, 'Suspend'));
    actions.append(h('button.danger', { type: 'button', 'data-action': 'delete', on: { click: async () => {
      if (!confirm(`Delete agent ${oneLine(a.name)}?`)) return;
      try { await del(`/agents/${id}`); location.hash = '#/agents'; } catch (e) { showError(err, e); }
    } } }, 'Delete'));
  }
  async function rerender() { clear(view); await agentDetails(view, id); }
  view.append(
    h('p', h('a', { href: '#/agents' }, '‹ Agents')),
    h('h1', a.name, ' ', badge(a.status)),
    actions, err,
    h('div.grid2',
      h('div.card', h('h2', 'Agent'), h('table', h('tbody',
        [['id', h('span.mono', a.id)], ['type', a.type], ['predicted type', a.predicted_type || '—'], ['version', a.version || '—'],
          ['capabilities', (a.capabilities || []).join(', ') || '—'], ['registered', fmtTime(a.created_at)], ['last heartbeat', fmtTime(a.last_heartbeat)]]
          .map(([k, v]) => h('tr', h('th', k), h('td', v))))),
      h('h3', 'Permissions'), json(a.permissions)),
      h('div.card', h('h2', 'Risk'), h('table', h('tbody',
        h('tr', h('th', 'risk score (20 latest)'), h('td', { 'data-testid': 'risk-score' }, fmtNum(a.risk_score))),
        h('tr', h('th', 'average risk (all)'), h('td', fmtNum(a.average_risk_score))),
        h('tr', h('th', 'anomaly reports'), h('td', String(a.anomaly_count))),
        h('tr', h('th', 'embedding confidence'), h('td', fmtNum(a.embedding && a.embedding.confidence))),
        h('tr', h('th', 'discovered from'), h('td', a.discovery ? short(a.discovery.id) : '—')))))),
    h('div.card', h('h2', 'Recent audit'), auditTable(a.recent_audit || [])));
}

async function agents(view, [id]) {
  if (id) return agentDetails(view, id);
  const q = h('input', { type: 'search', placeholder: 'Search agents…', 'data-testid': 'agent-search' });
  const statusSel = h('select', ['', 'active', 'inactive', 'error', 'suspended'].map((s) => h('option', { value: s }, s || 'any status')));
  const out = h('div');
  const err = errorBox();
  let skip = 0;
  const cols = [
    { title: 'Name', cell: (a) => h('a', { href: `#/agents/${a.id}` }, a.name) },
    { title: 'Type', cell: (a) => a.type },
    { title: 'Status', cell: (a) => badge(a.status) },
    { title: 'Risk', cell: (a) => fmtNum(a.risk_score) },
    { title: 'Version', cell: (a) => a.version || '—' },
    { title: 'Last heartbeat', cell: (a) => fmtTime(a.last_heartbeat) },
  ];
  async function load() {
    err.hidden = true;
    try {
      const text = q.value.trim();
      const env = text
        ? await get(`/agents/search${qs({ q: text, limit: 50 })}`)
        : await get(`/agents${qs({ skip, limit: 25, status: statusSel.value })}`);
      const c = text ? [...cols, { title: 'Similarity', cell: (a) => fmtNum(a.similarity) }] : cols;
      clear(out).append(table(c, env.items, { testid: 'agents', onClick: (a) => { location.hash = `#/agents/${a.id}`; } }),
        text ? null : pager(env, (s) => { skip = s; load(); }));
    } catch (e) { showError(err, e); }
  }
  let t = null;
  q.addEventListener('input', () => { clearTimeout(t); t = setTimeout(() => { skip = 0; load(); }, 250); });
  statusSel.addEventListener('change', () => { skip = 0; load(); });
  view.append(h('h1', 'Agents'), h('div.row', q, statusSel), err, out);
  await load();
}

// ---------------------------------------------------------------- policies

function checkForm() {
  const agent = h('input', { placeholder: 'agent id', 'data-field': 'agent_id' });
  const action = h('input', { placeholder: 'action, e.g. read_data', 'data-field': 'action' });
  const resource = h('input', { placeholder: 'resource, e.g. crm/contacts', 'data-field': 'resource' });
  const context = h('textarea', { rows: 3, 'data-field': 'context', value: '{}' });
  const err = errorBox();
  const out = h('div', { 'data-testid': 'check-result' });
  const run = async (ev) => {
    ev.preventDefault();
    err.hidden = true;
    try {
      const r = await post('/policies/check', { agent_id: agent.value, action: action.value, resource: resource.value, context: parseJson(context.value, 'context') });
      clear(out).append(h('p', badge(r.allowed ? 'allowed' : 'denied'), ' ', r.reason || '',
        r.required_approval ? h('span', ' · ', badge('pending'), ' approval required') : null),
      h('p.muted', `severity ${r.severity || '—'} · risk ${fmtNum(r.risk_score)} (${r.risk && r.risk.level}) · anomaly ${r.anomaly && r.anomaly.is_anomaly}`));
    } catch (e) { showError(err, e); }
  };
  return h('form.card', { on: { submit: run }, 'data-testid': 'policy-check' }, h('h2', 'Run a policy check'),
    h('div.row', field('Agent', agent), field('Action', action), field('Resource', resource)),
    field('Context (JSON)', context), h('button.primary', { type: 'submit' }, 'Check'), err, out);
}

async function policyView(view, id) {
  const isNew = id === 'new';
  const p = isNew ? { name: '', description: '', rego: 'package steward.policies.example\n\nimport rego.v1\n\ndeny contains msg if {\n\tinput.action == "forbidden"\n\tmsg := "forbidden action"\n}\n', is_active: true, priority: 0 } : await get(`/policies/${encodeURIComponent(id)}`);
  const editable = can('policies.write');
  const name = h('input', { value: p.name, disabled: !editable, 'data-field': 'name' });
  const desc = h('input', { value: p.description, disabled: !editable, 'data-field': 'description' });
  const prio = h('input', { type: 'number', value: p.priority, disabled: !editable, 'data-field': 'priority' });
  const active = h('input', { type: 'checkbox', disabled: !editable, 'data-field': 'is_active' });
  active.checked = p.is_active;
  const rego = h('textarea', { rows: 22, spellcheck: 'false', readonly: !editable, 'data-field': 'rego', value: p.rego });
  const err = h('div.error', { hidden: true, role: 'alert', 'data-testid': 'compile-error' });
  const saved = h('span.ok', { hidden: true }, 'Saved.');
  const buttons = h('div.row');
  if (editable) {
    buttons.append(h('button.primary', { type: 'submit', 'data-action': 'save' }, isNew ? 'Create' : 'Save'));
    if (!isNew) buttons.append(h('button.danger', { type: 'button', 'data-action': 'delete', on: { click: async () => {
      if (!confirm(`Delete policy ${oneLine(p.name)}?`)) return;
      try { await del(`/policies/${id}`); location.hash = '#/policies'; } catch (e) { showError(err, e); }
    } } }, 'Delete'));
    buttons.append(saved);
  }
  const submit = async (ev) => {
    ev.preventDefault();
    err.hidden = true; saved.hidden = true;
    const body = { name: name.value, description: desc.value, rego: rego.value, is_active: active.checked, priority: Number(prio.value) };
    try {
      const r = isNew ? await post('/policies', body) : await put(`/policies/${id}`, body);
      if (isNew) { location.hash = `#/policies/${r.id}`; return; }
      saved.hidden = false;
    } catch (e) { showError(err, e); }
  };
  view.append(h('p', h('a', { href: '#/policies' }, '‹ Policies')),
    h('h1', isNew ? 'New policy' : p.name, ' ', isNew ? null : badge(p.is_active ? 'active' : 'inactive')),
    h('form.card', { on: { submit } },
      h('div.row', field('Name', name), field('Description', desc), field('Priority', prio), h('label', 'Active', active)),
      p.template ? h('p.muted', `From template ${p.template}`) : null,
      field('Rego', rego), err, buttons));
}

async function policies(view, [id]) {
  if (id) return policyView(view, id);
  const env = await get('/policies?limit=200');
  view.append(h('div.row', h('h1', 'Policies'), h('span.spacer'),
    can('policies.write') ? h('a', { href: '#/policies/new' }, h('button.primary', { type: 'button', 'data-action': 'new-policy' }, 'New policy')) : null),
  h('div.card', table([
    { title: 'Name', cell: (p) => h('a', { href: `#/policies/${p.id}` }, p.name) },
    { title: 'Status', cell: (p) => badge(p.is_active ? 'active' : 'inactive') },
    { title: 'Priority', cell: (p) => String(p.priority) },
    { title: 'Template', cell: (p) => p.template || '—' },
    { title: 'Updated', cell: (p) => fmtTime(p.updated_at) },
  ], env.items, { testid: 'policies', onClick: (p) => { location.hash = `#/policies/${p.id}`; } })),
  can('policies.check') ? checkForm() : null);
}

// ---------------------------------------------------------------- audit

function auditTable(items) {
  return table([
    { title: '#', cell: (e) => String(e.seq) },
    { title: 'Time', cell: (e) => h('span.mono', fmtTime(e.timestamp)) },
    { title: 'Action', cell: (e) => e.action },
    { title: 'Resource', cell: (e) => e.resource },
    { title: 'Agent', cell: (e) => e.agent_name || short(e.agent_id) },
    { title: 'Risk', cell: (e) => fmtNum(e.risk_score) },
    { title: 'Approved', cell: (e) => (e.is_approved ? 'yes' : 'no') },
  ], items, { testid: 'audit', empty: 'No audit entries.' });
}

async function download(path, fallbackName) {
  const res = await api('GET', path, undefined, { raw: true });
  const cd = res.headers.get('Content-Disposition') || '';
  const m = /filename="([^"]+)"/.exec(cd);
  const url = URL.createObjectURL(await res.blob());
  const a = h('a', { href: url, download: m ? m[1] : fallbackName });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

async function audit(view) {
  const f = { agent_id: h('input', { placeholder: 'agent id' }), action: h('input', { placeholder: 'action' }), resource: h('input', { placeholder: 'resource' }) };
  const out = h('div');
  const err = errorBox();
  const verifyOut = h('span', { 'data-testid': 'verify-result' });
  let skip = 0;
  const filters = () => ({ agent_id: f.agent_id.value.trim(), action: f.action.value.trim(), resource: f.resource.value.trim() });
  async function load() {
    err.hidden = true;
    try {
      const env = await get(`/audit${qs({ ...filters(), skip, limit: 50 })}`);
      clear(out).append(auditTable(env.items), pager(env, (s) => { skip = s; load(); }));
    } catch (e) { showError(err, e); }
  }
  const verify = async () => {
    verifyOut.textContent = 'verifying…';
    try {
      const v = await get('/audit/verify');
      clear(verifyOut).append(badge(v.valid ? 'valid' : 'broken'), ` ${v.checked} entries checked`, v.first_bad_id ? ` · first bad ${v.first_bad_id}` : '');
    } catch (e) { showError(err, e); verifyOut.textContent = ''; }
  };
  const exportButtons = can('audit.export')
    ? ['jsonl', 'json', 'csv'].map((fmt) => h('button', { type: 'button', 'data-action': `export-${fmt}`, on: { click: async () => {
      try { await download(`/audit/export${qs({ ...filters(), format: fmt, limit: 10000 })}`, `audit.${fmt}`); } catch (e) { showError(err, e); }
    } } }, `Export ${fmt}`))
    : [];
  view.append(h('h1', 'Audit log'),
    h('form.row.card', { on: { submit: (ev) => { ev.preventDefault(); skip = 0; load(); } } },
      f.agent_id, f.action, f.resource, h('button.primary', { type: 'submit' }, 'Filter')),
    h('div.row', h('button', { type: 'button', 'data-action': 'verify', on: { click: verify } }, 'Verify chain'), verifyOut, h('span.spacer'), exportButtons),
    err, out);
  await load();
  let t = null;
  return onEvent(({ event }) => {
    if (event === 'audit.created' && skip === 0) { clearTimeout(t); t = setTimeout(load, 300); }
  });
}

// ---------------------------------------------------------------- anomalies

const ANOMALY_STATES = ['open', 'investigating', 'resolved', 'false_positive'];

async function anomalies(view) {
  const statusSel = h('select', ['', ...ANOMALY_STATES].map((s) => h('option', { value: s }, s || 'any status')));
  const out = h('div');
  const err = errorBox();
  const statsBox = h('div.tiles');
  let skip = 0;
  async function loadStats() {
    const s = await get('/anomalies/stats');
    clear(statsBox).append(
      h('div.tile', h('div.n', String(s.total)), h('div.l', 'reports')),
      ...ANOMALY_STATES.map((k) => h('div.tile', h('div.n', String(s.by_status[k] || 0)), h('div.l', k.replace('_', ' ')))),
      h('div.tile', h('div.n', fmtNum(s.average_risk_score)), h('div.l', 'average risk')));
  }
  async function load() {
    err.hidden = true;
    try {
      const env = await get(`/anomalies${qs({ status: statusSel.value, skip, limit: 25 })}`);
      clear(out).append(table([
        { title: 'Time', cell: (r) => h('span.mono', fmtTime(r.timestamp)) },
        { title: 'Agent', cell: (r) => (r.agent_id ? h('a', { href: `#/agents/${r.agent_id}` }, short(r.agent_id)) : '—') },
        { title: 'Risk', cell: (r) => fmtNum(r.risk_score) },
        { title: 'Source', cell: (r) => r.source },
        { title: 'Event', cell: (r) => h('span.mono', `${r.event_data.action || ''} ${r.event_data.resource || ''}`) },
        { title: 'Status', cell: (r) => {
          const sel = h('select', { 'data-action': 'status' }, ANOMALY_STATES.map((s) => h('option', { value: s }, s)));
          sel.value = r.status;
          sel.addEventListener('change', async () => {
            try { await patch(`/anomalies/${r.id}`, { status: sel.value }); toast('Status changed', `${short(r.id)} → ${sel.value}`); await loadStats(); } catch (e) { showError(err, e); sel.value = r.status; }
          });
          return sel;
        } },
        { title: 'Feedback', cell: (r) => h('div.row',
          ...[[1, 'Real anomaly'], [0, 'False positive']].map(([label, text]) => h('button', { type: 'button', 'data-action': `feedback-${label}`, on: { click: async (ev) => {
            try {
              await post('/anomalies/detector/feedback', { event_data: r.event_data, label, source: 'dashboard', report_id: r.id });
              ev.target.closest('div').replaceChildren(h('span.ok', label ? 'marked anomaly' : 'marked false positive'));
            } catch (e) { showError(err, e); }
          } } }, text))) },
      ], env.items, { testid: 'anomalies', empty: 'No anomaly reports.' }), pager(env, (s) => { skip = s; load(); }));
    } catch (e) { showError(err, e); }
  }
  statusSel.addEventListener('change', () => { skip = 0; load(); });
  view.append(h('h1', 'Anomalies'), statsBox, h('div.row', statusSel), err, out);
  await Promise.all([loadStats(), load()]);
  return onEvent(({ event }) => { if (event === 'anomaly.detected') { loadStats().catch(() => {}); load(); } });
}

// ---------------------------------------------------------------- HITL

async function hitl(view) {
  const out = h('div');
  const err = errorBox();
  const me = session.get().user;
  async function decide(r, verb, reason) {
    err.hidden = true;
    try {
      const body = { approver: me.email };
      if (reason) body.reason = reason;
      await post(`/hitl/${verb}/${r.approval_id}`, body);
      toast(verb === 'approve' ? 'Approved' : 'Rejected', `${r.action} on ${r.resource}`);
      await load();
    } catch (e) { showError(err, e); await load(); }
  }
  async function load() {
    const env = await get('/hitl/pending?limit=200');
    clear(out).append(table([
      { title: 'Requested', cell: (r) => h('span.mono', fmtTime(r.requested_at)) },
      { title: 'Agent', cell: (r) => h('a', { href: `#/agents/${r.agent_id}` }, short(r.agent_id)) },
      { title: 'Action', cell: (r) => h('b', r.action) },
      { title: 'Resource', cell: (r) => r.resource },
      { title: 'Context', cell: (r) => h('code', JSON.stringify(r.context)) },
      { title: 'Decision', cell: (r) => {
        const reason = h('input', { placeholder: 'reason', 'data-field': 'reason' });
        return h('div.row', reason,
          h('button.primary', { type: 'button', 'data-action': 'approve', on: { click: () => decide(r, 'approve', reason.value.trim()) } }, 'Approve'),
          h('button.danger', { type: 'button', 'data-action': 'reject', on: { click: () => decide(r, 'reject', reason.value.trim()) } }, 'Reject'));
      } },
    ], env.items, { testid: 'hitl', empty: 'No pending requests.' }), h('p.muted', `${env.total} pending`));
  }
  view.append(h('h1', 'Approvals'), err, out);
  await load();
  return onEvent(({ event }) => { if (event === 'hitl.requested' || event === 'hitl.resolved') load().catch(() => {}); });
}

// ---------------------------------------------------------------- guard

function meter(value) {
  const pct = Math.max(0, Math.min(1, Number(value) || 0)) * 100;
  return h('div.meter', svg('svg', { viewBox: '0 0 100 10', preserveAspectRatio: 'none' },
    svg('rect', { x: 0, y: 0, width: pct, height: 10, fill: pct >= 70 ? '#b3261e' : pct >= 40 ? '#a86400' : '#1e7a3c' })));
}

// The detectors behind a guard result: the overall score, any per-detector number the
// response carries, and each detector's findings grouped from `reasons` (contract 17.2: the
// score is the highest of the weighted ML/rule score, the rule score and the policy engine's).
function detectorOf(reason) {
  if (/^ML classifier/i.test(reason)) return 'ML classifier';
  if (/^policy engine/i.test(reason)) return 'policy engine';
  if (/\(rule [^)]+\)$/.test(reason)) return 'rules';
  return 'other';
}

function scoreRows(r) {
  const rows = [['overall', r.score]];
  for (const key of ['detector_scores', 'detectors', 'scores']) {
    const d = r[key];
    if (d && typeof d === 'object') for (const [k, v] of Object.entries(d)) if (typeof v === 'number') rows.push([k, v]);
  }
  const groups = new Map();
  for (const reason of r.reasons || []) {
    const k = detectorOf(reason);
    if (!groups.has(k)) groups.set(k, []);
    groups.get(k).push(reason);
    const p = /probability ([0-9.]+)/.exec(reason);
    if (k === 'ML classifier' && p && !rows.some(([n]) => n === 'ML probability')) rows.push(['ML probability', Number(p[1])]);
  }
  return h('div', { 'data-testid': 'guard-scores' },
    h('div.bars', rows.map(([k, v]) => [h('span', k), meter(v), h('span.mono', fmtNum(v, 3))])),
    h('h3', 'Detectors'),
    groups.size
      ? table([
        { title: 'Detector', cell: (g) => h('b', g[0]) },
        { title: 'Findings', cell: (g) => h('ul', g[1].map((x) => h('li', x))) },
      ], [...groups.entries()], { testid: 'guard-detectors' })
      : h('p.muted', 'No detector found anything.'));
}

async function guard(view) {
  const statsBox = h('div.tiles');
  async function loadStats() {
    const s = await get('/guard/stats');
    clear(statsBox).append(...['total', 'safe', 'suspicious', 'blocked', 'cache_hits', 'avg_latency_ms'].map((k) =>
      h('div.tile', h('div.n', fmtNum(s[k])), h('div.l', k.replace('_', ' ')))));
  }
  view.append(h('h1', 'Prompt guard'), statsBox);
  if (can('guard.validate')) {
    const prompt = h('textarea', { rows: 5, placeholder: 'Type a prompt to test…', 'data-field': 'prompt' });
    const agent = h('input', { placeholder: 'agent id or name (optional)' });
    const err = errorBox();
    const out = h('div', { 'data-testid': 'guard-result' });
    const run = async (ev) => {
      ev.preventDefault();
      err.hidden = true;
      try {
        const body = { prompt: prompt.value };
        if (agent.value.trim()) body.agent_id = agent.value.trim();
        const r = await post('/guard/validate', body);
        clear(out).append(
          h('p', badge(r.threat_level), ` score ${fmtNum(r.score, 3)} · ${fmtNum(r.processing_time_ms)} ms`, r.cached ? ' · cached' : ''),
          scoreRows(r),
          h('h3', 'Detected patterns'), h('p', (r.detected_patterns || []).length ? r.detected_patterns.map((p) => h('span.badge', p)).flatMap((b) => [b, ' ']) : h('span.muted', 'none')),
          h('details', h('summary', 'Full response'), json(r)));
        await loadStats();
      } catch (e) { showError(err, e); }
    };
    view.append(h('form.card', { on: { submit: run } }, h('h2', 'Try a prompt'), field('Prompt', prompt), field('Agent', agent),
      h('button.primary', { type: 'submit', 'data-action': 'validate' }, 'Validate'), err, out));
  }
  await loadStats();
}

// ---------------------------------------------------------------- discovery

async function discovery(view) {
  const statusSel = h('select', ['pending', 'confirmed', 'dismissed', 'all'].map((s) => h('option', { value: s }, s)));
  const out = h('div');
  const err = errorBox();
  let skip = 0;
  async function act(c, verb) {
    err.hidden = true;
    try {
      await post(`/discovery/candidates/${c.id}/${verb}`, {});
      toast(verb === 'confirm' ? 'Registered' : 'Dismissed', c.name);
      await load();
    } catch (e) { showError(err, e); }
  }
  async function load() {
    const env = await get(`/discovery/candidates${qs({ status: statusSel.value, skip, limit: 25 })}`);
    clear(out).append(table([
      { title: 'Name', cell: (c) => h('b', c.name) },
      { title: 'Source', cell: (c) => c.source },
      { title: 'Suggested type', cell: (c) => c.suggested_type || '—' },
      { title: 'Score', cell: (c) => fmtNum(c.score) },
      { title: 'Events', cell: (c) => String(c.event_count) },
      { title: 'Last seen', cell: (c) => fmtTime(c.last_seen) },
      { title: 'Status', cell: (c) => (c.agent_id ? h('a', { href: `#/agents/${c.agent_id}` }, badge(c.status)) : badge(c.status)) },
      { title: '', cell: (c) => (c.status === 'pending' ? h('div.row',
        h('button.primary', { type: 'button', 'data-action': 'confirm', on: { click: () => act(c, 'confirm') } }, 'Confirm'),
        h('button', { type: 'button', 'data-action': 'dismiss', on: { click: () => act(c, 'dismiss') } }, 'Dismiss')) : '') },
    ], env.items, { testid: 'candidates', empty: 'No candidates.' }), pager(env, (s) => { skip = s; load(); }));
  }
  statusSel.addEventListener('change', () => { skip = 0; load().catch((e) => showError(err, e)); });
  view.append(h('h1', 'Discovery candidates'), h('div.row', statusSel), err, out);
  await load();
}

export const screens = { overview, agents, policies, audit, anomalies, hitl, guard, discovery };
