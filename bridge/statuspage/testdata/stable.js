// Scenario: the page updates in place. While tools:servers refreshes arrive
// (every 3 s), a focused button on a server card keeps its focus, text
// selected in the card stays selected, and text typed into the arguments
// keeps going in at the caret.
'use strict';
const lib = require('./lib.js');

lib.main(async (track) => {
  const { browser, page, rec } = await lib.open();
  track(browser);
  await lib.connect(page, 'demo-tools', { confirm: true });
  await lib.selectTool(page, 'demo-tools', 'gas_box');
  const replies = () => rec.received.filter((m) => m.type === 'tools:servers' && m.ok).length;
  const refreshes = async (n) => {
    const start = replies();
    await page.waitForFunction(() => true); // let pending frames be recorded
    while (replies() < start + n) await page.waitForTimeout(100);
  };

  // Focus a card's button and select the card's fingerprint.
  const sel = lib.card('demo-tools');
  await page.focus(sel + ' button.use');
  const fingerprint = await page.evaluate((s) => {
    window.__button = document.activeElement;
    const dd = document.querySelector(s + ' dd.fp');
    const r = document.createRange();
    r.selectNodeContents(dd);
    const selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(r);
    return dd.textContent;
  }, sel);
  await refreshes(2);
  const card = await page.evaluate(() => ({
    focusKept: document.activeElement === window.__button && window.__button.isConnected,
    focused: document.activeElement ? document.activeElement.outerHTML.slice(0, 120) : '',
    selected: window.getSelection().toString(),
  }));

  // Type into the arguments across refreshes.
  await lib.advanced(page);
  await page.focus('#args');
  await page.evaluate(() => {
    const a = document.getElementById('args');
    a.value = '{"count": 5, "note": "';
    a.setSelectionRange(a.value.length, a.value.length);
  });
  await page.keyboard.type('typed ');
  await refreshes(1);
  await page.keyboard.type('while ');
  await refreshes(1);
  await page.keyboard.type('updating"}');
  const args = await page.evaluate(() => ({
    value: document.getElementById('args').value,
    focused: document.activeElement && document.activeElement.id,
  }));
  return { fingerprint, card, args, consoleErrors: rec.consoleErrors, pageErrors: rec.pageErrors };
});
