// Scenario: the servers file is edited while the page is open (the bridge
// reads it again): an entry that becomes unusable is shown, with the
// reason, where the server is listed; fixing it brings the server back.
'use strict';
const fs = require('fs');
const lib = require('./lib.js');

lib.main(async (track) => {
  const { browser, page, rec } = await lib.open();
  track(browser);
  const file = process.env.SERVERS_FILE;
  const good = fs.readFileSync(file, 'utf8');
  const cfg = JSON.parse(good);
  const before = await page.textContent(lib.card('demo-tools') + ' .pill.state');
  cfg.mcpServers['demo-tools'] = { url: 'http://tools.example.org/mcp' };
  fs.writeFileSync(file + '.new', JSON.stringify(cfg));
  fs.renameSync(file + '.new', file);
  await page.waitForFunction((sel) => {
    const p = document.querySelector(sel + ' .pill.state');
    return p && p.textContent === 'not usable';
  }, lib.card('demo-tools'));
  const broken = await page.textContent(lib.card('demo-tools'));
  const connectButton = await page.$(lib.card('demo-tools') + ' button.connect') !== null;
  await lib.shot(page, 'runtime-problem');
  fs.writeFileSync(file + '.new', good);
  fs.renameSync(file + '.new', file);
  await page.waitForFunction((sel) => {
    const p = document.querySelector(sel + ' .pill.state');
    return p && p.textContent === 'stopped';
  }, lib.card('demo-tools'));
  const fixed = await page.textContent(lib.card('demo-tools'));
  return { before, broken, connectButton, fixed, consoleErrors: rec.consoleErrors, pageErrors: rec.pageErrors };
});
