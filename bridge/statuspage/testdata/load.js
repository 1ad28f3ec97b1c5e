// Scenario: the page loads through both prefixes and shows the bridge, its
// servers and the configuration problems. PAGE_URL2 is the same page under
// the prefix jupyter-server-proxy leaves (/builder-tools/).
'use strict';
const lib = require('./lib.js');

lib.main(async (track) => {
  const { browser, page, rec } = await lib.open();
  track(browser);
  const read = () => page.evaluate(() => ({
    name: document.getElementById('bridge-name').textContent,
    version: document.getElementById('bridge-version').textContent,
    protocol: document.getElementById('bridge-protocol').textContent,
    user: document.getElementById('bridge-user').textContent,
    socket: document.getElementById('socket-state').textContent,
    servers: [...document.querySelectorAll('article.server')].map((a) => ({
      name: a.dataset.server,
      state: a.querySelector('.pill.state').textContent,
      text: a.innerText,
    })),
    problems: document.getElementById('problems').innerText,
    settings: document.getElementById('settings-files').textContent,
    errors: document.getElementById('errors').innerText,
  }));
  // The settings line comes from its own request (tools:openSettings),
  // which may answer after the first tools:servers is rendered.
  const settled = () => page.waitForFunction(() => document.getElementById('settings-files').textContent !== '');
  await settled();
  const first = await read();
  await lib.shot(page, 'load');
  await page.goto(process.env.PAGE_URL2);
  await lib.waitLoaded(page);
  await settled();
  const second = await read();
  return {
    first, second,
    wsURLs: rec.sockets,
    consoleErrors: rec.consoleErrors, pageErrors: rec.pageErrors,
  };
});
