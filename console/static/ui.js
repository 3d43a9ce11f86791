// DOM helpers: pages build their elements with h() (text is always set
// as text, never parsed as HTML), and share the stacked bar and formats.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'text') el.textContent = v;
    else if (k === 'value') el.value = v;
    else el.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export const STATES = ['claimable', 'held', 'used', 'frozen'];

// bar is one stacked bar of the four states of a quota (claimable, held,
// used, frozen), each segment as wide as its share.
export function bar(c) {
  const parts = STATES.map((s) => [s, Math.max(Number(c[s]) || 0, 0)]);
  const total = parts.reduce((a, [, n]) => a + n, 0);
  const el = h('div', { class: 'bar', role: 'img', 'aria-label': parts.map(([s, n]) => `${s} ${n}`).join(', ') });
  for (const [s, n] of parts) {
    if (n === 0) continue;
    const seg = h('span', { class: 'seg ' + s, 'data-state': s, 'data-value': n, title: `${s}: ${n}` });
    seg.style.width = (total ? (100 * n) / total : 0) + '%';
    el.append(seg);
  }
  return el;
}

export function legend() {
  return h('p', { class: 'legend' }, STATES.map((s) => h('span', { class: 'key' }, h('i', { class: 'seg ' + s }), s)));
}

export const num = (n) => (n === undefined || n === null ? '—' : Number(n).toLocaleString('en-US'));
export const pct = (r) => (r === undefined || r === null ? '—' : (r * 100).toFixed(1) + '%');

// who is an audit row's actor: with a token, its name and the person the
// request named, when another ("admin for ann").
export const who = (by, onBehalfOf) => (by && onBehalfOf ? `${by} for ${onBehalfOf}` : by || '');

export function when(ts) {
  if (!ts) return '—';
  const d = new Date(ts);
  return isNaN(d) ? String(ts) : d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
}

// errorBox shows an API error as the API worded it, with its code and field.
export function errorBox(err) {
  const bits = [err.message];
  if (err.code) bits.push(` (${err.code}${err.field ? ', field ' + err.field : ''})`);
  return h('p', { class: 'error', role: 'alert', 'data-code': err.code || '', 'data-field': err.field || '' }, bits.join(''));
}

export function table(headers, rows, attrs = {}) {
  return h('table', attrs, h('thead', {}, h('tr', {}, headers.map((t) => h('th', { text: t })))), h('tbody', {}, rows));
}

export function field(label, input) {
  return h('label', { class: 'field' }, h('span', { text: label }), input);
}

// page replaces the main element's content.
export function page(title, ...children) {
  const main = document.getElementById('main');
  main.replaceChildren(h('h1', { text: title }), ...children);
  return main;
}

// count is "1 event", "2 events": n (formatted) and noun, plural unless n is 1.
export function count(n, noun) {
  return n === 1 ? `1 ${noun}` : `${num(n)} ${noun}s`;
}
