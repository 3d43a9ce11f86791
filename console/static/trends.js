// Trends: per channel, claims, redemptions and releases per minute over
// the last hours (GET /v1/templates/{id}/trends), drawn as small bar
// sparklines in inline SVG: one bar per minute, as tall as its share of
// the series' busiest minute.
import { h } from './ui.js';

export const TREND_HOURS = 3;
export const SERIES = [['claims', 'claims'], ['redemptions', 'redeemed'], ['releases', 'released']];
const HEIGHT = 12;
const SVG = 'http://www.w3.org/2000/svg';

function svg(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  el.append(...children);
  return el;
}

// sparkline draws one series: values.length minutes, the last the current.
export function sparkline(series, values) {
  const peak = Math.max(0, ...values);
  const total = values.reduce((a, n) => a + n, 0);
  const bars = [];
  values.forEach((n, m) => {
    if (n > 0) bars.push(svg('rect', { x: m, width: 1, y: HEIGHT - Math.max(1, (HEIGHT * n) / peak), height: Math.max(1, (HEIGHT * n) / peak), 'data-m': m, 'data-n': n }));
  });
  return svg('svg', { class: `spark ${series}`, viewBox: `0 0 ${values.length} ${HEIGHT}`, width: values.length, height: HEIGHT,
    preserveAspectRatio: 'none', role: 'img', 'data-series': series, 'data-points': values.length, 'data-total': total,
    'aria-label': `${series} per minute, last ${values.length} minutes: ${total} in all, at most ${peak} a minute` },
  svg('title', {}, `${series}: ${total} in ${values.length} min, peak ${peak}/min`), ...bars);
}

// trendCell is a channel's three sparklines, each with its total; from is
// the start of their first minute.
export function trendCell(t, from) {
  if (!t) return h('td', { class: 'trend muted', text: '…' });
  return h('td', { class: 'trend', 'data-k': 'trend', 'data-from': from }, SERIES.map(([k, label]) =>
    h('div', { class: 'spark-row' }, sparkline(k, t[k]), h('span', { class: 'muted', text: ` ${t[k].reduce((a, n) => a + n, 0)} ${label}` }))));
}
