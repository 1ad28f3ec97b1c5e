// Scenario: the history of this browser's runs survives a reload and runs
// again with the same arguments; the raw result is a collapsible tree that
// copies as JSON; progress and results are announced; the runner works from
// the keyboard; axe-core finds no serious or critical violation.
'use strict';
const lib = require('./lib.js');

lib.main(async (track) => {
  const { browser, context, page, rec } = await lib.open({ width: 1280, height: 1000 });
  track(browser);
  await context.grantPermissions(['clipboard-read', 'clipboard-write']);
  const out = {};
  await page.click(lib.card('demo-tools') + ' button.connect');
  await page.waitForSelector('dialog#confirm[open]');
  out.axeDialog = await lib.axe(page);
  await page.click('#confirm-yes');
  await page.waitForSelector(lib.card('demo-tools') + ' .pill.ok');
  await lib.selectTool(page, 'demo-tools', 'crystal');

  // Keyboard only: type the element, press Enter in the field to run.
  await page.focus(".field[data-path='[\"element\"]'] input");
  await page.keyboard.press('Control+A');
  await page.keyboard.type('Cu');
  await page.evaluate(() => {
    window.__announced = [];
    const a = document.getElementById('announce');
    new MutationObserver(() => window.__announced.push(a.textContent)).observe(a, { childList: true, characterData: true, subtree: true });
  });
  await page.keyboard.press('Enter');
  await page.waitForSelector('#result[data-outcome]');
  await page.waitForFunction(() => window.__announced.length >= 2);
  [out.announcedStart, out.announcedEnd] = await page.evaluate(() => window.__announced);
  out.liveRegion = await page.evaluate(() => {
    const a = document.getElementById('announce');
    return a.getAttribute('role') + ' ' + a.getAttribute('aria-live');
  });
  const firstCall = rec.sent.filter((m) => m.type === 'tools:call')[0];
  out.firstArgs = firstCall.arguments;

  // The picture turns with the arrow keys and zooms with the wheel.
  const SIG = () => {
    const c = document.getElementById('result-canvas');
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let h = 0;
    for (let i = 0; i < d.length; i += 4 * 5) h = (h * 31 + d[i] + d[i + 1] * 7 + d[i + 2] * 13) | 0;
    return h;
  };
  await page.evaluate(`window.__sig = ${SIG}`);
  const changedFrom = async (s0) => page.waitForFunction((x) => window.__sig() !== x, s0, { timeout: 10000 }).then(() => true, () => false);
  const s0 = await page.evaluate(SIG);
  await page.focus('#result-canvas');
  await page.keyboard.press('ArrowLeft');
  out.turnedByKey = await changedFrom(s0);
  const s1 = await page.evaluate(SIG);
  const box = await page.locator('#result-canvas').boundingBox();
  await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
  await page.mouse.wheel(0, -400);
  out.zoomedByWheel = await changedFrom(s1);
  const s2 = await page.evaluate(SIG);
  await page.mouse.down();
  await page.mouse.move(box.x + box.width / 2 + 60, box.y + box.height / 2 + 20, { steps: 4 });
  await page.mouse.up();
  out.turnedByDrag = await changedFrom(s2);

  // The raw result tree and Copy.
  await page.click('#result-json > summary');
  out.treeTop = await page.$$eval('#result-tree > li > details > ul > li', (ls) => ls.map((l) => l.textContent.split(/[:\[{]/)[0].trim()));
  await page.click('#result-tree li[data-key="structure"] > details > summary');
  await page.waitForSelector('#result-tree li[data-key="structure"] > details > ul');
  out.treeStructure = await page.$$eval('#result-tree li[data-key="structure"] > details > ul > li > details > summary', (s) => s.map((x) => x.textContent));
  await page.click('#copy-result');
  await page.waitForFunction(() => /^Copied/.test(document.getElementById('copy-status').textContent));
  const copied = JSON.parse(await page.evaluate(() => navigator.clipboard.readText()));
  out.copiedAtoms = copied.structure.elements.length;
  out.shownAtoms = await page.textContent('#result-summary dd.atoms');
  out.axeAfterRun = await lib.axe(page);
  await lib.shot(page, 'history-1');

  // A reload: the history is still there; Run again from it, by keyboard.
  await page.reload();
  await lib.waitLoaded(page);
  out.historyAfterReload = await page.$$eval('#history li.run', (ls) => ls.map((l) => l.querySelector('strong').textContent + ' ' + l.querySelector('.pill.outcome').textContent));
  out.historyArgs = JSON.parse(await page.textContent('#history li.run .history-args pre'));
  await page.click('#history li.run button.rerun');
  out.rerunWithoutServer = await page.textContent('#history-status');
  await lib.connect(page, 'demo-tools');
  const before = rec.sent.filter((m) => m.type === 'tools:call').length;
  await page.focus('#history li.run button.rerun');
  await page.keyboard.press('Enter');
  await page.waitForFunction((n) => document.querySelectorAll('#history li.run').length === n, 2);
  const calls = rec.sent.filter((m) => m.type === 'tools:call');
  out.rerunSent = calls.length - before;
  out.rerunArgs = calls[calls.length - 1].arguments;
  out.rerunTool = calls[calls.length - 1].tool || calls[calls.length - 1].name;
  out.historyAfterRerun = await page.$$eval('#history li.run', (ls) => ls.map((l) => l.querySelector('strong').textContent + ' ' + l.querySelector('.pill.outcome').textContent));
  out.axeAfterReload = await lib.axe(page);
  await lib.shot(page, 'history-2');
  return Object.assign(out, { consoleErrors: rec.consoleErrors, pageErrors: rec.pageErrors });
});
