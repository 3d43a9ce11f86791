// Reconciliation (passes, open items, resolve with a note) and Health
// (where the cdc stands, Redis, the webhook outbox, the last pass).
import { api, get } from './api.js';
import { h, num, count, when, who, page, table, errorBox, field } from './ui.js';

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
    h('td', { text: p.resolved_by ? `${who(p.resolved_by, p.resolved_on_behalf_of)}: ${p.resolved_note}` : '' })));
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
    ...(rec.corrected ? [kv('corrected', correctedText(rec.corrected), 'warn')] : []),
  ] : [kv('task', 'none yet')], { class: 'kv', id: 'health-reconcile' });
  const kinds = Object.entries(st.anomalies || {});
  const anomalies = table(['anomalies', 'count'], kinds.length ? kinds.map(([k, n]) => kv(k, num(n), 'warn')) : [kv('none', '0')], { class: 'kv' });
  const all = overall(st);
  const word = h('p', { id: 'health-overall', class: 'overall ' + all.word, 'data-word': all.word },
    h('strong', { text: all.word }), all.why.length ? ': ' + all.why.join('; ') : ': the cdc follows the binlog, nothing is failing');
  return [word, h('div', { class: 'cards' }, cdc, hooks, last, anomalies)];
}

// correctedText says what a pass corrected, by store ("claimed_users 3,
// redis 1"): Redis keys or set members a person may want to know were
// lost.
export function correctedText(corrected) {
  return Object.entries(corrected).sort(([a], [b]) => a.localeCompare(b)).map(([store, n]) => `${store} ${num(n)}`).join(', ');
}

// LAG_WARN and LAG_DOWN are the lags (seconds) at which the whole is
// degraded and down.
const LAG_WARN = 5;
const LAG_DOWN = 60;

// overall is the whole in one word, and why: down when the counters do
// not follow the binlog (no checkpoint yet, or a lag of a minute or
// more); degraded when they follow but something needs a look (lag, the
// cdc's process not answering, Redis behind, webhooks failing or
// dropped, a reconcile pass that failed or needs review); else ok.
export function overall(st) {
  const p = st.process || {};
  const w = st.webhooks || {};
  const rec = st.last_reconcile;
  if (!st.found) return { word: 'down', why: [`the cdc's checkpoint “${st.checkpoint}” is not written yet`] };
  if (st.lag_seconds >= LAG_DOWN) return { word: 'down', why: [`the counters are ${Math.round(st.lag_seconds)} s behind the binlog`] };
  const why = [];
  if (st.lag_seconds > LAG_WARN) why.push(`lag ${st.lag_seconds.toFixed(1)} s`);
  if (!p.reachable) why.push(`the cdc's process does not answer (${p.error || 'no answer'})`);
  else if (p.redis_behind_batches > 0) why.push(`Redis ${num(p.redis_behind_batches)} batches behind`);
  if (w.failing) why.push(`${count(w.failing, 'webhook event')} failing`);
  if (w.dropped) why.push(`${count(w.dropped, 'webhook event')} dropped`);
  if (rec && rec.status === 'error') why.push(`the last reconcile pass failed`);
  if (rec && rec.status === 'needs_review' && !rec.resolved_at) why.push(`the last reconcile pass needs review`);
  return { word: why.length ? 'degraded' : 'ok', why };
}

// passStatus words a pass's status: a pass that needed review says
// whether it still does or who resolved it.
export function passStatus(p) {
  if (p.status === 'needs_review') return p.resolved_at ? `resolved by ${who(p.resolved_by, p.resolved_on_behalf_of)} (needed review)` : 'needs review (see Reconciliation)';
  return p.status.replace('_', ' ');
}
