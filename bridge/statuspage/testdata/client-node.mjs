// The client module in Node (>= 22) against the real bridge. The Go test
// (TestClientModuleNode) starts the bridge, a TCP relay it can cut, and a
// fake bridge that closes with each close code; this script reports what a
// page author sees, as one JSON object on the last line of stdout.
//
//   BRIDGE_HTTP  http://host:port of the bridge    TOKEN  its token
//   RELAY_WS     the socket URL through the relay  DROP   URL that cuts it
//   FAKE_WS      ws://host:port of the fake bridge

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const env = process.env;
const out = {};
const call = (c, tool, args, o) => c.call(tool, args, Object.assign({ timeoutMs: 60000 }, o || {}));

try {
  // The module as the bridge serves it, imported unchanged.
  const res = await fetch(env.BRIDGE_HTTP + '/megane/builder-tools/builder-tools-client.js?token=' + env.TOKEN);
  out.served = { status: res.status, type: res.headers.get('content-type') };
  const src = await res.text();
  // The other path form (absolute_url false strips {base_url}megane).
  const other = await fetch(env.BRIDGE_HTTP + '/builder-tools/builder-tools-client.js?token=' + env.TOKEN);
  out.servedOther = { status: other.status, same: (await other.text()) === src };
  out.servedNoToken = (await fetch(env.BRIDGE_HTTP + '/megane/builder-tools/builder-tools-client.js')).status;
  const mod = await import('data:text/javascript;base64,' + Buffer.from(src).toString('base64'));

  const memory = new Map();
  const approvals = { get: (fp) => memory.get(fp) || '', set: (fp, v) => (v ? memory.set(fp, v) : memory.delete(fp)) };
  const asked = [];
  const confirm = async (s) => { asked.push({ name: s.name, fingerprint: s.fingerprint, commandLine: s.commandLine }); return true; };
  const wsUrl = env.BRIDGE_HTTP.replace(/^http/, 'ws') + '/megane/builder-tools/ws';

  try {
    await mod.connectBridge(wsUrl, { token: 'not-the-token', backoff: { attempts: 1 } });
    out.badToken = { connected: true };
  } catch (e) {
    out.badToken = { message: e.message, closeCode: e.closeCode };
  }

  // auth 'cookie' never sends the token: a standalone bridge has no
  // cookie to admit, so it refuses.
  try {
    await mod.connectBridge(wsUrl, { token: env.TOKEN, auth: 'cookie', backoff: { attempts: 1 } });
    out.cookieOnly = { connected: true };
  } catch (e) {
    out.cookieOnly = { message: e.message, closeCode: e.closeCode };
  }

  const bridge = await mod.connectBridge(wsUrl, { token: env.TOKEN, approvals });
  out.authenticatedBy = bridge.authenticatedBy;
  out.servers = (await bridge.servers()).map((s) => ({ name: s.name, fingerprint: s.fingerprint }));
  try {
    await bridge.connect('flaky');
  } catch (e) {
    out.noConfirm = { code: e.code, message: e.message };
  }
  try {
    await bridge.connect('flaky', { confirm: async () => false });
  } catch (e) {
    out.declined = { code: e.code, message: e.message };
  }
  out.approvalsAfterDecline = memory.size;
  try {
    await bridge.connect('nonesuch', { confirm });
  } catch (e) {
    out.unknown = { code: e.code, message: e.message };
  }
  const conn = await bridge.connect('flaky', { confirm });
  out.askedFirst = asked.slice();
  out.conn = { serverName: conn.serverName, serverVersion: conn.serverVersion, listing: conn.listing.map((t) => t.name) };
  out.echo = await call(conn, 'echo', { a: 1 });
  out.toolError = await call(conn, 'toolerror', { tag: 'x' });
  out.toolErrorKind = out.toolError.kind;
  out.toolErrorKeys = Object.keys(out.toolError);
  const progress = [];
  out.slow = await call(conn, 'slow', { steps: 3, intervalMs: 1, tag: 'p' }, { onProgress: (f, m) => progress.push([f, m]) });
  out.progress = progress;

  const ac = new AbortController();
  out.cancel = await call(conn, 'slow', { steps: 100000, intervalMs: 50 }, { signal: ac.signal, onProgress: () => ac.abort() });
  out.afterCancel = await call(conn, 'echo', { b: 2 });
  const pre = await call(conn, 'echo', { never: true }, { signal: AbortSignal.abort() });
  out.preAborted = { error: pre.error, kind: pre.kind };
  out.timeout = await call(conn, 'slow', { steps: 100000, intervalMs: 50 }, { timeoutMs: 400 });

  const big = await call(conn, 'big', { bytes: 12 << 20, tag: 'B' }, { timeoutMs: 120000 });
  out.big = { ok: big.ok, error: big.error, summary: big.summary, tag: big.result && big.result.tag, size: JSON.stringify(big.result || '').length };
  const large = 'x'.repeat(6 << 20) + '\u00e9\u{1F600}';
  const echoed = await call(conn, 'echo', { large }, { timeoutMs: 120000 });
  out.largeArgs = { ok: echoed.ok, error: echoed.error, same: !!(echoed.result && echoed.result.echo && echoed.result.echo.large === large) };

  // A second page with the Builder's parsers and the same receipts.
  const asked2 = [];
  const b2 = await mod.connectBridge(wsUrl, {
    token: env.TOKEN, approvals,
    parseTools: (tools) => tools.map((t) => t.name),
    parseResult: (sc) => {
      if (!sc || !('echo' in sc)) throw new Error('no echo field');
      return sc.echo;
    },
  });
  const c2 = await b2.connect('flaky', { confirm: async (s) => { asked2.push(s.name); return true; } });
  out.secondAsked = asked2.length;
  out.secondListing = c2.listing;
  out.parsed = await call(c2, 'echo', { z: 1 });
  out.invalid = await call(c2, 'slow', { steps: 1, intervalMs: 1 });
  await c2.close();
  out.afterConnClose = await call(c2, 'echo', {});
  await b2.close();

  // Without a page session (resume: false, or a bridge older than
  // tools:hello), the socket drops during a call: the call fails clearly,
  // the next one reconnects the socket and the server without asking again.
  let statuses = [];
  const b3 = await mod.connectBridge(env.RELAY_WS, { token: env.TOKEN, approvals, resume: false, onStatus: (s) => statuses.push(s) });
  const c3 = await b3.connect('flaky', { confirm });
  let cut = null;
  out.drop = await call(c3, 'slow', { steps: 100000, intervalMs: 50 }, {
    onProgress: () => { if (!cut) cut = fetch(env.DROP); },
  });
  await cut;
  out.afterDrop = await call(c3, 'echo', { c: 3 });
  out.statuses = statuses;
  out.askedTotal = asked.length;
  await b3.close();

  // With a page session (the default), the same drop loses nothing: the
  // module reconnects by itself, and the call resolves with its result,
  // once; onStatus says reconnecting, then resumed.
  const rstat = [];
  const b4 = await mod.connectBridge(env.RELAY_WS, { token: env.TOKEN, approvals, onStatus: (s) => rstat.push(s) });
  const c4 = await b4.connect('flaky', { confirm });
  let cut4 = null;
  let progress4 = 0;
  out.resumed = await call(c4, 'slow', { steps: 20, intervalMs: 50, tag: 'R' }, {
    onProgress: () => { progress4++; if (!cut4) cut4 = fetch(env.DROP); },
  });
  await cut4;
  out.resumedProgress = progress4;
  out.resumedStatuses = rstat;
  out.afterResume = await call(c4, 'echo', { d: 4 });
  await b4.close();

  // A result streaming when the socket drops: the module resumes, the
  // stream goes on from the first frame the page did not have, and the
  // result arrives whole, once. The server holds its second half until
  // the socket was cut.
  let frames5 = 0;
  class CountingWS extends WebSocket {
    constructor(...a) {
      super(...a);
      this.addEventListener('message', (e) => { if (typeof e.data !== 'string') frames5++; });
    }
  }
  const s5 = [];
  const b5 = await mod.connectBridge(env.RELAY_WS, { token: env.TOKEN, approvals, WebSocket: CountingWS, onStatus: (s) => s5.push(s.message) });
  const c5 = await b5.connect('flaky', { confirm });
  const hold = path.join(os.tmpdir(), 'mjb-hold-' + process.pid);
  const pending5 = call(c5, 'big', { bytes: 40000000, tag: 'S', holdFile: hold }, { timeoutMs: 120000 });
  for (let i = 0; i < 1500 && frames5 < 5; i++) await new Promise((r) => setTimeout(r, 20));
  const framesAtCut = frames5;
  await fetch(env.DROP);
  fs.writeFileSync(hold, '');
  const streamed = await pending5;
  fs.unlinkSync(hold);
  out.streamResume = {
    ok: streamed.ok, error: streamed.error, tag: streamed.result && streamed.result.tag,
    size: JSON.stringify(streamed.result || '').length, framesAtCut, frames: frames5, statuses: s5,
  };
  out.afterStream = await call(c5, 'echo', { e: 5 });
  await b5.close();
  await bridge.close();
  out.afterBridgeClose = await call(conn, 'echo', {});

  // Every tools:closing code, from a fake bridge.
  out.closing = {};
  for (const code of [1001, 4400, 4401, 4403, 4408, 4503]) {
    try {
      await mod.connectBridge(env.FAKE_WS + '/closing/' + code, { backoff: { attempts: 1 } });
      out.closing[code] = { connected: true };
    } catch (e) {
      out.closing[code] = { message: e.message, closeCode: e.closeCode };
    }
  }
  // A page session the bridge no longer has: the call in flight fails
  // with why, and "run it again".
  const lstat = [];
  const lost = await mod.connectBridge(env.FAKE_WS + '/lost', { backoff: { attempts: 3, initialMs: 50 }, onStatus: (s) => lstat.push(s) });
  const lc = await lost.connect('fake', { confirm: async () => true });
  out.lost = await call(lc, 'anything', {});
  out.lostStatuses = lstat;
  await lost.close();
  // 4408 while a call is in flight.
  const fake = await mod.connectBridge(env.FAKE_WS + '/midcall', { backoff: { attempts: 1 } });
  const fc = await fake.connect('fake', { confirm: async () => true });
  out.midcall = await call(fc, 'anything', {});
  await fake.close();
  // Where no token is needed (a bridge behind Jupyter admits the cookie),
  // none goes in the URL, which jupyter-server-proxy would log; with auth
  // 'token' it always does. The fake bridge says which query it saw.
  out.query = {};
  for (const auth of ['auto', 'token']) {
    const b = await mod.connectBridge(env.FAKE_WS + '/midcall', { token: 'page-token', auth, backoff: { attempts: 1 } });
    out.query[auth] = { by: b.authenticatedBy, query: (await b.status()).bridge.query };
    await b.close();
  }
} catch (e) {
  out.error = String(e && e.stack ? e.stack : e);
}
console.log(JSON.stringify(out));
