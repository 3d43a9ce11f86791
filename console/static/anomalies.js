// Anomalies: every finding (the cdc's anomalies, the reconciler's
// differences left for a person) with its kind, the rows it names (a
// coupon links to its history), where it was last seen (binlog position,
// source) and its state; acknowledge with who and why, close, reopen;
// filters by campaign, kind, state and source (kept for the tab).
import { api, get, query } from './api.js';
import { h, num, when, who, page, table, errorBox, field } from './ui.js';

const FILTERS = 'couponlink.anomaly-filters';

export async function anomalies(signal) {
  const saved = JSON.parse(sessionStorage.getItem(FILTERS) || '{}');
  const tpl = h('input', { id: 'anomaly-template', inputmode: 'numeric', placeholder: 'any', size: 8, value: saved.template || '' });
  const kind = h('input', { id: 'anomaly-kind', placeholder: 'any', size: 20, value: saved.kind || '', list: 'anomaly-kinds' });
  const kinds = h('datalist', { id: 'anomaly-kinds' });
  const state = h('select', { id: 'anomaly-state' }, ['', 'open', 'acknowledged', 'closed'].map((s) =>
    h('option', { value: s, text: s || 'any', selected: (saved.state ?? 'open') === s })));
  const source = h('select', { id: 'anomaly-source' }, ['', 'cdc', 'reconcile'].map((s) =>
    h('option', { value: s, text: s || 'any', selected: (saved.source || '') === s })));
  const operator = h('input', { id: 'anomaly-operator', placeholder: 'your name', value: sessionStorage.getItem('couponlink.operator') || '' });
  const body = h('div', { id: 'anomalies' });
  const filters = () => ({ template: tpl.value.trim(), kind: kind.value.trim(), state: state.value, source: source.value });
  page('Anomalies',
    h('form', { class: 'toolbar', id: 'anomaly-filters', onsubmit: (ev) => { ev.preventDefault(); load(); } },
      field('campaign', tpl), field('kind', kind), kinds, field('state', state), field('source', source),
      h('button', { type: 'submit', text: 'Filter' })),
    h('p', { class: 'toolbar' }, field('acting as', operator),
      h('span', { class: 'muted', text: ' who acknowledges, closes or reopens (recorded with the reason)' })),
    body);

  async function load() {
    const f = filters();
    sessionStorage.setItem(FILTERS, JSON.stringify(f));
    let res;
    try {
      res = await get('/v1/findings' + query({ ...f, limit: 200 }));
    } catch (err) {
      if (!signal.aborted) body.replaceChildren(errorBox(err));
      return;
    }
    if (signal.aborted) return;
    const seen = new Set([...kinds.children].map((o) => o.value));
    for (const x of res.findings) if (!seen.has(x.kind)) { seen.add(x.kind); kinds.append(h('option', { value: x.kind })); }
    body.replaceChildren(res.findings.length
      ? table(['state', 'kind', 'names', 'where', 'seen', 'summary', 'lifecycle', ''], res.findings.map(row), { class: 'grid', id: 'findings' })
      : h('p', { class: 'muted', id: 'findings', text: 'No finding matches.' }));
  }

  function row(f) {
    const w = f.where || {};
    const names = [];
    if (w.coupon) names.push(h('a', { href: `#/lookup/coupon/${w.coupon}`, class: 'coupon-link', text: `coupon ${w.coupon}` }), ' ');
    if (w.template) names.push(h('a', { href: `#/campaign/${w.template}`, text: `campaign ${w.template}` }), ' ');
    if (w.channel) names.push(`channel ${w.channel} `);
    if (w.order) names.push(`order ${w.order}`);
    if (!names.length) names.push(f.subject);
    const where = [w.source && `source ${w.source}`, w.position && `binlog ${w.position}`, w.event_time && `event ${when(w.event_time)}`]
      .filter(Boolean).join(' · ') || f.source;
    const life = [];
    if (f.acknowledged_by) life.push(`acknowledged by ${who(f.acknowledged_by, f.acknowledged_on_behalf_of)} ${when(f.acknowledged_at)}: ${f.acknowledged_reason}`);
    if (f.closed_by) life.push(`closed by ${who(f.closed_by, f.closed_on_behalf_of)} ${when(f.closed_at)}: ${f.closed_reason}`);
    if (f.reopened_by) life.push(`reopened by ${who(f.reopened_by, f.reopened_on_behalf_of)} ${when(f.reopened_at)}: ${f.reopened_reason}`);
    const reason = h('input', { name: 'reason', placeholder: 'why', size: 24 });
    const msg = h('span', {});
    const act = (verb, label) => h('button', { type: 'button', 'data-action': verb, text: label, onclick: async () => {
      sessionStorage.setItem('couponlink.operator', operator.value.trim());
      try {
        await api('POST', `/v1/findings/${encodeURIComponent(f.fingerprint)}/${verb}`, { operator: operator.value.trim(), reason: reason.value.trim() });
        if (!signal.aborted) await load();
      } catch (err) {
        msg.replaceChildren(errorBox(err));
      }
    } });
    const actions = f.state === 'open' ? [act('ack', 'Acknowledge'), act('close', 'Close')]
      : f.state === 'acknowledged' ? [act('close', 'Close'), act('reopen', 'Reopen')] : [act('reopen', 'Reopen')];
    return h('tr', { 'data-fingerprint': f.fingerprint, 'data-state': f.state, 'data-kind': f.kind },
      h('td', { class: f.state === 'open' ? 'warn' : '', 'data-k': 'state', text: f.state }),
      h('td', { text: f.kind }), h('td', {}, names), h('td', { 'data-k': 'where', text: where }),
      h('td', { 'data-k': 'seen', text: `${when(f.last_seen)} (${num(f.times_seen)}×, first ${when(f.first_seen)})` }),
      h('td', { text: f.summary }), h('td', { 'data-k': 'lifecycle', text: life.join('; ') }),
      h('td', { class: 'actions' }, reason, ' ', actions, msg));
  }
  await load();
}
