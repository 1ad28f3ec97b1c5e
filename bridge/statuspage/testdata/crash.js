// Scenario: a server that writes to stderr and exits while starting shows
// its latest stderr line while starting, then the failure with its stderr
// tail; a server that exits during a call (bridgetest "crash") fails the
// call and its tools:closed message is listed among the recent errors.
'use strict';
const lib = require('./lib.js');

lib.main(async (track) => {
  const { browser, page, rec } = await lib.open();
  track(browser);
  await lib.connect(page, 'crashy', { confirm: true, wait: false });
  await page.waitForFunction((sel) => {
    const l = document.querySelector(sel + ' .stderr-line');
    return l && l.textContent.includes('loading models');
  }, lib.card('crashy'));
  const startingText = await page.textContent(lib.card('crashy') + ' .starting');
  await page.waitForSelector(lib.card('crashy') + ' .last-error');
  await page.waitForFunction((sel) => document.querySelector(sel + ' .pill.state').textContent === 'failed', lib.card('crashy'));
  const failed = await page.evaluate((sel) => ({
    state: document.querySelector(sel + ' .pill.state').textContent,
    lastError: document.querySelector(sel + ' .last-error pre').textContent,
    connectButton: !!document.querySelector(sel + ' button.connect'),
  }), lib.card('crashy'));
  // The stderr pane, opened, survives the refreshes that keep it current.
  await page.waitForSelector(lib.card('crashy') + ' .stderr-pane');
  await page.click(lib.card('crashy') + ' .stderr-pane > summary');
  const stderrPane = await page.textContent(lib.card('crashy') + ' .stderr-pane[open] pre');
  const replies = () => rec.received.filter((m) => m.type === 'tools:servers').length;
  const seen = replies();
  while (replies() < seen + 2) await page.waitForTimeout(200);
  const stderrPaneOpenAfterRefresh = await page.$(lib.card('crashy') + ' .stderr-pane[open]') !== null;
  const errors = await page.locator('#errors').innerText();
  await lib.shot(page, 'crash-start');

  await lib.connect(page, 'flaky', { confirm: true });
  await lib.selectTool(page, 'flaky', 'crash');
  await page.click('#run');
  await page.waitForSelector('#result[data-outcome]');
  const callOutcome = await page.getAttribute('#result', 'data-outcome');
  const callError = await page.textContent('#result-error');
  await page.waitForFunction(() => /flaky stopped/.test(document.getElementById('errors').innerText));
  const errorsAfter = await page.locator('#errors').innerText();
  const closed = rec.received.filter((m) => m.type === 'tools:closed');
  await page.waitForFunction((sel) => !document.querySelector(sel + ' .pill.ok'), lib.card('flaky'));
  await lib.shot(page, 'crash-call');
  return {
    startingText, failed, stderrPane, stderrPaneOpenAfterRefresh, errors, callOutcome, callError, errorsAfter, closed,
    progressDuringStart: rec.received.filter((m) => m.type === 'tools:progress').map((m) => m.message),
    consoleErrors: rec.consoleErrors, pageErrors: rec.pageErrors,
  };
});
