// The operator console in headless Chromium, against a running couponlink
// api + cdc with a seeded campaign (started by console/browser_test.go).
// Env: CONSOLE_BASE, CONSOLE_TOKEN, CONSOLE_TEMPLATE, CONSOLE_OUT, CHROMIUM.
import assert from 'node:assert/strict';
import path from 'node:path';
import { chromium } from 'playwright-core';

const base = process.env.CONSOLE_BASE;
const token = process.env.CONSOLE_TOKEN;
const tpl = Number(process.env.CONSOLE_TEMPLATE);
const out = process.env.CONSOLE_OUT;
assert.ok(base && token && tpl && out, 'CONSOLE_BASE, CONSOLE_TOKEN, CONSOLE_TEMPLATE and CONSOLE_OUT are required');

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

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium', args: ['--no-sandbox'] });
const errors = [];
// Responses the test provokes on purpose: the 401 before the token is
// typed, and the 400 of the bad policy value. Chromium logs each as
// "Failed to load resource"; anything else logged as an error fails.
const expectedFailures = { 401: 1, 400: 1 };
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  page.on('pageerror', (e) => errors.push('pageerror: ' + e.message));
  page.on('console', (m) => {
    if (m.type() !== 'error') return;
    const status = (m.text().match(/status of (\d{3})/) || [])[1];
    if (status && expectedFailures[status] > 0 && m.location().url.startsWith(base + '/v1/')) {
      expectedFailures[status]--;
      return;
    }
    errors.push(`console.${m.type()}: ${m.text()} (${m.location().url})`);
  });
  page.on('request', (r) => assert.ok(!r.url().includes(token), `the token must never be in a URL: ${r.url()}`));

  step('the console asks for the token, keeps it in sessionStorage and sends it as a header');
  await page.goto(base + '/console/');
  await page.locator('#token-dialog[open]').waitFor();
  await page.fill('#token-input', token);
  await page.click('#token-form button[value=save]');
  await page.locator(`#campaigns tr[data-template="${tpl}"]`).waitFor();
  assert.equal(await page.evaluate(() => sessionStorage.getItem('couponlink.token')), token);

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

  step('the policy form changes the policy and the history row appears');
  await page.selectOption('#policy-form select[name=mode]', 'auto');
  await page.fill('#policy-form input[name=low]', '0.2');
  await page.fill('#policy-form input[name=changed_by]', 'e2e-operator');
  await page.fill('#policy-form input[name=reason]', 'TICKET-17 move quota to app');
  await page.click('#policy-form button[type=submit]');
  await page.locator('#policy-history tr', { hasText: 'TICKET-17 move quota to app' }).waitFor();
  const hist = await page.locator('#policy-history tr', { hasText: 'TICKET-17' }).innerText();
  assert.match(hist, /e2e-operator/);
  assert.match(hist, /mode default → auto/);
  assert.match(hist, /low default → 0\.2/);
  const pol = (await api('GET', `/v1/templates/${tpl}/quota-policy`)).body;
  assert.equal(pol.effective.mode, 'auto');
  assert.equal(pol.effective.low, 0.2);
  await page.locator('#policy-in-force', { hasText: 'policy in force: auto' }).waitFor();

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

  step('a coupon lookup by user shows its history; a void with reason from it changes the bar');
  const heldBefore = Number(await page.locator('#channels tr[data-channel=app] .bar .seg.held').getAttribute('data-value'));
  await page.goto(base + '/console/#/lookup');
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
  await page.goto(base + `/console/#/campaign/${tpl}`);
  await page.locator('#channels tr[data-channel=app]').waitFor();
  await waitUntil(async () => Number(await page.locator('#channels tr[data-channel=app] .bar .seg.held').getAttribute('data-value')) === heldBefore - 1,
    3000, 'the void takes one coupon out of held');
  want = expected((await api('GET', `/v1/templates/${tpl}/channels`)).body.channels);
  await waitUntil(async () => JSON.stringify(pick(await readPage())) === JSON.stringify(want), 3000, 'the page equals the API after the void');

  step('a lookup by coupon id tells its life');
  await page.goto(base + '/console/#/lookup');
  await page.fill('#lookup-coupon', String(id));
  await page.click('#lookup-by-coupon button[type=submit]');
  await page.locator('#lookup-result tr[data-event=voided]', { hasText: 'fraud ring TICKET-99' }).waitFor();
  await page.locator('#lookup-result tr[data-event=claimed]').waitFor();

  step('reconciliation and health pages render');
  await page.goto(base + '/console/#/reconcile');
  await page.getByRole('heading', { name: /Open items needing review/ }).waitFor();
  await page.goto(base + '/console/#/health');
  await page.locator('#health-cdc', { hasText: 'this cdc leads' }).waitFor();
  await page.screenshot({ path: path.join(out, 'health.png'), fullPage: true });

  step('no JavaScript error on the way');
  assert.deepEqual(errors, []);
  console.log(`ok: ${steps.length} steps`);
} finally {
  await browser.close();
}

// waitUntil polls cond every 50 ms until it holds, or fails after ms.
async function waitUntil(cond, ms, what, explain) {
  const end = Date.now() + ms;
  for (;;) {
    if (await cond()) return;
    if (Date.now() > end) assert.fail(`not within ${ms} ms: ${what}${explain ? ' ' + (await explain()) : ''}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
