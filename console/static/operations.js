// Reconciliation (passes, open items, resolve with a note) and Health
// (where the cdc stands, Redis, the webhook outbox, the last pass).
import { api, get } from './api.js';
import { h, num, when, page, table, errorBox, field } from './ui.js';

export async function reconcile(signal) {
  const res = await get('/v1/reconcile/tasks?limit=30');
  if (signal.aborted) return;
  const open = res.open.map((it) => {
    const operator = h('input', { required: true, placeholder: 'your name', name: 'operator' });
    const note = h('input', { required: true, placeholder: 'what was checked or done', size: 50, name: 'note' });
    const msg = h('div', {});
    const diffs = it.differences.map((d) => h('tr', {},
      h('td', { text: d.store }), h('td', { text: d.target }), h('td', { text: d.template }), h('td', { text: d.channel || '' }),
      h('td', { text: d.field || '' }), h('td', { class: 'n', text: d.expected }), h('td', { class: 'n', text: d.found ?? d.found_raw ?? 'missing' }),
      h('td', { text: d.action }), h('td', { text: d.reason || '' })));
    return h('section', { class: 'open-item', 'data-task': it.task_id },
      h('h3', { text: `task ${it.task_id} · ${when(it.started_at)}` }), h('p', { text: it.summary }),
      table(['store', 'target', 'template', 'channel', 'field', 'expected', 'found', 'action', 'why'], diffs, { class: 'grid compact' }),
      h('form', { class: 'toolbar', novalidate: true, onsubmit: async (ev) => {
        ev.preventDefault();
        try {
          await api('POST', `/v1/reconcile/tasks/${it.task_id}/resolve`, { operator: operator.value.trim(), note: note.value.trim() });
          if (!signal.aborted) await reconcile(signal);
        } catch (err) {
          msg.replaceChildren(errorBox(err));
        }
      } }, field('operator', operator), field('note', note), h('button', { type: 'submit', text: 'Resolve' })), msg);
  });
  const passes = res.passes.map((p) => h('tr', { 'data-task': p.task_id },
    h('td', { text: p.task_id }), h('td', { text: when(p.started_at) }), h('td', { text: when(p.finished_at) }),
    h('td', { class: 'reconcile-' + (p.resolved_at ? 'resolved' : p.status), text: passStatus(p) }), h('td', { text: p.summary }),
    h('td', { text: p.resolved_by ? `${p.resolved_by}: ${p.resolved_note}` : '' })));
  page('Reconciliation',
    h('h2', { text: `Open items needing review (${res.open.length})` }),
    open.length ? h('div', { id: 'open-items' }, open) : h('p', { class: 'muted', id: 'open-items', text: 'Nothing needs review.' }),
    h('h2', { text: 'Last passes' }),
    passes.length ? table(['task', 'started', 'finished', 'status', 'summary', 'resolved'], passes, { class: 'grid', id: 'passes' })
      : h('p', { class: 'muted', text: 'No reconcile pass has run against this database.' }));
}

export async function health(signal) {
  const box = h('div', { id: 'health' });
  page('Health', box);
  const poll = async () => {
    if (signal.aborted) return;
    try {
      const st = await get('/v1/cdc/status');
      if (!signal.aborted) box.replaceChildren(...healthView(st));
    } catch (err) {
      if (!signal.aborted) box.replaceChildren(errorBox(err));
    }
    if (!signal.aborted) setTimeout(poll, 2000);
  };
  await poll();
}

function healthView(st) {
  const p = st.process || {};
  const w = st.webhooks || {};
  const rec = st.last_reconcile;
  const kv = (k, v, cls) => h('tr', {}, h('th', { scope: 'row', text: k }), h('td', { class: cls || '', text: v }));
  const leader = p.leader == null ? 'unknown' : p.leader >= 1 ? 'this cdc leads' : 'standby (not leading)';
  const cdc = table(['cdc', ''], [
    kv('checkpoint', st.found ? `${st.checkpoint} at ${st.position}` : `${st.checkpoint}: not written yet`),
    kv('server binlog end', st.server_position),
    kv('lag', `${st.lag_seconds.toFixed(1)} s`, st.lag_seconds > 5 ? 'warn' : ''),
    kv('last event', when(st.event_time)), kv('saved', when(st.saved_at)),
    kv('leader', st.leader ? `${st.leader} (epoch ${st.epoch})` : '—'),
    kv('events applied', `${num(st.events_applied)} in ${num(st.batches)} batches`),
    kv('cdc process', p.reachable ? `${leader}; Redis behind ${num(p.redis_behind_batches)} batches` : `unknown: ${p.error || 'no answer'}`,
      p.reachable && p.redis_behind_batches > 0 ? 'warn' : ''),
  ], { class: 'kv', id: 'health-cdc' });
  const hooks = table(['webhook outbox', ''], [
    kv('pending', num(w.pending)), kv('failing (pending, retried)', num(w.failing), w.failing ? 'warn' : ''),
    kv('delivered', num(w.delivered)), kv('dropped', num(w.dropped), w.dropped ? 'warn' : ''),
    kv('oldest pending', when(w.oldest_pending)),
  ], { class: 'kv', id: 'health-webhooks' });
  const last = table(['last reconcile', ''], rec ? [
    kv('task', rec.task_id), kv('status', passStatus(rec), 'reconcile-' + (rec.resolved_at ? 'resolved' : rec.status)),
    kv('finished', when(rec.finished_at)), kv('summary', rec.summary),
  ] : [kv('task', 'none yet')], { class: 'kv', id: 'health-reconcile' });
  const kinds = Object.entries(st.anomalies || {});
  const anomalies = table(['anomalies', 'count'], kinds.length ? kinds.map(([k, n]) => kv(k, num(n), 'warn')) : [kv('none', '0')], { class: 'kv' });
  return [h('div', { class: 'cards' }, cdc, hooks, last, anomalies)];
}

// passStatus words a pass's status: a pass that needed review says
// whether it still does or who resolved it.
export function passStatus(p) {
  if (p.status === 'needs_review') return p.resolved_at ? `resolved by ${p.resolved_by} (needed review)` : 'needs review (see Reconciliation)';
  return p.status.replace('_', ' ');
}
