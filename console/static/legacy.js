// A legacy shop's campaigns (an API started with -mapping), read-only:
// couponlink never writes the shop's tables, so these pages have no write
// control. Live (polled), with the shop's own remaining column beside
// budget − taken, the channels by their labels, and with several sources
// the sources each sum holds and a banner for a source that is down. A
// campaign's page has its quota policy, couponlink's own, in signal mode
// only (the form and preview of the own templates' page, channels.js):
// the cdc sends each recommendation as an event, for the shop to apply.
import { api, get } from './api.js';
import { h, bar, legend, num, pct, when, page, table, errorBox } from './ui.js';
import { policySection, previewView } from './channels.js';

const POLL_MS = 1000;

const frozen = (c) => c.expired + c.returned - c.released;
const rate = (c) => {
  const d = c.held + c.used + c.expired + c.returned - c.released;
  return d > 0 ? c.used / d : null;
};
const states = (t) => ({ claimable: t.claimable ?? 0, held: t.held, used: t.used, frozen: frozen(t) });
const readOnly = () => h('p', { class: 'readonly', id: 'read-only' },
  'Read-only: a legacy shop attached through a mapping. couponlink reads its tables and never writes them; changes are made in the shop.' +
  ' (A campaign\'s quota policy is couponlink\'s own: it only recommends.)');

// banner names the sources the sums leave out, and why.
function banner(res) {
  const down = res.sources.filter((s) => s.state !== 'up');
  if (!down.length) return '';
  return h('div', { class: 'banner', id: 'sources-banner', role: 'alert' }, down.map((s) => h('p', {},
    s.state === 'down' ? `Source ${s.name} is down (${s.error || 'no answer'}): the sums below leave out its coupons.`
      : `Source ${s.name} has no checkpoint yet (its cdc has not run): the sums below leave out its coupons.`)));
}

function sourcesLine(res) {
  return h('p', { class: 'position', id: 'sources' }, 'sources: ' + res.sources.map((s) =>
    `${s.name} ${s.state}` + (s.position ? ` at ${s.position}, lag ${s.lag_seconds.toFixed(1)} s` : '')).join(' · '));
}

const summed = (t) => t.sources.join('+') + (t.left_out.length ? ` (${t.left_out.join(', ')} left out)` : '');

// live polls path every POLL_MS and shows it with render until the page is left.
async function live(path, signal, box, render) {
  const poll = async () => {
    if (signal.aborted) return;
    try {
      const res = await get(path);
      if (!signal.aborted) box.replaceChildren(...render(res));
    } catch (err) {
      if (!signal.aborted) box.replaceChildren(errorBox(err));
    }
    if (!signal.aborted) setTimeout(poll, POLL_MS);
  };
  await poll();
}

export async function legacyCampaigns(signal) {
  const box = h('div', { id: 'legacy' });
  page('Campaigns (legacy shop)', readOnly(), legend(), box);
  await live('/v1/legacy', signal, box, (res) => {
    const rows = res.templates.map((t) => h('tr', { 'data-template': t.template },
      h('td', {}, h('a', { href: `#/legacy/${t.template}`, text: t.template })),
      h('td', {}, h('a', { href: `#/legacy/${t.template}`, text: t.name || '(no row)' })),
      h('td', { class: 'barcell' }, bar(states(t))),
      h('td', { class: 'n', 'data-k': 'budget', text: num(t.budget) }),
      h('td', { class: 'n', 'data-k': 'remaining', text: num(t.remaining) }),
      h('td', { class: 'n', 'data-k': 'taken', text: num(t.held + t.used + frozen(t)) }),
      h('td', { class: 'n', 'data-k': 'claimable', text: num(t.claimable) }),
      h('td', { class: 'n', 'data-k': 'held', text: num(t.held) }),
      h('td', { class: 'n', 'data-k': 'used', text: num(t.used) }),
      h('td', { class: 'n', 'data-k': 'frozen', text: num(frozen(t)) }),
      h('td', { class: 'n', 'data-k': 'redemption_rate', text: pct(rate(t)) }),
      h('td', { class: 'n', 'data-k': 'per_user_limit', text: num(t.per_user_limit) }),
      h('td', { 'data-k': 'end_time', text: t.end_time ? when(t.end_time) + (t.ended ? ' (ended)' : '') : '—' }),
      h('td', { 'data-k': 'sources', text: summed(t) })));
    return [banner(res), sourcesLine(res), rows.length
      ? table(['id', 'name', 'quota states', 'budget', 'remaining (shop)', 'taken', 'claimable', 'held', 'used', 'frozen', 'redemption',
        'per-user limit', 'end time', 'sources'], rows, { class: 'grid', id: 'legacy-campaigns' })
      : h('p', { class: 'muted', text: 'The shop has no template the cdc has seen yet.' })];
  });
}

// where a legacy campaign's policy is read, changed and previewed: signal
// or off (auto would move quota in the shop's tables; the API refuses it)
const legacyPolicy = (id) => ({ base: `/v1/legacy/templates/${id}`, modes: ['off', 'signal'] });
const RULE_EVERY = 5; // the rule's recommendation is read every 5th poll

export async function legacyCampaign(id, signal) {
  const box = h('div', { id: 'legacy-campaign' });
  const ruleBox = h('section', { id: 'rule-now' });
  const policyBox = h('section', { id: 'policy' });
  page(`Legacy template ${id}`, readOnly(), legend(), box,
    h('h2', { text: 'What the rule recommends now' }), ruleBox,
    h('h2', { text: 'Rebalancing policy (signal only)' }),
    h('p', { class: 'muted', id: 'policy-signal-only' }, 'couponlink keeps this policy in its own database and sends each recommendation ' +
      'as a quota.recommendation event; it never moves quota in the shop\'s tables, so mode auto is not offered.'),
    policyBox);
  const loadPolicy = async () => {
    try {
      const v = await get(`/v1/legacy/templates/${id}/quota-policy`);
      const hist = await get(`/v1/legacy/templates/${id}/quota-policy/history?limit=50`);
      if (!signal.aborted) policyBox.replaceChildren(...policySection(legacyPolicy(id), v, hist.entries, async () => { await loadPolicy(); await showRule(); }));
    } catch (err) {
      if (!signal.aborted) policyBox.replaceChildren(errorBox(err));
    }
  };
  let polls = 0;
  let labels = {}; // the channels' names as the mapping labels them
  const showRule = async () => {
    try {
      const pv = await api('POST', `/v1/legacy/templates/${id}/quota-policy/preview`, {});
      if (!signal.aborted) ruleBox.replaceChildren(...previewView(pv, 'rule-now-result', (ch) => labels[ch] || ch));
    } catch (err) {
      if (!signal.aborted) ruleBox.replaceChildren(errorBox(err));
    }
  };
  await loadPolicy();
  await live(`/v1/legacy/templates/${id}`, signal, box, (res) => {
    const t = res.templates[0];
    labels = Object.fromEntries(t.channels.map((c) => [c.channel, c.label ? `${c.label} (${c.channel})` : c.channel]));
    if (polls++ % RULE_EVERY === 0) showRule();
    document.querySelector('#main h1').textContent = `${t.name || '(no row)'} (legacy template ${t.template})`;
    const rows = t.channels.map((c) => h('tr', { 'data-channel': c.channel },
      h('th', { scope: 'row', text: c.label ? `${c.label} (${c.channel})` : c.channel }),
      h('td', { class: 'barcell' }, bar({ claimable: c.claimable ?? 0, held: c.held, used: c.used, frozen: frozen(c) })),
      h('td', { class: 'n', 'data-k': 'quota', text: num(c.quota) }),
      h('td', { class: 'n', 'data-k': 'claimable', text: num(c.claimable) }),
      h('td', { class: 'n', 'data-k': 'held', text: num(c.held) }),
      h('td', { class: 'n', 'data-k': 'used', text: num(c.used) }),
      h('td', { class: 'n', 'data-k': 'frozen', text: num(frozen(c)) }),
      h('td', { class: 'n', 'data-k': 'redemption_rate', text: pct(rate(c)) })));
    const parts = (t.parts || []).map((p) => h('tr', { 'data-source': p.sources[0] },
      h('th', { scope: 'row', text: p.sources[0] }), h('td', { class: 'n', text: num(p.held) }), h('td', { class: 'n', text: num(p.used) }),
      h('td', { class: 'n', text: num(frozen(p)) })));
    return [banner(res), sourcesLine(res),
      h('p', { class: 'muted', id: 'legacy-template' },
        `budget ${num(t.budget)} · remaining (the shop's column) ${num(t.remaining)} · taken ${num(t.held + t.used + frozen(t))} · ` +
        `claimable (budget − taken) ${num(t.claimable)} · per-user limit ${num(t.per_user_limit)} · end ${t.end_time ? when(t.end_time) : '—'}` +
        `${t.ended ? ' (ended)' : ''} · summed over ${summed(t)}`),
      h('h2', { text: 'Channels' }),
      table(['channel', 'quota states', 'quota', 'claimable', 'held', 'used', 'frozen', 'redemption'], rows, { class: 'grid', id: 'channels' }),
      ...(parts.length ? [h('h2', { text: 'Per source' }), table(['source', 'held', 'used', 'frozen'], parts, { class: 'grid compact', id: 'parts' })] : [])];
  });
}
