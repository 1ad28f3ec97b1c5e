// Scenario: a tool error (isError) is shown as the tool's message and
// listed in Recent errors; then the bridge stops (SIGTERM to BRIDGE_PID) and
// the page says so, without claiming to know the servers' states.
'use strict';
const lib = require('./lib.js');

lib.main(async (track) => {
  const { browser, page, rec } = await lib.open();
  track(browser);
  await lib.connect(page, 'flaky', { confirm: true });
  await lib.selectTool(page, 'flaky', 'toolerror');
  await lib.advanced(page);
  await page.fill('#args', '{}');
  await page.click('#run');
  await page.waitForSelector('#result[data-outcome]');
  const outcome = await page.getAttribute('#result', 'data-outcome');
  const message = await page.textContent('#result-error');
  const errors = await page.textContent('#errors');

  process.kill(Number(process.env.BRIDGE_PID), 'SIGTERM');
  await page.waitForFunction(() => document.getElementById('socket-state').textContent !== 'connected', null, { timeout: 30000 });
  await lib.shot(page, 'stopped');
  const socket = await page.textContent('#socket-state');
  const banner = await page.textContent('#socket-banner');
  const pills = await page.$$eval('article.server .pill.state', (ps) => ps.map((p) => p.textContent).join(','));
  return { outcome, message, errors, socket, banner, pills, consoleErrors: rec.consoleErrors, pageErrors: rec.pageErrors };
});
