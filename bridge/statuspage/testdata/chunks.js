// Scenario: messages larger than the bridge's frame limit travel as
// tools:chunk frames both ways. The page sends a call whose arguments hold
// 1.5 million non-BMP characters (so a careless cut would split a surrogate
// pair) to the bridgetest echo tool, whose reply comes back chunked; then a
// 400000-atom structure from the bridgetest atoms tool.
'use strict';
const lib = require('./lib.js');

lib.main(async (track) => {
  const { browser, page, rec } = await lib.open();
  track(browser);
  await lib.connect(page, 'flaky', { confirm: true });
  await lib.selectTool(page, 'flaky', 'echo');
  await page.evaluate(() => {
    document.getElementById('args').value = JSON.stringify({ blob: '\u{1F600}'.repeat(1500000) });
  });
  await page.click('#run');
  await page.waitForSelector('#result[data-outcome]', { timeout: 90000 });
  const echo = await page.evaluate(() => ({
    outcome: document.getElementById('result').dataset.outcome,
    error: document.getElementById('result-error').textContent,
    rawStart: document.getElementById('result-raw').textContent.slice(0, 40),
  }));
  const sentChunks = rec.sent.filter((m) => m.type === 'tools:chunk').map((m) => ({ id: m.id, seq: m.seq, count: m.count, size: m.size }));
  // The page's client asks for binary chunk frames: a head, then the data.
  const chunkFrames = () => rec.received.filter((m) => m.type === 'tools:chunk' || m.binary !== undefined).length;
  const binaryFrames = () => rec.received.filter((m) => m.binary !== undefined).length;
  const receivedChunks1 = chunkFrames();

  await lib.selectTool(page, 'flaky', 'atoms');
  const args = JSON.parse(await page.inputValue('#args'));
  await lib.advanced(page);
  await page.fill('#args', JSON.stringify(Object.assign(args, { n: 400000 })));
  await page.click('#run');
  await page.waitForFunction(() => document.getElementById('result').dataset.outcome === 'ok' && !document.getElementById('result-figure').hidden, null, { timeout: 90000 });
  const atoms = await page.evaluate(() => {
    const dt = [...document.querySelectorAll('#result-summary dt')].find((d) => d.textContent === 'Atoms');
    return dt ? dt.nextElementSibling.textContent : '';
  });
  const receivedChunks2 = chunkFrames() - receivedChunks1;
  const errors = await page.locator('#errors').innerText();
  await lib.shot(page, 'chunks');
  return {
    echo, sentChunks, receivedChunks1, receivedChunks2, atoms, errors, binaryFrames: binaryFrames(),
    binaryHeads: rec.received.filter((m) => m.type === 'tools:chunk' && m.binary === true).length,
    // A streamed reply's head says so; its end says whether it was whole.
    streamHeads: rec.received.filter((m) => m.type === 'tools:chunk' && m.stream === true).length,
    streamEnds: rec.received.filter((m) => m.type === 'tools:chunk' && m.end === true && m.ok === true).length,
    consoleErrors: rec.consoleErrors, pageErrors: rec.pageErrors,
  };
});
