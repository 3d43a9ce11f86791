// What the browser tests share.
import assert from 'node:assert/strict';

// waitUntil polls cond every 50 ms until it holds, or fails after ms,
// saying what, and explain()'s answer when given.
export async function waitUntil(cond, ms, what, explain) {
  const end = Date.now() + ms;
  for (;;) {
    if (await cond()) return;
    if (Date.now() > end) assert.fail(`not within ${ms} ms: ${what}${explain ? ' ' + (await explain()) : ''}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
