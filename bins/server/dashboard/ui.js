// Small DOM helpers: no innerHTML with data, no inline styles (the CSP forbids them).

// h('tag.class#id', {attrs, on: {click}}, ...children)
export function h(spec, attrs, ...children) {
  const [, tag = 'div', rest = ''] = /^([a-z0-9]+)?(.*)$/i.exec(spec);
  const el = document.createElement(tag);
  for (const part of rest.match(/[.#][^.#]+/g) || []) {
    if (part[0] === '.') el.classList.add(part.slice(1));
    else el.id = part.slice(1);
  }
  if (attrs && (typeof attrs !== 'object' || attrs instanceof Node || Array.isArray(attrs))) {
    children.unshift(attrs);
    attrs = null;
  }
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'on') for (const [ev, fn] of Object.entries(v)) el.addEventListener(ev, fn);
    else if (k === 'text') el.textContent = v;
    else if (k === 'value') el.value = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

const SVG = 'http://www.w3.org/2000/svg';
export function svg(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  append(el, children);
  return el;
}

export function clear(el) { while (el.firstChild) el.removeChild(el.firstChild); return el; }

export function badge(text) {
  return h('span.badge', { class: `badge ${String(text).replace(/[^a-z_]/gi, '')}` }, String(text));
}

export function fmtTime(ts) {
  if (!ts) return '—';
  const d = new Date(ts);
  return Number.isNaN(d.getTime()) ? String(ts) : d.toISOString().replace('T', ' ').slice(0, 19);
}

export function fmtNum(n, digits = 2) {
  if (n === null || n === undefined) return '—';
  return typeof n === 'number' && !Number.isInteger(n) ? n.toFixed(digits) : String(n);
}

export function short(id) { return id ? String(id).slice(0, 8) : '—'; }

// A table of rows: columns [{title, cell(row) -> node|text}], optional onClick(row).
export function table(columns, rows, { onClick, empty = 'Nothing here.', testid } = {}) {
  if (!rows.length) return h('p.muted', { 'data-testid': testid ? `${testid}-empty` : null }, empty);
  return h('table', { 'data-testid': testid },
    h('thead', h('tr', columns.map((c) => h('th', c.title)))),
    h('tbody', rows.map((r) => h(onClick ? 'tr.clickable' : 'tr',
      { 'data-id': r.id || r.approval_id || null, on: onClick ? { click: () => onClick(r) } : null },
      columns.map((c) => h('td', c.cell(r)))))));
}

// Previous/next for an envelope {items, total, skip, limit}.
export function pager(env, go) {
  const from = env.total ? env.skip + 1 : 0;
  const to = env.skip + env.items.length;
  return h('div.row.pager',
    h('button', { type: 'button', disabled: env.skip <= 0, on: { click: () => go(Math.max(0, env.skip - env.limit)) } }, '‹ Previous'),
    h('span.muted', `${from}–${to} of ${env.total}`),
    h('button', { type: 'button', disabled: to >= env.total, on: { click: () => go(env.skip + env.limit) } }, 'Next ›'));
}

export function toast(title, text, severity = 'info', ms = 8000) {
  const t = h('div.toast', { class: `toast ${severity}`, role: 'status', 'data-testid': 'toast' },
    h('b', title), text ? h('span', text) : null);
  document.getElementById('toasts').append(t);
  setTimeout(() => t.remove(), ms);
}

// Shows an error (ApiError or other) inside `el`.
export function showError(el, e) {
  clear(el);
  el.hidden = false;
  el.append(h('span', { 'data-testid': 'error' }, e.message || String(e)));
  if (e.fields) for (const f of e.fields()) el.append(h('div', f));
}

export function field(labelText, input) { return h('label', labelText, input); }
