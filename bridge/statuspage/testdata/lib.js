// Shared helpers of the status page's browser scenarios. The Go tests
// (browser_test.go) run each scenario with node and read the one JSON object
// it prints on stdout. Environment:
//   PLAYWRIGHT_CORE  absolute path of the playwright-core package
//   CHROMIUM         the browser executable (Debian's /usr/bin/chromium)
//   PAGE_URL         the status page, with ?token=
//   SHOTS            a directory for screenshots (<scenario>.png)
'use strict';

const fs = require('fs');
const path = require('path');
const pw = require(process.env.PLAYWRIGHT_CORE);

const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

// open launches chromium with a fresh profile and opens PAGE_URL. It records
// every WebSocket frame the page sends and receives, console errors and
// page errors.
async function open(viewport) {
  const browser = await pw.chromium.launch({ executablePath: process.env.CHROMIUM, args: ARGS });
  const context = await browser.newContext({ viewport: viewport || { width: 1280, height: 900 } });
  const page = await context.newPage();
  const rec = { sent: [], received: [], consoleErrors: [], pageErrors: [], sockets: 0, requests: [] };
  page.on('requestfinished', (r) => rec.requests.push(r.url()));
  page.on('console', (m) => { if (m.type() === 'error') rec.consoleErrors.push(m.text()); });
  page.on('pageerror', (e) => rec.pageErrors.push(String(e)));
  page.on('websocket', (ws) => {
    rec.sockets++;
    ws.on('framesent', (f) => rec.sent.push(parse(f.payload)));
    ws.on('framereceived', (f) => rec.received.push(parse(f.payload)));
  });
  await page.goto(process.env.PAGE_URL);
  await waitLoaded(page);
  return { browser, context, page, rec };
}

function parse(payload) {
  if (Buffer.isBuffer(payload)) return { binary: payload.length }; // a binary chunk frame's data
  try {
    return JSON.parse(String(payload));
  } catch (e) {
    return { unparsed: String(payload).slice(0, 200) };
  }
}

// waitLoaded waits until the first tools:servers reply is rendered.
async function waitLoaded(page) {
  await page.waitForFunction(() => document.getElementById('bridge-version').textContent !== '…');
}

const card = (name) => `article.server[data-server="${name}"]`;

// connect clicks Connect on a server card, confirms when the dialog opens
// (confirm: true) and waits until the card says "connected here".
async function connect(page, name, opts) {
  const o = opts || {};
  await page.click(card(name) + ' button.connect');
  if (o.confirm) {
    await page.waitForSelector('dialog#confirm[open]');
    await page.click('#confirm-yes');
  }
  if (o.wait !== false) await page.waitForSelector(card(name) + ' .pill.ok');
}

async function selectTool(page, server, tool) {
  await page.selectOption('#runner-server', server);
  await page.selectOption('#runner-tool', tool);
}

// advanced opens the raw JSON editor (the "Advanced" part of the runner).
async function advanced(page) {
  if (!(await page.evaluate(() => document.getElementById('advanced').open))) await page.click('#advanced > summary');
}

let AXE = null;
const readAxe = () => fs.readFileSync(path.join(path.dirname(process.env.PLAYWRIGHT_CORE), 'axe-core', 'axe.min.js'), 'utf8');

// axe runs axe-core in the page and returns its serious and critical
// violations as "rule: target" strings.
async function axe(page) {
  AXE = AXE || readAxe();
  await page.evaluate(AXE);
  return page.evaluate(async () => {
    const r = await window.axe.run(document, { resultTypes: ['violations'] });
    return r.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')
      .flatMap((v) => v.nodes.map((n) => v.id + ': ' + n.target.join(' ') + ' (' + v.help + ')'));
  });
}

async function shot(page, name) {
  if (!process.env.SHOTS) return '';
  const file = path.join(process.env.SHOTS, name + '.png');
  await page.screenshot({ path: file, fullPage: true });
  return file;
}

// main runs fn and prints its result (or the error) as one JSON line.
function main(fn) {
  let browser = null;
  const track = (b) => { browser = b; };
  fn(track).then((out) => {
    process.stdout.write(JSON.stringify(out) + '\n');
  }, (err) => {
    process.stdout.write(JSON.stringify({ error: String(err && err.stack || err) }) + '\n');
    process.exitCode = 1;
  }).finally(async () => {
    if (browser) await browser.close().catch(() => {});
  });
}

module.exports = { open, connect, selectTool, shot, main, card, waitLoaded, advanced, axe };
