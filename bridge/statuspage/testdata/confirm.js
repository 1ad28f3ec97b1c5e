// Scenario: the confirmation dialog appears before the first connect to a
// fingerprint (Cancel sends nothing), the approval the bridge returns is
// stored, and after a reload the connect carries it and no dialog opens.
'use strict';
const lib = require('./lib.js');

const SERVER = process.env.SERVER;

lib.main(async (track) => {
  const { browser, page, rec } = await lib.open();
  track(browser);
  const connects = () => rec.sent.filter((m) => m.type === 'tools:connect');

  // First attempt: the dialog opens, nothing is sent; Cancel.
  await page.click(lib.card(SERVER) + ' button.connect');
  await page.waitForSelector('dialog#confirm[open]');
  const dialogText = await page.locator('dialog#confirm').innerText();
  const connectsWhileAsking = connects().length;
  await page.click('#confirm-no');
  await page.waitForSelector('dialog#confirm', { state: 'hidden' });
  // A round trip after the dialog closed: a connect sent on Cancel would be
  // recorded before this tools:servers request.
  const n = rec.sent.length;
  await page.click('#refresh');
  await page.waitForFunction(() => true);
  while (!rec.sent.slice(n).some((m) => m.type === 'tools:servers')) await page.waitForTimeout(20);
  const connectsAfterCancel = connects().length;

  // Second attempt: confirm.
  await page.click(lib.card(SERVER) + ' button.connect');
  await page.waitForSelector('dialog#confirm[open]');
  await page.click('#confirm-yes');
  await page.waitForSelector(lib.card(SERVER) + ' .pill.ok');
  const first = connects()[0];
  const firstReply = rec.received.find((m) => m.type === 'tools:connect' && m.id === first.id);
  const stored = await page.evaluate((fp) => localStorage.getItem('megane-builder-tools.approval.' + fp), first.fingerprint);
  await lib.shot(page, 'confirm-1');

  // Reload: a new socket, the same browser storage. Record any dialog.
  await page.reload();
  await lib.waitLoaded(page);
  await page.evaluate(() => {
    window.__dialogs = 0;
    const show = HTMLDialogElement.prototype.showModal;
    HTMLDialogElement.prototype.showModal = function () { window.__dialogs++; return show.call(this); };
  });
  const before = connects().length;
  await page.click(lib.card(SERVER) + ' button.connect');
  await page.waitForSelector(lib.card(SERVER) + ' .pill.ok');
  const second = connects()[before];
  const dialogsAfterReload = await page.evaluate(() => window.__dialogs);
  const dialogOpen = await page.evaluate(() => document.getElementById('confirm').open);
  await lib.shot(page, 'confirm-2');

  // approvals reset: the stored receipt is refused; the page asks again.
  const fp = first.fingerprint;
  await page.click(lib.card(SERVER) + ' button.disconnect');
  await page.waitForSelector(lib.card(SERVER) + ' button.connect');
  const output = require('child_process').execFileSync(process.env.RESET_BIN,
    ['approvals', 'reset', '--key', process.env.RESET_KEY], { encoding: 'utf8' });
  const n2 = connects().length;
  await page.click(lib.card(SERVER) + ' button.connect');
  await page.waitForSelector('dialog#confirm[open]');
  const refused = rec.received.find((m) => m.type === 'tools:connect' && m.id === connects()[n2].id);
  const reason = await page.textContent('#confirm-reason');
  const storedBetween = await page.evaluate((f) => localStorage.getItem('megane-builder-tools.approval.' + f) || '', fp);
  await lib.shot(page, 'confirm-3');
  await page.click('#confirm-yes');
  await page.waitForSelector(lib.card(SERVER) + ' .pill.ok');
  const third = connects()[connects().length - 1];
  const storedAfter = await page.evaluate((f) => localStorage.getItem('megane-builder-tools.approval.' + f) || '', fp);
  const reset = {
    output, reason, storedBetween, storedAfter, confirmed: third.confirmed,
    replyCode: refused && refused.error ? refused.error.code : '',
  };
  return {
    reset,
    dialogText, connectsWhileAsking, connectsAfterCancel,
    first, firstReplyOK: !!(firstReply && firstReply.ok), firstReplyApproval: firstReply && firstReply.approval,
    stored, second, dialogsAfterReload, dialogOpen,
    consoleErrors: rec.consoleErrors, pageErrors: rec.pageErrors,
  };
});
