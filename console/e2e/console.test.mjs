// The operator console in headless Chromium, against a running couponlink
// api + cdc with a seeded campaign (started by console/browser_test.go).
// Env: CONSOLE_BASE, CONSOLE_TOKEN, CONSOLE_TEMPLATE, CONSOLE_OUT, CHROMIUM,
// CONSOLE_ANOMALY_COUPON (a coupon the cdc saw go EXPIRED -> AVAILABLE),
// CONSOLE_ANOMALY_AGAIN (a POST there makes that change again and returns
// once the cdc has recorded it), CONSOLE_CDC_METRICS (the cdc's /metrics).
//
// The pages are opened as http://console.test:PORT (mapped to the API's
// address): plain http under a host name that is not localhost, where a
// browser gives no crypto.randomUUID.
import assert from 'node:assert/strict';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { waitUntil } from './wait.mjs';

const base = process.env.CONSOLE_BASE;
const token = process.env.CONSOLE_TOKEN;
const tpl = Number(process.env.CONSOLE_TEMPLATE);
const out = process.env.CONSOLE_OUT;
const anomalyCoupon = Number(process.env.CONSOLE_ANOMALY_COUPON);
const anomalyAgain = process.env.CONSOLE_ANOMALY_AGAIN;
const cdcMetrics = process.env.CONSOLE_CDC_METRICS;
assert.ok(base && token && tpl && out && anomalyCoupon && anomalyAgain && cdcMetrics,
  'CONSOLE_BASE, CONSOLE_TOKEN, CONSOLE_TEMPLATE, CONSOLE_OUT, CONSOLE_ANOMALY_COUPON, CONSOLE_ANOMALY_AGAIN and CONSOLE_CDC_METRICS are required');
const origin = base.replace('127.0.0.1', 'console.test');

// API calls of the test itself, as a script would make them.
async function api(method, p, body) {
  const headers = { Authorization: 'Bearer ' + token };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(base + p, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: res.status, body: await res.json() };
}

const steps = [];
function step(name) {
  steps.push(name);
  console.log(`- ${name}`);
}

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium', args: ['--no-sandbox', '--host-resolver-rules=MAP console.test 127.0.0.1'] });
const errors = [];
// Responses the test provokes on purpose: the 401 before the token is
// typed, and the 400s of the bad policy value and of an acknowledgement
// without a reason. Chromium logs each as
// "Failed to load resource"; anything else logged as an error fails.
const expectedFailures = { 401: 1, 400: 2 };
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  page.on('pageerror', (e) => errors.push('pageerror: ' + e.message));
  page.on('console', (m) => {
    if (m.type() !== 'error') return;
    const status = (m.text().match(/status of (\d{3})/) || [])[1];
    if (status && expectedFailures[status] > 0 && m.location().url.startsWith(origin + '/v1/')) {
      expectedFailures[status]--;
      return;
    }
    errors.push(`console.${m.type()}: ${m.text()} (${m.location().url})`);
  });
  page.on('request', (r) => assert.ok(!r.url().includes(token), `the token must never be in a URL: ${r.url()}`));

  step('the console asks for the token, keeps it in sessionStorage and sends it as a header');
  await page.goto(origin + '/console/');
  await page.locator('#token-dialog[open]').waitFor();
  assert.deepEqual([await page.locator('#page-prev').isDisabled(), await page.locator('#page-next').isDisabled()], [true, true],
    'no page has loaded behind the token dialog: Previous and Next are disabled');
  await page.fill('#token-input', token);
  await page.click('#token-form button[value=save]');
  await page.locator(`#campaigns tr[data-template="${tpl}"]`).waitFor();
  assert.equal(await page.evaluate(() => sessionStorage.getItem('couponlink.token')), token);
  assert.deepEqual(await page.evaluate(() => [window.isSecureContext, typeof crypto.randomUUID]), [false, 'undefined'],
    'plain http under a host name: no crypto.randomUUID (the void below must work without it)');

  step('campaigns: the template with its bar and numbers; search');
  const list = (await api('GET', `/v1/templates?q=${tpl}`)).body.templates.find((t) => t.id === tpl);
  const row = page.locator(`#campaigns tr[data-template="${tpl}"]`);
  assert.match(await row.innerText(), /e2e spring sale/);
  await page.fill('#campaign-search', 'no such campaign');
  await page.press('#campaign-search', 'Enter');
  await page.getByText('No template matches').waitFor();
  await page.fill('#campaign-search', 'spring');
  await page.press('#campaign-search', 'Enter');
  await row.waitFor();
  assert.equal(await row.locator('.bar .seg.used').getAttribute('data-value'), String(list.used));
  await page.screenshot({ path: path.join(out, 'campaigns.png'), fullPage: true });

  step("channels: the page's numbers equal the API's");
  await page.click(`#campaigns tr[data-template="${tpl}"] a >> nth=1`);
  await page.locator('#channels tr[data-channel=app]').waitFor();
  await page.waitForFunction(() => document.getElementById('cdc-position').dataset.position !== '');
  const readPage = () => page.evaluate(() => {
    const out = {};
    for (const tr of document.querySelectorAll('#channels tr[data-channel]')) {
      const v = {};
      for (const td of tr.querySelectorAll('td[data-k]')) v[td.dataset.k] = td.textContent;
      out[tr.dataset.channel] = v;
    }
    return out;
  });
  const expected = (chs) => Object.fromEntries(chs.map((c) => [c.channel, {
    quota: String(c.quota), claimable: String(c.claimable), claimed: String(c.claimed), held: String(c.held), used: String(c.used),
    frozen: String(c.expired + c.returned - c.released),
  }]));
  const pick = (seen) => Object.fromEntries(Object.entries(seen).map(([ch, v]) => [ch, {
    quota: v.quota.replaceAll(',', ''), claimable: v.claimable.replaceAll(',', ''), claimed: v.claimed.replaceAll(',', ''),
    held: v.held.replaceAll(',', ''), used: v.used.replaceAll(',', ''), frozen: v.frozen.replaceAll(',', ''),
  }]));
  // equal to one answer of the API read while nothing moves
  const apiNow = (await api('GET', `/v1/templates/${tpl}/channels`)).body;
  let want = expected(apiNow.channels);
  await waitUntil(async () => JSON.stringify(pick(await readPage())) === JSON.stringify(want), 3000, 'the page shows the API numbers', async () => JSON.stringify({ page: pick(await readPage()), api: want }));
  const rate = apiNow.channels.find((c) => c.channel === 'app').redemption_rate;
  assert.equal((await readPage()).app.redemption_rate, (rate * 100).toFixed(1) + '%');
  assert.equal((await readPage()).partner.sold_out, 'SOLD OUT');
  assert.equal((await readPage()).app.sold_out, '');
  await page.screenshot({ path: path.join(out, 'channels.png'), fullPage: true });

  step('a claim made through the API shows on the page within 2 s');
  const before = pick(await readPage()).app;
  const claimedAt = Date.now();
  const c = await api('POST', '/v1/claims', { template_id: tpl, user_id: 'e2e-late', channel: 'app', request_id: 'e2e-late-claim' });
  assert.equal(c.status, 201, JSON.stringify(c.body));
  await waitUntil(async () => {
    const now = pick(await readPage()).app;
    return Number(now.claimed) === Number(before.claimed) + 1 && Number(now.held) === Number(before.held) + 1;
  }, 2000, 'the claim shows (claimed and held +1)');
  console.log(`  shown after ${Date.now() - claimedAt} ms`);

  step("trends: each channel's sparklines have a bar per minute of the last 3 h; the claim is a bar in its minute, as the API counts");
  const sparks = () => page.evaluate(() => {
    const cell = document.querySelector('#channels tr[data-channel=app] td[data-k=trend]');
    if (!cell) return null;
    const svg = cell.querySelector('svg.spark.claims');
    return { from: cell.dataset.from, points: Number(svg.dataset.points), width: svg.viewBox.baseVal.width,
      bars: Object.fromEntries([...svg.querySelectorAll('rect')].map((r) => [r.dataset.m, Number(r.dataset.n)])),
      series: [...cell.querySelectorAll('svg.spark')].map((s) => s.dataset.series) };
  });
  let trendAPI;
  await waitUntil(async () => {
    const seen = await sparks();
    trendAPI = (await api('GET', `/v1/templates/${tpl}/trends?hours=3`)).body;
    const app = trendAPI.channels.find((c) => c.channel === 'app');
    const bars = Object.fromEntries(app.claims.flatMap((n, m) => (n > 0 ? [[String(m), n]] : [])));
    return seen && seen.from === trendAPI.from && JSON.stringify(seen.bars) === JSON.stringify(bars);
  }, 8000, 'the page draws the API\'s claims per minute', async () => JSON.stringify({ page: await sparks(), from: trendAPI && trendAPI.from }));
  const seen = await sparks();
  assert.equal(seen.points, 180);
  assert.equal(seen.width, 180);
  assert.deepEqual(seen.series, ['claims', 'redemptions', 'releases']);
  const claimMinute = Math.floor((claimedAt - Date.parse(trendAPI.from)) / 60000);
  assert.ok(seen.bars[String(claimMinute)] >= 1 || seen.bars[String(claimMinute + 1)] >= 1,
    `a non-zero bar in the claim's minute ${claimMinute}: ${JSON.stringify(seen.bars)}`);

  step('the policy form changes the policy and the history row appears');
  assert.ok(await page.locator('#policy-reset').isDisabled(), 'the template follows the defaults: nothing to reset');
  await page.selectOption('#policy-form select[name=mode]', 'auto');
  await page.fill('#policy-form input[name=low]', '0.2');
  await page.fill('#policy-form input[name=changed_by]', 'e2e-operator');
  await page.fill('#policy-form input[name=reason]', 'TICKET-17 move quota to app');
  await page.click('#policy-form button[type=submit]');
  await page.locator('#policy-history tr', { hasText: 'TICKET-17 move quota to app' }).waitFor();
  const hist = await page.locator('#policy-history tr', { hasText: 'TICKET-17' }).innerText();
  assert.match(hist, /admin for e2e-operator/, 'the token\'s name and the one it acted for');
  assert.doesNotMatch(hist, /for e2e-operator:/, 'the reason as written');
  assert.match(hist, /mode default → auto/);
  assert.match(hist, /low default → 0\.2/);
  const pol = (await api('GET', `/v1/templates/${tpl}/quota-policy`)).body;
  assert.equal(pol.effective.mode, 'auto');
  assert.equal(pol.effective.low, 0.2);
  await page.locator('#policy-in-force', { hasText: 'policy in force: auto' }).waitFor();
  assert.ok(await page.locator('#policy-reset').isEnabled(), 'the template sets mode and low: they can be reset');

  step("a bad value shows the API's validation message");
  const bad = await api('PUT', `/v1/templates/${tpl}/quota-policy`, { low: 5, changed_by: 'x', reason: 'y' });
  assert.equal(bad.status, 400);
  await page.fill('#policy-form input[name=low]', '5');
  await page.fill('#policy-form input[name=changed_by]', 'e2e-operator');
  await page.fill('#policy-form input[name=reason]', 'a bad value');
  await page.click('#policy-form button[type=submit]');
  const alert = page.locator('#policy-form .error[role=alert]');
  await alert.waitFor();
  assert.ok((await alert.innerText()).includes(bad.body.error.message), `page: ${await alert.innerText()} / API: ${bad.body.error.message}`);
  assert.equal(await alert.getAttribute('data-field'), bad.body.error.field);
  assert.equal((await api('GET', `/v1/templates/${tpl}/quota-policy`)).body.effective.low, 0.2, 'nothing changed');

  step('the policy fields hold the values in force; the history says the change came from the console');
  await page.reload();
  await page.locator('#policy-form input[name=low]').waitFor();
  assert.equal(await page.inputValue('#policy-form input[name=low]'), '0.2');
  assert.equal(await page.inputValue('#policy-form input[name=high]'), String(pol.effective.high));
  assert.equal(await page.inputValue('#policy-form select[name=mode]'), 'auto');
  assert.equal(await page.locator('#policy-form input[name=low]').getAttribute('placeholder'), null, 'a value, not a placeholder');
  assert.match(await page.locator('#policy-history tr', { hasText: 'TICKET-17' }).locator('td').last().innerText(), /^console$/);

  step('each channel says which condition of the rule holds it now');
  const why = page.locator('#rule-now tr[data-channel=app] td[data-k=why]');
  await why.waitFor();
  assert.match(await why.innerText(), /claims < min_claims 100/);
  assert.match(await page.locator('#rule-now .verdict').innerText(), /^No move now: /);

  step('"Back to the defaults" asks first; Cancel keeps the policy');
  await page.click('#policy-reset');
  await page.locator('#reset-confirm').waitFor();
  assert.match(await page.locator('#reset-confirm').innerText(), /mode, low/);
  await page.locator('#reset-confirm button', { hasText: 'Cancel' }).click();
  assert.equal(await page.locator('#reset-confirm').count(), 0);
  assert.equal((await api('GET', `/v1/templates/${tpl}/quota-policy`)).body.effective.mode, 'auto', 'nothing was reset');

  step('a preview shows what the rule would do with the new values; saved, the rule (auto) makes that transfer');
  const change = { min_claims: 1, min_age_seconds: 0, low: 0.48, high: 0.49 };
  for (const [k, v] of Object.entries(change)) await page.fill(`#policy-form input[name=${k}]`, String(v));
  await page.click('#policy-preview-button');
  await page.locator('#policy-preview-result').waitFor();
  const previewed = (await api('POST', `/v1/templates/${tpl}/quota-policy/preview`, change)).body;
  assert.ok(previewed.moves.length > 0, 'the change moves quota: ' + JSON.stringify(previewed));
  const shownMoves = await page.$$eval('#policy-preview-result .rule-moves tr[data-from]',
    (trs) => trs.map((tr) => ({ from: tr.dataset.from, to: tr.dataset.to, amount: Number(tr.dataset.amount) })));
  assert.deepEqual(shownMoves, previewed.moves.map(({ from, to, amount }) => ({ from, to, amount })));
  assert.equal((await api('GET', `/v1/templates/${tpl}/quota-policy`)).body.effective.min_claims, 100, 'a preview saves nothing');
  await page.screenshot({ path: path.join(out, 'policy-preview.png'), fullPage: true });
  await page.fill('#policy-form input[name=changed_by]', 'e2e-operator');
  await page.fill('#policy-form input[name=reason]', 'TICKET-18 as previewed');
  await page.click('#policy-form button[type=submit]');
  await page.locator('#policy-history tr', { hasText: 'TICKET-18 as previewed' }).waitFor();
  await page.locator('#policy-result .ok', { hasText: 'Policy changed.' }).waitFor();
  assert.match(await page.locator('#rule-now .muted').first().innerText(), /min_claims 1 · low 0\.48 · high 0\.49/,
    'once saved, the rule is explained with the saved policy');
  await waitUntil(async () => {
    const chs = (await api('GET', `/v1/templates/${tpl}/channels`)).body.channels;
    return previewed.moves.every((m) => {
      const t = chs.find((c) => c.channel === m.to).last_transfer;
      return t && t.from === m.from && t.amount === m.amount;
    });
  }, 10000, 'the rule makes the previewed transfer', async () => JSON.stringify((await api('GET', `/v1/templates/${tpl}/channels`)).body.channels.map((c) => c.last_transfer)));

  step('anomalies: the injected illegal transition, with its coupon and binlog position, acknowledged with a reason; its open series goes quiet');
  await page.goto(origin + '/console/#/anomalies');
  await page.fill('#anomaly-template', String(tpl));
  await page.selectOption('#anomaly-state', 'open');
  await page.click('#anomaly-filters button[type=submit]');
  const finding = page.locator('#findings tr[data-kind=illegal_transition]', { hasText: `coupon ${anomalyCoupon}` });
  await finding.waitFor();
  assert.match(await finding.locator('td[data-k=where]').innerText(), /binlog \S+:\d+/);
  assert.equal(await finding.locator('a.coupon-link').getAttribute('href'), `#/lookup/coupon/${anomalyCoupon}`);
  const openSeries = async () => {
    const text = await (await fetch(cdcMetrics)).text();
    const line = text.split('\n').find((l) => l.startsWith('couponlink_findings{') && l.includes('kind="illegal_transition"') && l.includes('state="open"'));
    return line ? Number(line.split(' ').pop()) : NaN;
  };
  assert.equal(await openSeries(), 1);
  await page.screenshot({ path: path.join(out, 'anomalies.png'), fullPage: true });
  await page.fill('#anomaly-operator', 'e2e-operator');
  await finding.locator('button[data-action=ack]').click();
  await finding.locator('.error', { hasText: 'a reason is required' }).waitFor();
  await finding.locator('input[name=reason]').fill('TICKET-55 the shop set it back by hand');
  await finding.locator('button[data-action=ack]').click();
  await page.locator('#findings', { hasText: 'No finding matches' }).waitFor();
  await page.selectOption('#anomaly-state', 'acknowledged');
  await page.click('#anomaly-filters button[type=submit]');
  await finding.waitFor();
  assert.match(await finding.locator('td[data-k=lifecycle]').innerText(), /acknowledged by admin for e2e-operator .*: TICKET-55/);
  assert.equal(await openSeries(), 0, 'the alert rule counts the open ones only');

  step('the cdc sees the same illegal transition again: the finding stays acknowledged, seen twice, its open series stays 0');
  assert.match(await finding.locator('td[data-k=seen]').innerText(), /\(1×/);
  const whereBefore = await finding.locator('td[data-k=where]').innerText();
  const again = await fetch(anomalyAgain, { method: 'POST' });
  assert.equal(again.status, 204, await again.text());
  await page.selectOption('#anomaly-state', ''); // any state: a reopened finding would show too
  await page.click('#anomaly-filters button[type=submit]');
  await finding.locator('td[data-k=seen]', { hasText: '(2×' }).waitFor();
  assert.equal(await finding.count(), 1);
  assert.equal(await finding.locator('td[data-k=state]').innerText(), 'acknowledged');
  assert.notEqual(await finding.locator('td[data-k=where]').innerText(), whereBefore, 'where: the latest occurrence');
  assert.match(await finding.locator('td[data-k=lifecycle]').innerText(), /^acknowledged by admin for e2e-operator [^;]*: TICKET-55[^;]*$/);
  assert.equal(await openSeries(), 0, 'found again as it was: its alert stays quiet');
  await finding.locator('a.coupon-link').click();
  await page.locator(`#lookup-result section.coupon[data-coupon="${anomalyCoupon}"]`).waitFor();
  await page.goto(origin + `/console/#/campaign/${tpl}`);
  await page.locator('#channels tr[data-channel=app] .bar .seg.held').waitFor();

  step('a coupon lookup by user shows its history; a void with reason from it changes the bar');
  const heldBefore = Number(await page.locator('#channels tr[data-channel=app] .bar .seg.held').getAttribute('data-value'));
  await page.goto(origin + '/console/#/lookup');
  await page.fill('#lookup-template', String(tpl));
  await page.fill('#lookup-user', 'e2e-late');
  await page.click('#lookup-by-user button[type=submit]');
  const coupon = page.locator('#lookup-result section.coupon');
  await coupon.waitFor();
  const id = Number(await coupon.getAttribute('data-coupon'));
  assert.equal(await coupon.locator('tr[data-event=claimed]').count(), 1);
  await coupon.locator('input[type=checkbox]').check();
  await page.click('#void-picked');
  await page.locator('#void-form').waitFor();
  assert.equal((await page.inputValue('#void-ids')).trim(), String(id));
  await page.click('#void-form button[type=submit]');
  await page.locator('#void-step .error', { hasText: 'a reason is required' }).waitFor();
  await page.fill('#void-reason', 'fraud ring TICKET-99');
  await page.fill('#void-operator', 'e2e-operator');
  await page.click('#void-form button[type=submit]');
  await page.locator('#void-confirm', { hasText: 'Void 1 coupon for' }).waitFor();
  await page.click('#void-confirm-button');
  await page.locator(`#void-results tr[data-coupon="${id}"][data-result=voided]`).waitFor();
  await page.goto(origin + `/console/#/campaign/${tpl}`);
  await page.locator('#channels tr[data-channel=app]').waitFor();
  await waitUntil(async () => Number(await page.locator('#channels tr[data-channel=app] .bar .seg.held').getAttribute('data-value')) === heldBefore - 1,
    3000, 'the void takes one coupon out of held');
  want = expected((await api('GET', `/v1/templates/${tpl}/channels`)).body.channels);
  await waitUntil(async () => JSON.stringify(pick(await readPage())) === JSON.stringify(want), 3000, 'the page equals the API after the void');

  step('a lookup by coupon id tells its life');
  await page.goto(origin + '/console/#/lookup');
  await page.fill('#lookup-coupon', String(id));
  await page.click('#lookup-by-coupon button[type=submit]');
  await page.locator('#lookup-result tr[data-event=voided]', { hasText: 'fraud ring TICKET-99' }).waitFor();
  await page.locator('#lookup-result tr[data-event=claimed]').waitFor();
  const voided = await page.locator('#lookup-result tr[data-event=voided]').innerText();
  assert.match(voided, /admin for e2e-operator/, 'the void\'s operator: the token\'s name and the one it acted for');
  assert.doesNotMatch(voided, /for e2e-operator:/, 'the reason as written');

  step('reconciliation and health pages render');
  await page.goto(origin + '/console/#/reconcile');
  await page.getByRole('heading', { name: /Open items needing review/ }).waitFor();
  await page.goto(origin + '/console/#/health');
  await page.locator('#health-cdc', { hasText: 'this cdc leads' }).waitFor(); // found without COUPONLINK_CDC_METRICS_URL
  const word = await page.locator('#health-overall').getAttribute('data-word');
  const said = await page.locator('#health-overall').innerText();
  assert.ok(word === 'ok' || word === 'degraded', `the cdc leads and follows the binlog: ok or degraded, not ${word} (${said})`);
  assert.match(said, new RegExp(`^${word}: \\S`), 'the word, then why');
  await page.screenshot({ path: path.join(out, 'health.png'), fullPage: true });

  step('no JavaScript error on the way');
  assert.deepEqual(errors, []);
  console.log(`ok: ${steps.length} steps`);
} finally {
  await browser.close();
}

