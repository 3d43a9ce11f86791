// Campaigns: every template as one stacked bar of its four states, with
// its redemption rate, anomalies and reconcile status; search by name or
// id, pages by the API's cursor (next_after).
import { get, query } from './api.js';
import { h, bar, legend, num, pct, page, table, errorBox } from './ui.js';
import { legacyCampaigns } from './legacy.js';

const LIMIT = 50;

export async function campaigns(signal) {
  if ((await get('/healthz')).legacy) return legacyCampaigns(signal); // an API started with -mapping
  const state = { q: sessionStorage.getItem('couponlink.search') || '', afters: [0] };
  const input = h('input', { type: 'search', id: 'campaign-search', placeholder: 'name or id', value: state.q });
  const form = h('form', { class: 'toolbar', onsubmit: (ev) => { ev.preventDefault(); state.q = input.value.trim(); sessionStorage.setItem('couponlink.search', state.q); state.afters = [0]; load(); } },
    input, h('button', { type: 'submit', text: 'Search' }));
  const body = h('div', { id: 'campaigns' });
  // disabled until a page has loaded (behind the token dialog, nothing has)
  const prev = h('button', { type: 'button', id: 'page-prev', text: '← Previous', disabled: true, onclick: () => { state.afters.pop(); load(); } });
  const next = h('button', { type: 'button', id: 'page-next', text: 'Next →', disabled: true });
  const where = h('span', { class: 'muted', id: 'page-info' });
  page('Campaigns', form, legend(), body, h('p', { class: 'pager' }, prev, ' ', where, ' ', next));

  async function load() {
    const after = state.afters[state.afters.length - 1];
    let res;
    try {
      res = await get('/v1/templates' + query({ q: state.q, after, limit: LIMIT }));
    } catch (err) {
      body.replaceChildren(errorBox(err));
      return;
    }
    if (signal.aborted) return;
    const rows = res.templates.map((t) =>
      h('tr', { 'data-template': t.id },
        h('td', {}, h('a', { href: `#/campaign/${t.id}`, text: t.id })),
        h('td', {}, h('a', { href: `#/campaign/${t.id}`, text: t.name })),
        h('td', { class: 'barcell' }, bar(t)),
        h('td', { class: 'n', text: num(t.total_quota) }),
        h('td', { class: 'n', text: num(t.claimable) }),
        h('td', { class: 'n', text: num(t.held) }),
        h('td', { class: 'n', text: num(t.used) }),
        h('td', { class: 'n', text: num(t.frozen) }),
        h('td', { class: 'n', text: pct(t.redemption_rate) }),
        h('td', { class: t.anomalies ? 'n warn' : 'n', text: num(t.anomalies) }),
        h('td', { class: 'reconcile-' + t.reconcile, text: t.reconcile.replace('_', ' ') })));
    body.replaceChildren(rows.length
      ? table(['id', 'name', 'quota states', 'quota', 'claimable', 'held', 'used', 'frozen', 'redemption', 'anomalies', 'reconcile'], rows, { class: 'grid' })
      : h('p', { class: 'muted', text: state.q ? `No template matches “${state.q}”.` : 'No templates yet.' }));
    prev.disabled = state.afters.length === 1;
    next.disabled = !res.next_after;
    next.onclick = () => { state.afters.push(res.next_after); load(); };
    where.textContent = `page ${state.afters.length}`;
  }
  await load();
}
