// The console's router: #/campaigns, #/campaign/{id}, #/legacy/{id} (a
// legacy shop's template), #/lookup (and
// #/lookup/coupon/{id}), #/void, #/anomalies, #/reconcile, #/health. Each
// page gets a signal that aborts when the
// operator leaves it, which stops its polling.
import { get, getToken, setToken } from './api.js';
import { campaigns } from './campaigns.js';
import { channels } from './channels.js';
import { lookup, voids } from './coupons.js';
import { reconcile, health } from './operations.js';
import { anomalies } from './anomalies.js';
import { legacyCampaign } from './legacy.js';
import { page, errorBox } from './ui.js';

const routes = [
  [/^#\/campaigns$/, (m, s) => campaigns(s)],
  [/^#\/campaign\/(\d+)$/, (m, s) => channels(Number(m[1]), s)],
  [/^#\/legacy\/(\d+)$/, (m, s) => legacyCampaign(Number(m[1]), s)],
  [/^#\/lookup$/, (m, s) => lookup(s)],
  [/^#\/lookup\/coupon\/(\d+)$/, (m, s) => lookup(s, Number(m[1]))],
  [/^#\/anomalies$/, (m, s) => anomalies(s)],
  [/^#\/void$/, (m, s) => voids(s)],
  [/^#\/reconcile$/, (m, s) => reconcile(s)],
  [/^#\/health$/, (m, s) => health(s)],
];

let current = null;

async function render() {
  if (current) current.abort();
  current = new AbortController();
  const hash = location.hash || '#/campaigns';
  for (const a of document.querySelectorAll('nav a')) {
    a.classList.toggle('active', hash.startsWith('#/' + a.dataset.nav) || (a.dataset.nav === 'campaigns' && (hash.startsWith('#/campaign/') || hash.startsWith('#/legacy/'))));
  }
  for (const [re, show] of routes) {
    const m = hash.match(re);
    if (m) {
      try {
        await show(m, current.signal);
      } catch (err) {
        if (!current.signal.aborted) page('Error', errorBox(err));
      }
      return;
    }
  }
  location.hash = '#/campaigns';
}

function askToken() {
  const dlg = document.getElementById('token-dialog');
  if (dlg.open) return;
  document.getElementById('token-input').value = getToken();
  dlg.showModal();
}

document.getElementById('token-form').addEventListener('submit', (ev) => {
  const value = ev.submitter && ev.submitter.value;
  setToken(value === 'clear' ? '' : document.getElementById('token-input').value.trim());
  render();
});
document.getElementById('token-button').addEventListener('click', askToken);
window.addEventListener('couponlink:need-token', askToken);
window.addEventListener('hashchange', render);
// a legacy shop (an API started with -mapping): couponlink writes none of
// its coupons, so the pages of couponlink's own coupons are not offered
get('/healthz').then((hz) => {
  for (const nav of ['lookup', 'void']) document.querySelector(`nav a[data-nav=${nav}]`).hidden = Boolean(hz.legacy);
}).catch(() => {});
render();
