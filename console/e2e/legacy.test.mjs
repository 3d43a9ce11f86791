// The console of a legacy shop in headless Chromium, against a running
// `couponlink api -mapping` over two sources (started by
// console/legacy_browser_test.go). Env: CONSOLE_BASE, CONSOLE_TOKEN,
// CONSOLE_OUT, CHROMIUM, CONSOLE_SHOP (POST /claim?source=, /kill?source=),
// CONSOLE_STATUS (the `couponlink status -json -mapping` command line).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { waitUntil } from './wait.mjs';

const base = process.env.CONSOLE_BASE;
const token = process.env.CONSOLE_TOKEN;
const out = process.env.CONSOLE_OUT;
const shop = process.env.CONSOLE_SHOP;
const statusCmd = (process.env.CONSOLE_STATUS || '').split(' ');
assert.ok(base && token && out && shop && statusCmd.length > 1, 'CONSOLE_BASE, CONSOLE_TOKEN, CONSOLE_OUT, CONSOLE_SHOP and CONSOLE_STATUS are required');

const status = () => JSON.parse(execFileSync(statusCmd[0], statusCmd.slice(1), { encoding: 'utf8' }));
const steps = [];
function step(name) {
  steps.push(name);
  console.log(`- ${name}`);
}

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium', args: ['--no-sandbox'] });
const errors = [];
let tokenTyped = false; // the 401s before it are expected
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  page.on('pageerror', (e) => errors.push('pageerror: ' + e.message));
  page.on('console', (m) => {
    if (m.type() !== 'error') return;
    if (!tokenTyped && m.text().includes('status of 401')) return;
    errors.push(`console.${m.type()}: ${m.text()} (${m.location().url})`);
  });

  step('the campaigns page of a legacy shop: its numbers equal `couponlink status -mapping -json`');
  await page.goto(base + '/console/');
  await page.locator('#token-dialog[open]').waitFor();
  await page.fill('#token-input', token);
  await page.click('#token-form button[value=save]');
  tokenTyped = true;
  const row = page.locator('#legacy-campaigns tr[data-template="1"]');
  await row.waitFor();
  const readRow = () => row.evaluate((tr) => Object.fromEntries([...tr.querySelectorAll('td[data-k]')].map((td) => [td.dataset.k, td.textContent])));
  const fromStatus = (t) => ({
    budget: t.budget.toLocaleString('en-US'), remaining: t.remaining.toLocaleString('en-US'),
    taken: (t.held + t.used + t.frozen).toLocaleString('en-US'), claimable: t.claimable.toLocaleString('en-US'),
    held: String(t.held), used: String(t.used), frozen: String(t.frozen), sources: t.sources.join('+') + (t.left_out && t.left_out.length ? ` (${t.left_out.join(', ')} left out)` : ''),
  });
  const pick = (r) => Object.fromEntries(Object.keys(fromStatus({ budget: 0, remaining: 0, held: 0, used: 0, frozen: 0, claimable: 0, sources: [] })).map((k) => [k, r[k]]));
  let want = fromStatus(status().templates.find((t) => t.template === 1));
  await waitUntil(async () => JSON.stringify(pick(await readRow())) === JSON.stringify(want), 3000, 'the page shows status -json',
    async () => JSON.stringify({ page: pick(await readRow()), status: want }));
  assert.equal(want.sources, 'east+west');
  assert.equal(await page.locator('#sources-banner').count(), 0, 'every source is up: no banner');
  assert.equal(await page.locator('#legacy-campaign button, #legacy-campaign form, #legacy-campaign input').count(), 0,
    'no write control over the shop\'s tables');
  assert.ok(await page.locator('nav a[data-nav=void]').isHidden(), 'no Void for a legacy shop');
  await page.screenshot({ path: path.join(out, 'legacy-campaigns.png'), fullPage: true });

  step("a write in the shop's tables shows on the page within 2 s");
  const before = Number((await readRow()).held);
  const at = Date.now();
  assert.equal((await fetch(shop + '/claim?source=west', { method: 'POST' })).status, 200);
  await waitUntil(async () => Number((await readRow()).held) === before + 1, 2000, 'the claim on west shows');
  console.log(`  shown after ${Date.now() - at} ms`);

  step("a template's page: its channels by their labels, each source's part, no write control");
  await page.click('#legacy-campaigns tr[data-template="1"] a >> nth=1');
  await page.locator('#channels tr[data-channel="1"]').waitFor();
  assert.match(await page.locator('#channels tr[data-channel="1"] th').innerText(), /^app \(1\)$/);
  assert.match(await page.locator('#channels tr[data-channel="2"] th').innerText(), /^mini program \(2\)$/);
  await page.locator('#parts tr[data-source=east]').waitFor();
  await page.locator('#parts tr[data-source=west]').waitFor();
  assert.equal(await page.locator('#legacy-campaign button, #legacy-campaign form, #legacy-campaign input').count(), 0,
    'no write control over the shop\'s tables');
  const one = status().templates.find((t) => t.template === 1);
  for (const c of one.channels) {
    await waitUntil(async () => (await page.locator(`#channels tr[data-channel="${c.channel}"] td[data-k=held]`).innerText()) === String(c.held),
      3000, `channel ${c.channel}'s held equals status -json's`);
  }
  await page.screenshot({ path: path.join(out, 'legacy-campaign.png'), fullPage: true });

  step("a template's quota policy, couponlink's own: modes off and signal only, its preview says what the mapping does not give");
  await page.locator('#policy-form select[name=mode]').waitFor();
  assert.deepEqual(await page.locator('#policy-form select[name=mode] option').allInnerTexts(), ['off', 'signal']);
  await page.locator('#rule-now [data-k=stop]', { hasText: "the channels' quotas are unknown" }).waitFor();
  await page.locator('#rule-now [data-k=unknown]', { hasText: 'no per-channel budget' }).first().waitFor();
  await page.locator('#rule-now tr[data-channel="1"] th', { hasText: 'app (1)' }).waitFor(); // by its label
  await page.selectOption('#policy-form select[name=mode]', 'off');
  await page.click('#policy-preview-button');
  await page.locator('#policy-preview-result [data-k=stop]', { hasText: 'policy is off' }).waitFor();
  await page.fill('#policy-form input[name=changed_by]', 'e2e');
  await page.fill('#policy-form input[name=reason]', 'the legacy policy form');
  await page.click('#policy-form button[type=submit]');
  await page.locator('#policy-result', { hasText: 'Policy changed.' }).waitFor();
  assert.equal(await page.locator('#policy-view tr >> nth=1 >> td >> nth=0').innerText(), 'off', 'in force: off');
  await page.locator('#policy-history tr', { hasText: 'the legacy policy form' }).waitFor();
  assert.match(await page.locator('#policy-history tr', { hasText: 'the legacy policy form' }).locator('td').last().innerText(), /^console$/,
    "the history names who changed the legacy policy, why, and that it came through the console");
  await page.click('#policy-reset'); // asks first; Cancel leaves the override
  await page.locator('#reset-confirm', { hasText: 'Drop this template\'s own mode' }).waitFor();
  await page.locator('#reset-confirm button', { hasText: 'Cancel' }).click();
  assert.equal(await page.locator('#reset-confirm').count(), 0);
  assert.equal(await page.locator('#policy-view tr >> nth=1 >> td >> nth=0').innerText(), 'off', 'Cancel: still off');
  await page.screenshot({ path: path.join(out, 'legacy-policy.png'), fullPage: true });
  await page.fill('#policy-form input[name=changed_by]', 'e2e');
  await page.fill('#policy-form input[name=reason]', 'the legacy reset');
  await page.click('#policy-reset');
  await page.click('#reset-confirm-button');
  await page.locator('#policy-result', { hasText: 'The template follows the defaults again.' }).waitFor();
  await page.locator('#policy-history tr', { hasText: 'the legacy reset' }).waitFor();
  assert.equal(await page.locator('#policy-history tr', { hasText: 'the legacy reset' }).locator('td').nth(2).innerText(), 'reset');
  const defaults = await page.locator('#policy-view tr >> nth=3 >> td >> nth=0').innerText();
  assert.equal(await page.locator('#policy-view tr >> nth=1 >> td >> nth=0').innerText(), defaults, 'in force: the defaults\' mode again');

  step('a source killed: a banner names it and every sum says it leaves it out');
  assert.equal((await fetch(shop + '/kill?source=west', { method: 'POST' })).status, 200);
  await page.goto(base + '/console/#/campaigns');
  await page.locator('#sources-banner', { hasText: 'Source west is down' }).waitFor({ timeout: 15000 });
  await waitUntil(async () => (await readRow()).sources === 'east (west left out)', 5000, 'the row names the source left out');
  want = fromStatus(status().templates.find((t) => t.template === 1));
  await waitUntil(async () => JSON.stringify(pick(await readRow())) === JSON.stringify(want), 5000, 'the page shows status -json with west left out',
    async () => JSON.stringify({ page: pick(await readRow()), status: want }));
  await page.screenshot({ path: path.join(out, 'legacy-source-down.png'), fullPage: true });

  step('no JavaScript error on the way');
  assert.deepEqual(errors, []);
  console.log(`ok: ${steps.length} steps`);
} finally {
  await browser.close();
}

