// Scenario: the page's socket is cut in the middle of a call (a TCP relay
// between Chromium and the bridge drops every connection, as a restarting
// proxy or a sleeping laptop does). The client module resumes its page
// session by itself: the runner shows "reconnecting…", then the call's
// real result, and the call was sent once.
//   DROP  a URL that cuts the relay
'use strict';
const lib = require('./lib.js');

lib.main(async (track) => {
  const { browser, page, rec } = await lib.open();
  track(browser);
  await lib.connect(page, 'demo-tools', { confirm: true });
  await lib.selectTool(page, 'demo-tools', 'gas_box');
  const args = JSON.parse(await page.inputValue('#args'));
  await lib.advanced(page);
  await page.fill('#args', JSON.stringify(Object.assign({}, args, { count: 42, delayMs: 4000 })));
  // Every state the socket's pill shows, however briefly.
  await page.evaluate(() => {
    const el = document.getElementById('socket-state');
    window.__states = [el.textContent];
    new MutationObserver(() => {
      if (window.__states[window.__states.length - 1] !== el.textContent) window.__states.push(el.textContent);
    }).observe(el, { childList: true, characterData: true, subtree: true });
  });
  await page.click('#run');
  await page.waitForFunction(() => document.getElementById('call-progress').hasAttribute('value'));
  const cutAt = Date.now();
  await fetch(process.env.DROP);
  await page.waitForSelector('#result[data-outcome]', { timeout: 60000 });
  const elapsedMs = Date.now() - cutAt;
  await page.waitForFunction(() => /resumed/.test(document.getElementById('socket-state').textContent));
  const states = await page.evaluate(() => window.__states);
  const outcome = await page.getAttribute('#result', 'data-outcome');
  const atoms = await page.evaluate(() => {
    const dt = [...document.querySelectorAll('#result-summary dt')].find((d) => d.textContent === 'Atoms');
    return dt ? dt.nextElementSibling.textContent : '';
  });
  const error = await page.textContent('#result-error').catch(() => '');
  await lib.shot(page, 'resume');
  return {
    outcome, atoms, error, states, elapsedMs, sockets: rec.sockets,
    callsSent: rec.sent.filter((m) => m.type === 'tools:call').length,
    hellos: rec.sent.filter((m) => m.type === 'tools:hello').map((m) => ({ resume: !!m.resume })),
    consoleErrors: rec.consoleErrors, pageErrors: rec.pageErrors,
  };
});
