// Scenario: Cancel stops a long gas_box call (delayMs makes it take a
// minute): the page sends tools:cancel, shows the call cancelled, the bridge
// reports no call in flight, and the next call works.
'use strict';
const lib = require('./lib.js');

lib.main(async (track) => {
  const { browser, page, rec } = await lib.open();
  track(browser);
  await lib.connect(page, 'demo-tools', { confirm: true });
  await lib.selectTool(page, 'demo-tools', 'gas_box');
  const args = JSON.parse(await page.inputValue('#args'));
  await lib.advanced(page);
  await page.fill('#args', JSON.stringify(Object.assign({}, args, { count: 100, delayMs: 60000 })));
  await page.click('#run');
  // Wait until the server is working on it (the first progress is shown).
  await page.waitForFunction(() => document.getElementById('call-progress').hasAttribute('value'));
  // The card counts it (the page asks tools:servers when a call starts).
  await page.waitForFunction((sel) => /1 call in flight/.test(document.querySelector(sel).innerText), lib.card('demo-tools'));
  const callsDuring = await page.locator(lib.card('demo-tools')).innerText();
  const started = Date.now();
  await page.click('#cancel');
  await page.waitForSelector('#result[data-outcome]');
  const elapsedMs = Date.now() - started;
  const outcome = await page.getAttribute('#result', 'data-outcome');
  const message = await page.textContent('#result-error');
  const runEnabled = await page.isEnabled('#run');
  // The bridge forgets the call: the card says 0 calls in flight.
  await page.click('#refresh');
  await page.waitForFunction((sel) => /0 calls in flight/.test(document.querySelector(sel).innerText), lib.card('demo-tools'));
  const call = rec.sent.find((m) => m.type === 'tools:call');
  const cancel = rec.sent.find((m) => m.type === 'tools:cancel');
  const callReply = rec.received.find((m) => m.type === 'tools:call' && m.id === call.id);
  const cancelReply = rec.received.find((m) => m.type === 'tools:cancel' && m.id === call.id);
  await lib.shot(page, 'cancel');

  // The server carries on: a short call succeeds.
  await page.fill('#args', JSON.stringify(Object.assign({}, args, { count: 7, delayMs: 0 })));
  await page.click('#run');
  await page.waitForFunction(() => {
    const r = document.getElementById('result');
    return r.dataset.outcome === 'ok';
  });
  const atomsAfter = await page.evaluate(() => {
    const dt = [...document.querySelectorAll('#result-summary dt')].find((d) => d.textContent === 'Atoms');
    return dt ? dt.nextElementSibling.textContent : '';
  });
  // The card counts both calls since the bridge started (the cancelled one
  // is no failure), and their bytes.
  await page.click('#refresh');
  await page.waitForFunction((sel) => /2 calls, 0 failed/.test(document.querySelector(sel).innerText), lib.card('demo-tools'));
  const countersAfter = await page.locator(lib.card('demo-tools')).innerText();
  return {
    callsDuring, outcome, message, runEnabled, elapsedMs, call, cancel, callReply, cancelReply, atomsAfter, countersAfter,
    consoleErrors: rec.consoleErrors, pageErrors: rec.pageErrors,
  };
});
