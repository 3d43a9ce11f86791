// A campaign's channels, polled every second, with the cdc position the
// counts reflect and each channel's trends; and its rebalancing policy:
// view, edit, history.
import { api, get, query } from './api.js';
import { h, bar, legend, num, pct, when, who, page, table, errorBox, field } from './ui.js';
import { TREND_HOURS, trendCell } from './trends.js';

const POLL_MS = 1000;
const NUMBERS = ['low', 'high', 'min_claims', 'max_share', 'reserve', 'cooldown_seconds', 'min_age_seconds'];
const INTEGERS = new Set(['min_claims', 'cooldown_seconds', 'min_age_seconds']);
const RULE_EVERY = 5; // the rule's explanation and the trends are read every 5th poll

// previewView shows a decision of the rule (POST .../quota-policy/preview):
// what stops it or the moves, and each channel's inputs and condition;
// name(channel) is how a channel is shown (a legacy shop's by its label).
export function previewView(pv, id, name = (ch) => ch) {
  const verdict = pv.stop
    ? h('p', { class: 'verdict stop', 'data-k': 'stop' }, `No move now: ${pv.stop}.`)
    : h('p', { class: 'verdict move', 'data-k': 'moves' }, `${pv.policy.mode === 'auto' ? 'Moves' : 'Recommends (mode ' + pv.policy.mode + ': nothing moves)'} ${num(pv.total)}: ` +
      pv.moves.map((m) => `${num(m.amount)} ${name(m.from)} → ${name(m.to)}`).join(', '));
  const rows = pv.channels.map((c) => h('tr', { 'data-channel': c.channel, 'data-role': c.role },
    h('th', { scope: 'row', text: name(c.channel) }),
    h('td', { class: 'n', 'data-k': 'claims', text: num(c.claims) }),
    h('td', { class: 'n', 'data-k': 'redemption_rate', text: pct(c.redemption_rate) }),
    h('td', { 'data-k': 'sold_out', text: c.quota_unknown ? 'unknown' : c.sold_out ? 'SOLD OUT' : '' }),
    h('td', { 'data-k': 'role', text: c.role || 'neither' }),
    h('td', { 'data-k': 'why', text: c.why })));
  const moves = pv.moves.map((m) => h('tr', { 'data-from': m.from, 'data-to': m.to, 'data-amount': m.amount },
    h('td', { text: name(m.from) }), h('td', { text: name(m.to) }), h('td', { class: 'n', text: num(m.amount) }), h('td', { text: m.why })));
  return [h('div', { id },
    verdict,
    h('p', { class: 'muted' }, `mode ${pv.policy.mode} · campaign age ${pv.unknown && pv.unknown.some((u) => u.startsWith('age')) ? 'unknown' : Math.round(pv.age_seconds) + ' s'} (min_age ${pv.policy.min_age_seconds} s) · ` +
      `last decision ${pv.last_decision ? when(pv.last_decision) : 'none'} (cooldown ${pv.policy.cooldown_seconds} s) · min_claims ${pv.policy.min_claims} · low ${pv.policy.low} · high ${pv.policy.high}`),
    ...(pv.unknown || []).map((u) => h('p', { class: 'muted unknown', 'data-k': 'unknown', text: `Unknown: ${u}.` })),
    table(['channel', 'claims', 'redemption', 'sold out', 'role', 'the condition now'], rows, { class: 'grid compact rule-channels' }),
    moves.length ? table(['from', 'to', 'amount', 'why'], moves, { class: 'grid compact rule-moves' }) : '')];
}

export async function channels(id, signal) {
  const tpl = await get(`/v1/templates/${id}`);
  const position = h('p', { class: 'position', id: 'cdc-position' }, 'cdc position: …');
  const grid = h('div', { id: 'channels' });
  const policyBox = h('section', { id: 'policy' });
  const ruleBox = h('section', { id: 'rule-now' });
  page(`${tpl.name} (template ${tpl.id})`,
    h('p', { class: 'muted' }, `total quota ${num(tpl.total_quota)} · per-user limit ${tpl.per_user_limit} · expiry ${tpl.expiry_policy}`),
    h('h2', { text: 'Channels' }), legend(), position, grid,
    h('h2', { text: 'What the rule does now' }), ruleBox,
    h('h2', { text: 'Rebalancing policy' }), policyBox);

  let policy = null;
  let trends = null; // by channel, and from: the start of their first minute
  let polls = 0;
  // the rule's inputs and decision with the policy in force (nothing saved)
  const showRule = async () => {
    try {
      const pv = await api('POST', `/v1/templates/${id}/quota-policy/preview`, {});
      if (!signal.aborted) ruleBox.replaceChildren(...previewView(pv, 'rule-now'));
    } catch (err) {
      if (!signal.aborted) ruleBox.replaceChildren(errorBox(err));
    }
  };
  const poll = async () => {
    if (signal.aborted) return;
    try {
      const [res, tr] = await Promise.all([get(`/v1/templates/${id}/channels`),
        polls % RULE_EVERY === 0 ? get(`/v1/templates/${id}/trends?hours=${TREND_HOURS}`) : null]);
      if (signal.aborted) return;
      if (tr) trends = { from: tr.from, by: Object.fromEntries(tr.channels.map((c) => [c.channel, c])) };
      showPosition(position, res.cdc);
      grid.replaceChildren(channelTable(res.channels, policy, trends));
      if (++polls % RULE_EVERY === 1) await showRule();
    } catch (err) {
      if (!signal.aborted) grid.replaceChildren(errorBox(err));
    }
    if (!signal.aborted) setTimeout(poll, POLL_MS);
  };
  const loadPolicy = async () => {
    policy = await get(`/v1/templates/${id}/quota-policy`);
    const hist = await get(`/v1/templates/${id}/quota-policy/history?limit=50`);
    if (!signal.aborted) policyBox.replaceChildren(...policySection(ownPolicy(id), policy, hist.entries, saved));
  };
  // after a change or a reset, the rule is explained with the saved policy at once
  const saved = async () => {
    await loadPolicy();
    await showRule();
  };
  await loadPolicy();
  await poll();
}

function showPosition(el, cdc) {
  if (!cdc) {
    el.textContent = 'cdc position: not shown (the API names no cdc checkpoint)';
  } else if (!cdc.found) {
    el.textContent = `cdc position: checkpoint “${cdc.checkpoint}” not written yet — held/used/frozen are 0 until the cdc runs`;
  } else {
    el.textContent = `cdc position: ${cdc.position} · last event ${when(cdc.event_time)} · saved ${when(cdc.saved_at)}`;
  }
  el.dataset.position = cdc && cdc.found ? cdc.position : '';
}

function channelTable(chs, policy, trends) {
  const rows = chs.map((c) => {
    const frozen = c.expired + c.returned - c.released;
    const t = c.last_transfer;
    return h('tr', { 'data-channel': c.channel },
      h('th', { scope: 'row', text: c.channel }),
      h('td', { class: 'barcell' }, bar({ claimable: c.claimable, held: c.held, used: c.used, frozen })),
      trendCell(trends && trends.by[c.channel], trends && trends.from),
      h('td', { class: 'n', 'data-k': 'quota', text: num(c.quota) }),
      h('td', { class: 'n', 'data-k': 'claimable', text: num(c.claimable) }),
      h('td', { class: 'n', 'data-k': 'claimed', text: num(c.claimed) }),
      h('td', { class: 'n', 'data-k': 'held', text: num(c.held) }),
      h('td', { class: 'n', 'data-k': 'used', text: num(c.used) }),
      h('td', { class: 'n', 'data-k': 'frozen', text: num(frozen) }),
      h('td', { class: 'n', 'data-k': 'redemption_rate', text: pct(c.redemption_rate) }),
      h('td', { 'data-k': 'sold_out', class: c.claimable <= 0 ? 'soldout' : '', text: c.claimable <= 0 ? 'SOLD OUT' : '' }),
      h('td', { 'data-k': 'last_transfer' }, t ? `${t.amount} ${t.from} → ${t.to} · ${t.rule} · ${when(t.at)}` : '—'));
  });
  const mode = policy ? policy.effective.mode : '…';
  return h('div', {},
    table(['channel', 'quota states', `last ${TREND_HOURS} h, per minute`, 'quota', 'claimable', 'claimed', 'held', 'used', 'frozen', 'redemption', 'sold out', 'last transfer (reason)'], rows, { class: 'grid' }),
    h('p', { class: 'muted', id: 'policy-in-force' }, `policy in force: ${mode}` + (policy ? ` · low ${policy.effective.low} · high ${policy.effective.high} · reserve ${policy.effective.reserve} · cooldown ${policy.effective.cooldown_seconds}s` : '')));
}

// ownPolicy is where an own template's policy is read, changed and
// previewed, and what its form offers.
const ownPolicy = (id) => ({ base: `/v1/templates/${id}`, modes: ['off', 'signal', 'auto'] });

// policySection is a policy's view, form (modes at.modes) and history, on the routes under at.base: an own
// template's (ownPolicy) or a legacy campaign's (legacy.js).
export function policySection(at, v, entries, reload) {
  const eff = v.effective;
  const summary = table(['', 'mode', ...NUMBERS], [
    h('tr', {}, h('th', { text: 'in force' }), h('td', { text: eff.mode }), NUMBERS.map((k) => h('td', { class: 'n', text: eff[k] }))),
    h('tr', {}, h('th', { text: 'override' }), h('td', { text: v.override.mode ?? '·' }), NUMBERS.map((k) => h('td', { class: 'n', text: v.override[k] ?? '·' }))),
    h('tr', {}, h('th', { text: 'defaults' }), h('td', { text: v.defaults.mode }), NUMBERS.map((k) => h('td', { class: 'n', text: v.defaults[k] }))),
  ], { class: 'grid compact', id: 'policy-view' });

  const overridden = ['mode', ...NUMBERS].filter((k) => v.override[k] !== undefined && v.override[k] !== null);
  const inputs = {};
  // the fields hold the values in force; only the changed ones are sent
  inputs.mode = h('select', { name: 'mode' }, at.modes.map((m) => h('option', { value: m, text: m, selected: m === eff.mode })));
  for (const k of NUMBERS) {
    const has = eff[k] !== undefined && eff[k] !== null;
    inputs[k] = h('input', { name: k, inputmode: 'decimal', value: has ? String(eff[k]) : '', placeholder: has ? undefined : 'default', size: 8 });
  }
  inputs.changed_by = h('input', { name: 'changed_by', required: true, placeholder: 'your name' });
  inputs.reason = h('input', { name: 'reason', required: true, placeholder: 'ticket or why', size: 30 });
  const msg = h('div', { class: 'form-result', id: 'policy-result' });
  const previewBox = h('div', { id: 'policy-preview' });
  const confirmBox = h('div', { id: 'reset-confirm-box' });
  const form = h('form', { id: 'policy-form', class: 'stack', novalidate: true, onsubmit: submit },
    h('div', { class: 'fields' }, field('mode', inputs.mode), NUMBERS.map((k) => field(k, inputs[k]))),
    h('div', { class: 'fields' }, field('changed by', inputs.changed_by), field('reason', inputs.reason)),
    h('p', {}, h('button', { type: 'button', id: 'policy-preview-button', text: 'Preview', onclick: preview }), ' ',
      h('button', { type: 'submit', text: 'Change policy' }),
      ' ', h('button', { type: 'button', id: 'policy-reset', text: 'Back to the defaults', onclick: askReset,
        disabled: overridden.length === 0, title: overridden.length ? undefined : 'the template follows the defaults already' })),
    confirmBox, msg, previewBox);

  // change is the fields that differ from the values in force
  function change() {
    const body = {};
    if (inputs.mode.value !== eff.mode) body.mode = inputs.mode.value;
    for (const k of NUMBERS) {
      const s = inputs[k].value.trim();
      if (s === '' || s === String(eff[k])) continue;
      const n = Number(s);
      body[k] = Number.isFinite(n) && (!INTEGERS.has(k) || Number.isInteger(n)) ? n : s; // the API words what is wrong
    }
    return body;
  }
  async function preview() {
    try {
      const pv = await api('POST', `${at.base}/quota-policy/preview`, change());
      previewBox.replaceChildren(h('h3', { text: 'Preview: what the rule would do now with these values (not saved)' }), ...previewView(pv, 'policy-preview-result'));
      msg.replaceChildren();
    } catch (err) {
      previewBox.replaceChildren();
      msg.replaceChildren(errorBox(err));
    }
  }
  async function submit(ev) {
    ev.preventDefault();
    const body = { ...change(), changed_by: inputs.changed_by.value.trim(), reason: inputs.reason.value.trim() };
    await send(() => api('PUT', `${at.base}/quota-policy`, body), 'Policy changed.');
  }
  // "Back to the defaults" asks first: it drops every field the template
  // sets (offered only when it sets one)
  function askReset() {
    confirmBox.replaceChildren(h('p', { class: 'confirm', id: 'reset-confirm', role: 'alertdialog' },
      `Drop this template's own ${overridden.join(', ')} and follow the defaults (mode ${v.defaults.mode})? `,
      h('button', { type: 'button', id: 'reset-confirm-button', text: 'Yes, back to the defaults', onclick: () => { confirmBox.replaceChildren(); reset(); } }), ' ',
      h('button', { type: 'button', text: 'Cancel', onclick: () => confirmBox.replaceChildren() })));
  }
  async function reset() {
    const q = query({ changed_by: inputs.changed_by.value.trim(), reason: inputs.reason.value.trim() });
    await send(() => api('DELETE', `${at.base}/quota-policy${q}`), 'The template follows the defaults again.');
  }
  async function send(call, ok) {
    try {
      await call();
      await reload();
      const r = document.getElementById('policy-result');
      if (r) r.replaceChildren(h('p', { class: 'ok', role: 'status', text: ok }));
    } catch (err) {
      msg.replaceChildren(errorBox(err));
    }
  }

  const rows = entries.map((e) => h('tr', { 'data-audit': e.id },
    h('td', { text: when(e.at) }), h('td', { text: who(e.changed_by, e.on_behalf_of) }), h('td', { text: e.action }), h('td', { text: e.reason }),
    h('td', { class: 'change', text: diff(e.before, e.after) }), h('td', { text: e.source })));
  return [summary, form, h('h3', { text: 'History' }),
    rows.length ? table(['when', 'who', 'action', 'reason', 'old → new', 'via'], rows, { class: 'grid', id: 'policy-history' })
      : h('p', { class: 'muted', id: 'policy-history', text: 'No change yet: the template follows the defaults.' })];
}

// diff words a policy change field by field: "mode signal → auto".
function diff(before, after) {
  const b = before || {};
  const a = after || {};
  const keys = ['mode', ...NUMBERS].filter((k) => b[k] !== a[k]);
  if (!keys.length) return 'no change';
  return keys.map((k) => `${k} ${b[k] ?? 'default'} → ${a[k] ?? 'default'}`).join(', ');
}
