// Scenario: run gas_box from the runner: the arguments are pre-filled
// (defaults, first examples, a fresh seed), the progress bar moves, and the
// result is summarised and drawn. SCREENSHOT, if set, receives the page.
'use strict';
const lib = require('./lib.js');

const COUNT = Number(process.env.COUNT || 250);

lib.main(async (track) => {
  const { browser, page, rec } = await lib.open({ width: 1280, height: 1000 });
  track(browser);
  await lib.connect(page, 'demo-tools', { confirm: true });
  await lib.selectTool(page, 'demo-tools', 'gas_box');
  const prefilled = JSON.parse(await page.inputValue('#args'));
  const newSeedVisible = await page.isVisible('#new-seed');
  await page.click('#new-seed');
  const reseeded = JSON.parse(await page.inputValue('#args'));
  const toolOptions = await page.$$eval('#runner-tool optgroup', (gs) => gs.map((g) => ({
    label: g.label, options: [...g.querySelectorAll('option')].map((o) => o.textContent),
  })));

  const args = Object.assign({}, reseeded, { count: COUNT, seed: 12345, delayMs: 2000 });
  await lib.advanced(page);
  await page.fill('#args', JSON.stringify(args, null, 2));
  // Record what the progress bar and its message show while the call runs.
  await page.evaluate(() => {
    window.__seen = [];
    const bar = document.getElementById('call-progress');
    const msg = document.getElementById('call-message');
    new MutationObserver(() => {
      if (bar.hasAttribute('value') && !document.getElementById('call-status').hidden) window.__seen.push({ value: bar.value, max: bar.max, message: msg.textContent, visible: !document.getElementById('call-status').hidden });
    }).observe(document.getElementById('call-status'), { subtree: true, attributes: true, childList: true, characterData: true });
  });
  await page.click('#run');
  await page.waitForSelector('#cancel:not([disabled])');
  await page.waitForSelector('#result[data-outcome]', { timeout: 60000 });
  const seen = await page.evaluate(() => window.__seen);
  const result = await page.evaluate(() => {
    const dl = document.getElementById('result-summary');
    const out = {};
    const dts = dl.querySelectorAll('dt');
    for (const dt of dts) out[dt.textContent] = dt.nextElementSibling.textContent;
    const c = document.getElementById('result-canvas');
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    const colours = new Set();
    for (let i = 0; i < d.length; i += 4 * 7) colours.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
    return {
      outcome: document.getElementById('result').dataset.outcome,
      text: document.getElementById('result-text').textContent,
      summary: out,
      legend: document.getElementById('result-legend').textContent,
      figureVisible: !document.getElementById('result-figure').hidden,
      canvasColours: colours.size,
      statusHidden: document.getElementById('call-status').hidden,
      runEnabled: !document.getElementById('run').disabled,
    };
  });
  const progressFrames = rec.received.filter((m) => m.type === 'tools:progress');
  const callSent = rec.sent.find((m) => m.type === 'tools:call');
  if (process.env.SCREENSHOT) {
    // The README shows the form, not the JSON the test typed.
    await page.evaluate(() => { document.getElementById('advanced').open = false; window.scrollTo(0, 0); });
    await page.screenshot({ path: process.env.SCREENSHOT, fullPage: true });
  }
  await lib.shot(page, 'run');
  return {
    prefilled, newSeedVisible, reseeded, toolOptions, callSent, seen,
    progressFrames: progressFrames.length, result,
    moduleLoads: rec.requests.filter((u) => new URL(u).pathname.endsWith('/builder-tools-client.js')),
    consoleErrors: rec.consoleErrors, pageErrors: rec.pageErrors,
  };
});
