// Live updates over WS /api/v1/ws?token=JWT (contract 20): a toast for hitl.requested and
// for warning/error events, and a 'steward:event' DOM event for the screens that refresh.
import { session } from './api.js';
import { toast } from './ui.js';

let socket = null;
let retry = null;
let backoff = 1000;

function describe(event, d) {
  switch (event) {
    case 'hitl.requested': return ['Approval requested', `${d.action} on ${d.resource}`];
    case 'policy.violated': return ['Policy violation', `${d.action} on ${d.resource}: ${d.reason}`];
    case 'anomaly.detected': return ['Anomaly detected', `risk ${Number(d.risk_score).toFixed(2)} (${d.source})`];
    default: return [event, ''];
  }
}

function indicator(on) {
  const el = document.getElementById('live');
  if (el) { el.classList.toggle('on', on); el.classList.toggle('off', !on); el.dataset.state = on ? 'on' : 'off'; }
}

export function connect() {
  disconnect();
  const s = session.get();
  if (!s || !s.token) return;
  const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
  const ws = new WebSocket(`${proto}//${location.host}/api/v1/ws?token=${encodeURIComponent(s.token)}`);
  socket = ws;
  ws.addEventListener('open', () => { backoff = 1000; });
  ws.addEventListener('message', (m) => {
    let msg;
    try { msg = JSON.parse(m.data); } catch { return; }
    const { event, data = {} } = msg;
    if (event === 'system.status') indicator(true);
    if (event === 'hitl.requested' || data.severity === 'error' || data.severity === 'warning') {
      const [title, text] = describe(event, data);
      toast(title, text, data.severity === 'info' ? 'info' : data.severity);
    }
    window.dispatchEvent(new CustomEvent('steward:event', { detail: msg }));
  });
  ws.addEventListener('close', () => {
    indicator(false);
    if (socket !== ws) return;
    socket = null;
    if (session.get()) {
      retry = setTimeout(connect, backoff);
      backoff = Math.min(backoff * 2, 30000);
    }
  });
}

export function disconnect() {
  clearTimeout(retry);
  const ws = socket;
  socket = null;
  if (ws) ws.close();
  indicator(false);
}
