// Scenario: a server whose serverInfo name and tool name, title,
// description and error text contain markup has it shown as text: no
// element is created from it, no handler runs, and only data: image icons
// are rendered.
'use strict';
const lib = require('./lib.js');

const PAYLOAD = process.env.PAYLOAD;

lib.main(async (track) => {
  const { browser, page, rec } = await lib.open();
  track(browser);
  await lib.connect(page, 'evil', { confirm: true });
  const tools = await page.$$eval('#runner-tool option', (os) => os.map((o) => ({ value: o.value, text: o.textContent })));
  const evil = tools.find((t) => t.value.includes('<img'));
  await page.selectOption('#runner-tool', evil.value);
  const toolInfo = await page.locator('#tool-info').innerText();
  const imgsEvil = await page.$$eval('img', (is) => is.map((i) => i.getAttribute('src')));
  const cardText = await page.locator(lib.card('evil')).innerText();

  await page.selectOption('#runner-tool', 'iconic');
  const imgsIconic = await page.$$eval('img', (is) => is.map((i) => i.getAttribute('src')));
  await page.selectOption('#runner-tool', 'withdoc');
  const prefill = JSON.parse(await page.inputValue('#args'));
  await page.selectOption('#runner-tool', 'badicon');
  const imgsBadIcon = await page.$$eval('img', (is) => is.map((i) => i.getAttribute('src')));

  // A tool error whose text carries the payload.
  await page.selectOption('#runner-tool', 'toolerror');
  await lib.advanced(page);
  await page.fill('#args', JSON.stringify({ tag: PAYLOAD }));
  await page.click('#run');
  await page.waitForSelector('#result[data-outcome]');
  const errOutcome = await page.getAttribute('#result', 'data-outcome');
  const errText = await page.textContent('#result-error');
  // The evil tool itself answers like echo: its structured content is shown raw.
  await page.selectOption('#runner-tool', evil.value);
  await page.fill('#args', JSON.stringify({ note: PAYLOAD }));
  await page.click('#run');
  await page.waitForFunction(() => document.getElementById('result').dataset.outcome === 'ok');
  const raw = await page.textContent('#result-raw');
  await page.waitForTimeout(300); // an injected onerror would have fired by now
  const pwned = await page.evaluate(() => window.__pwned === 1);
  const imgsEnd = await page.$$eval('img', (is) => is.map((i) => i.getAttribute('src')));
  const bodyText = await page.locator('body').innerText();
  await lib.shot(page, 'xss');
  return {
    tools, toolInfo, cardText, prefill, imgsEvil, imgsIconic, imgsBadIcon, imgsEnd, errOutcome, errText, raw, pwned,
    payloadVisible: bodyText.includes(PAYLOAD),
    consoleErrors: rec.consoleErrors, pageErrors: rec.pageErrors,
  };
});
