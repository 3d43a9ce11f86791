// Coupon lookup (by coupon id, or by user id within a template: each
// coupon's life from the ledgers) and Void (ids pasted or picked from a
// lookup; reason and operator required; a confirmation with the count).
import { api, get, query, requestID } from './api.js';
import { h, when, who, page, table, errorBox, field } from './ui.js';

const PICKED = 'couponlink.void-ids';

// lookup is the lookup page; with coupon (a link from another page), that
// coupon's life at once.
export async function lookup(signal, coupon) {
  const couponID = h('input', { id: 'lookup-coupon', inputmode: 'numeric', placeholder: 'user coupon id' });
  const tpl = h('input', { id: 'lookup-template', inputmode: 'numeric', placeholder: 'template id', size: 10 });
  const user = h('input', { id: 'lookup-user', placeholder: 'user id' });
  const out = h('div', { id: 'lookup-result' });
  const show = async (call) => {
    out.replaceChildren(h('p', { class: 'muted', text: 'Looking up…' }));
    try {
      const coupons = await call();
      if (signal.aborted) return;
      out.replaceChildren(coupons.length ? lives(coupons) : h('p', { class: 'muted', text: 'No coupon found.' }));
    } catch (err) {
      out.replaceChildren(errorBox(err));
    }
  };
  page('Coupon lookup',
    h('form', { class: 'toolbar', id: 'lookup-by-coupon', onsubmit: (ev) => { ev.preventDefault(); show(async () => [await get(`/v1/user-coupons/${encodeURIComponent(couponID.value.trim())}/history`)]); } },
      field('coupon', couponID), h('button', { type: 'submit', text: 'Look up' })),
    h('form', { class: 'toolbar', id: 'lookup-by-user', onsubmit: (ev) => { ev.preventDefault(); show(async () => (await get(`/v1/templates/${encodeURIComponent(tpl.value.trim())}/user-coupons${query({ user_id: user.value.trim() })}`)).coupons); } },
      field('template', tpl), field('user', user), h('button', { type: 'submit', text: 'Look up' })),
    out);
  if (coupon) {
    couponID.value = String(coupon);
    await show(async () => [await get(`/v1/user-coupons/${coupon}/history`)]);
  }
}

function lives(coupons) {
  const picked = new Set();
  const voidBtn = h('button', { type: 'button', id: 'void-picked', disabled: true, text: 'Void selected…',
    onclick: () => { sessionStorage.setItem(PICKED, [...picked].join('\n')); location.hash = '#/void'; } });
  const blocks = coupons.map((c) => {
    const box = h('input', { type: 'checkbox', 'data-coupon': c.user_coupon_id, onchange: (ev) => {
      if (ev.target.checked) picked.add(c.user_coupon_id); else picked.delete(c.user_coupon_id);
      voidBtn.disabled = picked.size === 0;
    } });
    const rows = c.events.map((e) => h('tr', { 'data-event': e.event },
      h('td', { text: when(e.at) }), h('td', { text: e.event }), h('td', { text: `${e.from} → ${e.to}` }),
      h('td', { text: e.order_id || '' }), h('td', { text: [e.mode, e.reason].filter(Boolean).join(' · ') }),
      h('td', { text: who(e.operator, e.on_behalf_of) }), h('td', { text: e.request_id || '' })));
    return h('section', { class: 'coupon', 'data-coupon': c.user_coupon_id },
      h('h2', {}, h('label', {}, box, ` coupon ${c.user_coupon_id}`), h('span', { class: 'status status-' + c.status, text: c.status })),
      h('p', { class: 'muted', text: `template ${c.template_id} · user ${c.user_id} · channel ${c.channel} · expires ${when(c.expires_at)}` }),
      table(['when', 'event', 'state', 'order', 'mode / reason', 'operator', 'request'], rows, { class: 'grid history' }));
  });
  return h('div', {}, h('p', {}, voidBtn), blocks);
}

export async function voids(signal) {
  const ids = h('textarea', { id: 'void-ids', rows: 6, cols: 30, placeholder: 'user coupon ids, one per line or separated by commas' });
  ids.value = sessionStorage.getItem(PICKED) || '';
  const reason = h('input', { id: 'void-reason', required: true, placeholder: 'e.g. fraud ring TICKET-12', size: 40 });
  const operator = h('input', { id: 'void-operator', required: true, placeholder: 'your name' });
  const step = h('div', { id: 'void-step' });
  const out = h('div', { id: 'void-result' });
  page('Void coupons',
    h('form', { class: 'stack', id: 'void-form', novalidate: true, onsubmit: review },
      field('coupons', ids), h('div', { class: 'fields' }, field('reason', reason), field('operator', operator)),
      h('p', {}, h('button', { type: 'submit', text: 'Review…' }))),
    step, out);

  function parse() {
    const parts = ids.value.split(/[\s,;]+/).filter(Boolean);
    const bad = parts.filter((p) => !/^[1-9]\d*$/.test(p));
    return { list: [...new Set(parts.filter((p) => /^[1-9]\d*$/.test(p)).map(Number))], bad };
  }
  function review(ev) {
    ev.preventDefault();
    out.replaceChildren();
    const { list, bad } = parse();
    const problems = [];
    if (bad.length) problems.push(`not coupon ids: ${bad.slice(0, 5).join(', ')}`);
    if (!list.length) problems.push('give at least one coupon id');
    if (!reason.value.trim()) problems.push('a reason is required');
    if (!operator.value.trim()) problems.push('an operator is required');
    if (problems.length) {
      step.replaceChildren(h('p', { class: 'error', role: 'alert', text: problems.join('; ') }));
      return;
    }
    step.replaceChildren(h('div', { class: 'confirm', id: 'void-confirm' },
      h('p', { text: `Void ${list.length} coupon${list.length === 1 ? '' : 's'} for “${reason.value.trim()}”? Each available coupon goes back to its channel's pool; a used one is refused.` }),
      h('button', { type: 'button', id: 'void-confirm-button', class: 'danger', text: `Void ${list.length}`, onclick: () => send(list) }), ' ',
      h('button', { type: 'button', text: 'Cancel', onclick: () => step.replaceChildren() })));
  }
  async function send(list) {
    step.replaceChildren(h('p', { class: 'muted', text: 'Voiding…' }));
    try {
      const res = await api('POST', '/v1/voids', { user_coupon_ids: list, reason: reason.value.trim(), operator: operator.value.trim(), request_id: requestID() });
      if (signal.aborted) return;
      sessionStorage.removeItem(PICKED);
      step.replaceChildren();
      const counts = Object.entries(res.counts).map(([k, n]) => `${n} ${k}`).join(', ');
      out.replaceChildren(h('p', { class: 'ok', role: 'status', text: `Done: ${counts} (request ${res.request_id}).` }),
        table(['coupon', 'result', 'status now', 'message'], res.results.map((r) => h('tr', { 'data-coupon': r.user_coupon_id, 'data-result': r.result },
          h('td', { text: r.user_coupon_id }), h('td', { text: r.result + (r.replayed ? ' (before)' : '') }), h('td', { text: r.status || '' }), h('td', { text: r.message || '' }))),
        { class: 'grid', id: 'void-results' }));
    } catch (err) {
      step.replaceChildren(errorBox(err));
    }
  }
}
