// builder-tools-client.js: the Builder's tool connections over
// megane-jupyter-bridge (bridge/PROTOCOL.md, version 1).
//
// An ES module using only standard web APIs (WebSocket, AbortSignal,
// TextEncoder, TextDecoder, URL), so that it runs unchanged in browsers and
// in Node >= 22.
//
//   const bridge = await connectBridge(wsUrl, { token, parseTools, parseResult });
//   (token: sent only if the browser's cookie is refused; see auth below)
//   const servers = await bridge.servers();
//   const conn = await bridge.connect(name, { confirm: async (server) => true });
//   const outcome = await conn.call(tool, args, { onProgress, signal, timeoutMs });
//   await conn.close();
//   await bridge.close();
//
// conn is a ToolConnection as the Builder expects it (serverName,
// serverVersion, listing, call, close); outcomes are { ok: true, result,
// summary } or { ok: false, error } with a sentence a person can read.
//
// One socket is shared by every connection of a bridge object. The socket
// opens with tools:hello asking for a page session ("resume"): when it drops
// (a proxy restarts, a laptop sleeps), this module opens a new one by itself
// and resumes the session, and calls in flight resolve with their real
// outcome, each once; onStatus says "reconnecting", then "resumed" (or
// "could not resume: …", and only then do the calls in flight fail with
// "run it again"). A bridge without page sessions gets today's behaviour:
// the calls in flight fail with a clear error, and the next use opens a new
// socket (retrying with backoff) and connects the server again (with the
// stored approval: confirm is asked only when the bridge has no valid
// receipt for the server's fingerprint).

export const PROTOCOL_VERSION = 1;

// What every close code of the protocol means, for people.
export const CLOSE_REASONS = Object.freeze({
  1000: 'the connection was closed',
  1001: 'the bridge stopped (it is shutting down or restarting)',
  1005: 'the connection to the bridge was closed',
  1006: 'the connection to the bridge was lost (the bridge stopped, the network failed, or the address or credentials were refused)',
  1009: 'a message was too big for the bridge',
  1013: 'the bridge was receiving too much from pages at once and closed this one: try again shortly',
  4400: 'the page sent a binary frame, which the bridge does not accept',
  4401: 'the bridge found no usable credentials (open it through Jupyter, or give the token the bridge printed)',
  4403: 'you may not run tools here (Jupyter says you may not execute kernels on this server)',
  4408: 'this page stopped reading and the bridge closed it',
  4503: 'the bridge could not ask the Jupyter server to check your credentials (is Jupyter running?)',
});

// Close codes that retrying cannot fix.
const PERMANENT = new Set([4400, 4401, 4403]);

// Close codes of a socket refused for its credentials: Jupyter refuses the
// upgrade with HTTP 403 (the page sees 1006), the bridge closes with 4401.
const REFUSED = new Set([1006, 4401]);

const APPROVAL_PREFIX = 'megane-builder-tools.approval.'; // + fingerprint
const FRAME_BUDGET = 4 << 20; // bytes: larger messages go as tools:chunk frames
const PIECE_UNITS = 512 << 10; // UTF-16 units per chunk (at most 6 bytes each, escaped)
const MAX_INBOUND = 512 << 20; // a larger chunked message from the bridge is refused
const SAFETY_MS = 15000; // a call with timeoutMs fails locally this long after it
const ACK_DELAY_MS = 50; // tools:ack goes at most this long after a message, one for all those received meanwhile

// BridgeError is what connectBridge, servers, connect and friends throw.
// code is the protocol's error code, 'socket-closed', 'declined' or
// 'cancelled'; closeCode the socket's close code when it closed; server the
// entry the bridge sent with the error, if any.
export class BridgeError extends Error {
  constructor(message, fields) {
    super(message);
    this.name = 'BridgeError';
    Object.assign(this, fields || {});
  }
}

// isOpen: ws can send (readyState OPEN); a closing socket drops what it
// is sent, and the browser logs an error for each such send.
function isOpen(ws) {
  return !!ws && ws.readyState === 1;
}

function str(v) {
  if (v === undefined || v === null) return '';
  return typeof v === 'string' ? v : JSON.stringify(v);
}

function utf8Length(s) {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      n += 4;
      i++;
    } else n += 3;
  }
  return n;
}

// defaultApprovals keeps receipts in localStorage where there is one (the
// status page's key, so both share them), else in memory.
function defaultApprovals() {
  let store = null;
  try {
    const ls = globalThis.localStorage;
    if (ls) {
      ls.setItem(APPROVAL_PREFIX + 'probe', '1');
      ls.removeItem(APPROVAL_PREFIX + 'probe');
      store = ls;
    }
  } catch (e) {
    store = null;
  }
  if (store) {
    return {
      get: (fp) => store.getItem(APPROVAL_PREFIX + fp) || '',
      set: (fp, v) => (v ? store.setItem(APPROVAL_PREFIX + fp, v) : store.removeItem(APPROVAL_PREFIX + fp)),
    };
  }
  const mem = new Map();
  return { get: (fp) => mem.get(fp) || '', set: (fp, v) => (v ? mem.set(fp, v) : mem.delete(fp)) };
}

function sleep(ms, signal) {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    if (signal) signal.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
  });
}

// replyError turns a failed reply into a BridgeError: "<code>: <message>".
function replyError(reply, prefix) {
  const e = (reply && reply.error) || {};
  const code = str(e.code) || 'error';
  const msg = str(e.message);
  return new BridgeError((prefix ? prefix + ': ' : '') + (msg ? code + ': ' + msg : code),
    { code, server: e.server, closeCode: e.closeCode });
}

function socketURL(wsUrl, token) {
  const base = globalThis.location && globalThis.location.href;
  const u = base ? new URL(wsUrl, base) : new URL(wsUrl);
  if (u.protocol === 'http:') u.protocol = 'ws:';
  else if (u.protocol === 'https:') u.protocol = 'wss:';
  if (token) u.searchParams.set('token', token);
  u.hash = '';
  return u.href;
}

function firstText(result) {
  const c = result && Array.isArray(result.content) ? result.content : [];
  const t = c.find((x) => x && x.type === 'text' && typeof x.text === 'string');
  return t ? t.text : null;
}

// failure is { ok: false, error }, with a non-enumerable kind ('tool-error',
// 'invalid-result', 'cancelled', 'server-failed') for pages that style them
// apart; the Builder's outcome shape is unchanged.
function failure(error, kind) {
  const o = { ok: false, error };
  Object.defineProperty(o, 'kind', { value: kind, enumerable: false });
  return o;
}

// createBridge returns a bridge object without opening its socket: the first
// use (or open()) opens it. connectBridge is createBridge and open().
export function createBridge(wsUrl, options) {
  return new Bridge(wsUrl, options || {});
}

export async function connectBridge(wsUrl, options) {
  const b = createBridge(wsUrl, options);
  await b.open();
  return b;
}

class Bridge {
  constructor(wsUrl, o) {
    if (typeof globalThis.WebSocket !== 'function' && typeof o.WebSocket !== 'function') {
      throw new BridgeError('This environment has no WebSocket (use a browser or Node 22 or newer).', { code: 'unsupported' });
    }
    this._WS = o.WebSocket || globalThis.WebSocket;
    // Credentials: the browser's cookie (Jupyter's login, the Hub's
    // jupyterhub-user-<name>) goes with every socket and appears in no log;
    // a token can only go in the URL's query, which jupyter-server-proxy
    // logs in clear. So with auth 'auto' (the default) a socket is opened
    // without the token first, and with it only if that one is refused;
    // once the token was needed, this object's later sockets use it.
    // 'cookie' never sends the token, 'token' always does.
    this._auth = o.auth || 'auto';
    if (!['auto', 'cookie', 'token'].includes(this._auth)) {
      throw new BridgeError("auth must be 'auto', 'cookie' or 'token', not " + JSON.stringify(o.auth) + '.', { code: 'bad-option' });
    }
    this._cookieURL = socketURL(wsUrl, '');
    this._tokenURL = o.token && this._auth !== 'cookie' ? socketURL(wsUrl, o.token) : null;
    this._needToken = this._auth === 'token' && this._tokenURL !== null;
    this.authenticatedBy = ''; // 'cookie' (no token in the URL) or 'token', once a socket opened
    this._parseTools = o.parseTools || ((x) => x);
    this._parseResult = o.parseResult || ((x) => x);
    this._approvals = o.approvals || defaultApprovals();
    this._onStatus = o.onStatus || null; // ({ open, code, message })
    this._onServerClosed = o.onServerClosed || null; // ({ server, message })
    this._backoff = Object.assign({ initialMs: 250, maxMs: 8000, attempts: 5 }, o.backoff || {});
    // Features asked for in tools:hello (PROTOCOL.md): a page session
    // (resume: false asks for none), the data of large messages in
    // binary frames (binary: false keeps text chunks), and results
    // streamed while the server writes them (stream: false waits for the
    // whole result; streams need binary frames).
    this._features = (o.resume === false ? [] : ['resume'])
      .concat(o.binary === false ? [] : ['binary'])
      .concat(o.binary === false || o.stream === false ? [] : ['stream']);
    this._bin = null; // the binary chunk sequence or streamed result being received
    this._session = null; // { token, graceMs } while the bridge keeps a page session for this object
    this._lastSeq = 0; // the number (n) of the last page-session message handled
    this._ackTimer = null;
    this._sent = 0; // requests sent in this page session (tools:hello and tools:ack not counted)
    this._unconfirmed = []; // [{ n, msg }]: requests sent that the bridge may not have read
    this._cancelLater = []; // ids of calls given up while the socket was away
    this._sgen = 0; // page sessions begun; a link made in another one is stale
    this._ws = null;
    this._ready = false;
    this._gen = 0; // sockets opened so far
    this._opening = null;
    this._closed = false;
    this._closing = null; // the last tools:closing of the current socket
    this._nextId = 1;
    this._nextSeq = 1;
    this._pending = new Map(); // "type#id" -> { resolve, onProgress }
    this._chunks = new Map();
    this._links = new Map(); // server name -> link
    this.info = null; // the last tools:servers reply's bridge object
    this.user = '';
    this.lastError = null; // why the socket last closed (BridgeError)
  }

  get isOpen() {
    return this._ready;
  }

  // open opens the socket if it is not open, retrying with backoff; it
  // rejects with a BridgeError naming the close code's meaning.
  open() {
    if (this._closed) return Promise.reject(new BridgeError('This bridge connection was closed by the page.', { code: 'socket-closed' }));
    if (this._ready) return Promise.resolve();
    if (!this._opening) {
      this._opening = this._openWithBackoff().finally(() => { this._opening = null; });
    }
    return this._opening;
  }

  async _openWithBackoff() {
    let delay = this._backoff.initialMs;
    // While a page session waits for this page, keep trying until its
    // grace ends (a proxy restarting can take longer than five attempts).
    const until = this._session && this._kept() ? Date.now() + this._session.graceMs : 0;
    for (let attempt = 1; ; attempt++) {
      try {
        await this._openAuthenticated();
        return;
      } catch (e) {
        const resuming = this._session && Date.now() + delay < until;
        if (this._closed || PERMANENT.has(e.closeCode) || (attempt >= this._backoff.attempts && !resuming && e.code !== 'session-in-use')) throw e;
        if (e.code === 'session-in-use' && attempt > 40) throw e;
        await sleep(delay);
        delay = Math.min(delay * 2, this._backoff.maxMs);
      }
    }
  }

  // _kept reports whether requests wait for their outcome across a resume.
  _kept() {
    for (const p of this._pending.values()) if (p.keep) return true;
    return false;
  }

  // _hello says which features this page supports; it resumes the page
  // session when there is one. It resolves { resumed, received } or
  // { error } (a BridgeError).
  async _hello() {
    const msg = { type: 'tools:hello', features: this._features };
    const resuming = this._session !== null;
    if (resuming) msg.resume = { token: this._session.token, n: this._lastSeq };
    const reply = await this._rawRequest(msg);
    if (reply.ok) {
      if (resuming && reply.resumed === true) return { resumed: true, received: Number(reply.received) || 0 };
      const granted = Array.isArray(reply.features) ? reply.features : [];
      this._newSession(granted.includes('resume') && reply.session ? { token: str(reply.session.token), graceMs: Number(reply.session.graceMs) || 0 } : null);
      return { resumed: false };
    }
    const code = reply.error && reply.error.code;
    if (code === 'unknown-type') { // a bridge older than tools:hello
      this._newSession(null);
      return { resumed: false };
    }
    if (code === 'socket-closed') return { error: new BridgeError(str(reply.error.message), { code: 'socket-closed', closeCode: reply.error.closeCode }) };
    if (code === 'session-in-use') return { error: new BridgeError(str(reply.error.message), { code }) };
    if (resuming) {
      // The session is gone (its grace ended, the bridge restarted): what
      // its calls did is lost. Start a new one on this socket.
      this._session = null;
      this._lose('could not resume: ' + (str(reply.error && reply.error.message) || code));
      return this._hello();
    }
    return { error: replyError(reply, 'The bridge refused tools:hello') };
  }

  // _newSession begins a page session (or none, for a bridge without them).
  _newSession(session) {
    this._session = session;
    this._lastSeq = 0;
    this._sent = 0;
    this._unconfirmed = [];
    this._cancelLater = [];
    this._sgen++;
  }

  // _lose fails the requests kept for a resume that cannot happen.
  _lose(why) {
    const kept = [...this._pending].filter(([, p]) => p.keep);
    for (const [k, p] of kept) {
      this._pending.delete(k);
      p.resolve({ ok: false, error: { code: 'socket-closed', message: 'The bridge connection was lost and ' + why + '.' } });
    }
    if (this._onStatus && kept.length) this._onStatus({ open: this._ready, code: 0, message: why, resumed: false });
  }

  // _resumed sends again what the bridge never read (after the first
  // received), and the cancels of calls given up while away.
  _resumed(received) {
    const again = this._unconfirmed.filter((u) => u.n > received);
    this._unconfirmed = [];
    this._sent = received;
    for (const u of again) this._send(u.msg);
    for (const id of this._cancelLater.splice(0)) this._rawRequest({ type: 'tools:cancel', id });
  }

  _scheduleAck() {
    if (this._ackTimer !== null) return;
    this._ackTimer = setTimeout(() => {
      this._ackTimer = null;
      // A socket the bridge is closing takes nothing (the browser would
      // log an error for the send); the next socket's resume says the same.
      if (this._ready && this._session && isOpen(this._ws)) {
        try { this._ws.send(JSON.stringify({ type: 'tools:ack', n: this._lastSeq })); } catch (e) { /* the socket is going */ }
      }
    }, ACK_DELAY_MS);
  }

  // _openAuthenticated opens one socket: without the token first (the
  // cookie), then, if that is refused and there is a token, with it.
  async _openAuthenticated() {
    if (this._needToken) return this._openOnce(this._tokenURL, 'token');
    try {
      await this._openOnce(this._cookieURL, 'cookie');
    } catch (e) {
      if (this._tokenURL === null || this._closed || !REFUSED.has(e.closeCode)) throw e;
      await this._openOnce(this._tokenURL, 'token');
      this._needToken = true;
    }
  }

  _openOnce(url, by) {
    return new Promise((resolve, reject) => {
      let ws;
      try {
        ws = new this._WS(url);
      } catch (e) {
        reject(new BridgeError('Cannot open the bridge socket: ' + (e && e.message ? e.message : e), { code: 'socket-closed' }));
        return;
      }
      const gen = ++this._gen;
      ws.binaryType = 'arraybuffer';
      this._ws = ws;
      this._ready = false;
      this._closing = null;
      let settled = false;
      ws.onopen = async () => {
        const hello = await this._hello();
        if (settled) return;
        if (hello.error) {
          settled = true;
          reject(hello.error);
          try { ws.close(1000); } catch (e) { /* already closing */ }
          return;
        }
        if (hello.resumed) {
          if (this._ws !== ws || this._gen !== gen) return;
          this._ready = true;
          this.authenticatedBy = by;
          this.lastError = null;
          settled = true;
          this._resumed(hello.received);
          resolve();
          if (this._onStatus) this._onStatus({ open: true, code: 0, message: 'resumed', resumed: true });
          return;
        }
        const reply = await this._rawRequest({ type: 'tools:servers' });
        if (settled) return;
        if (!reply.ok) {
          settled = true;
          reject(replyError(reply, 'The bridge refused to list its servers'));
          return;
        }
        if (this._ws !== ws || this._gen !== gen) return;
        this._status(reply);
        this._ready = true;
        this.authenticatedBy = by;
        this.lastError = null;
        settled = true;
        resolve();
        if (this._onStatus) this._onStatus({ open: true, code: 0, message: '' });
      };
      ws.onmessage = (ev) => {
        if (this._ws !== ws) return;
        if (typeof ev.data === 'string') this._frame(ev.data);
        else this._binaryPiece(ev.data);
      };
      let closed = false;
      // A refused handshake (Jupyter's 403): browsers fire error, then close
      // 1006. Node 22's WebSocket fires only the error and stays CONNECTING,
      // so a socket that never opened is closed here.
      ws.onerror = () => {
        if (ws.readyState === 0 || (!settled && !this._ready)) {
          ws.onclose({ code: 1006, reason: '' });
          try { ws.close(); } catch (e) { /* already failed */ }
        }
      };
      ws.onclose = (ev) => {
        if (closed) return;
        closed = true;
        const err = this._closeError(ev.code, ev.reason);
        const wasOpen = this._ready && this._ws === ws;
        this._dropped(ws, err);
        if (!settled) {
          settled = true;
          reject(err);
        } else if (wasOpen && !this._closed && this._kept()) {
          // A page session keeps the calls in flight: resume it now.
          if (this._onStatus) this._onStatus({ open: false, code: err.closeCode, message: 'reconnecting: ' + err.message, reconnecting: true });
          this.open().catch((e) => this._lose('could not resume: ' + e.message));
        } else if (wasOpen && this._onStatus && !this._closed) {
          this._onStatus({ open: false, code: err.closeCode, message: err.message });
        }
      };
    });
  }

  // _closeError reads the code from tools:closing when the bridge sent one
  // (jupyter-server-proxy replaces the close frame's code).
  _closeError(code, reason) {
    if (this._closed) return new BridgeError('The page closed the bridge connection.', { code: 'socket-closed', closeCode: 1000 });
    const c = this._closing;
    const cc = c && Number.isInteger(c.code) ? c.code : code;
    const why = str(c ? c.reason : reason);
    const meaning = CLOSE_REASONS[cc] || 'the bridge closed the connection';
    let text = 'The bridge connection closed (' + cc + '): ' + meaning;
    if (why && !meaning.includes(why)) text += ' — ' + why;
    return new BridgeError(text + '.', { code: 'socket-closed', closeCode: cc, reason: why });
  }

  _dropped(ws, err) {
    if (this._ws !== ws) return;
    this._ws = null;
    this._ready = false;
    this.lastError = err;
    // With a page session, calls and connects wait for the resume (their
    // outcome comes then); a socket the bridge closed with a code, or that
    // the page closed, ends the session.
    const resumable = this._session !== null && !this._closed && !this._closing;
    if (!resumable) this._session = null;
    for (const [k, p] of this._pending) {
      if (resumable && p.keep) continue;
      this._pending.delete(k);
      p.resolve({ ok: false, error: { code: 'socket-closed', message: err.message, closeCode: err.closeCode } });
    }
    this._chunks.clear();
    // A streamed result goes on after a resume, from the first frame
    // this page did not have; any other sequence is sent again whole.
    if (!(resumable && this._bin && this._bin.stream)) this._bin = null;
  }

  // ---- frames ----

  _send(msg) {
    const ws = this._ws;
    if (this._session && msg.type !== 'tools:hello' && msg.type !== 'tools:ack') {
      const n = ++this._sent;
      this._unconfirmed.push({ n, msg });
      const p = this._pending.get(msg.type + '#' + msg.id);
      if (p) p.n = n;
    }
    // A closing socket drops what it is sent (and the browser logs an
    // error): in a page session the message is resent after the resume
    // (unconfirmed, above); without one, the request fails now.
    if (ws && ws.readyState > 1) {
      if (this._session) return;
      throw new Error('the socket is closing');
    }
    const text = JSON.stringify(msg);
    if (text.length * 3 <= FRAME_BUDGET) {
      ws.send(text);
      return;
    }
    const size = new TextEncoder().encode(text).length;
    const pieces = [];
    for (let i = 0; i < text.length;) {
      let end = Math.min(i + PIECE_UNITS, text.length);
      const c = text.charCodeAt(end - 1); // never cut a surrogate pair
      if (end < text.length && c >= 0xd800 && c <= 0xdbff) end--;
      pieces.push(text.slice(i, end));
      i = end;
    }
    const id = 'c' + this._nextSeq++;
    pieces.forEach((data, seq) => ws.send(JSON.stringify({ type: 'tools:chunk', id, seq, count: pieces.length, size, data })));
  }

  // _rawRequest sends on the current socket and resolves with the reply (or
  // a socket-closed failure); it never opens a socket.
  _rawRequest(msg, onProgress) {
    if (!this._ws) return Promise.resolve({ ok: false, error: { code: 'socket-closed', message: 'not connected to the bridge' } });
    if (msg.id === undefined) msg.id = this._nextId++;
    return new Promise((resolve) => {
      const keep = msg.type === 'tools:call' || msg.type === 'tools:connect';
      this._pending.set(msg.type + '#' + msg.id, { resolve, onProgress, keep, n: 0, id: msg.id });
      try {
        this._send(msg);
      } catch (e) {
        this._pending.delete(msg.type + '#' + msg.id);
        resolve({ ok: false, error: { code: 'socket-closed', message: 'cannot send: ' + (e && e.message ? e.message : e) } });
      }
    });
  }

  async _request(msg, onProgress) {
    await this.open();
    return this._rawRequest(msg, onProgress);
  }

  _frame(text) {
    let msg;
    try {
      msg = JSON.parse(text);
    } catch (e) {
      return;
    }
    this._handle(msg);
  }

  _handle(msg) {
    if (!msg || typeof msg !== 'object') return;
    const streamFrame = msg.type === 'tools:chunk' && (msg.stream === true || msg.end === true);
    if (typeof msg.n === 'number' && (msg.type !== 'tools:chunk' || streamFrame)) {
      // A page session's message (n is its number; a tools:chunk frame's
      // seq is the chunk's place in its sequence, not this; a stream's
      // head and end are numbered messages): each is handled once,
      // however many times a resume sends it.
      if (msg.n <= this._lastSeq) return;
      this._lastSeq = msg.n;
      this._scheduleAck();
    }
    switch (msg.type) {
      case 'tools:chunk':
        if (streamFrame) {
          this._stream(msg);
          return;
        }
        if (msg.ok === false) return; // a refusal of a sequence this page sent
        this._chunk(msg);
        return;
      case 'tools:closing':
        this._closing = msg;
        return;
      case 'tools:progress':
        for (const t of ['tools:call', 'tools:connect']) {
          const p = this._pending.get(t + '#' + msg.id);
          if (p && p.onProgress) p.onProgress(msg);
        }
        return;
      case 'tools:closed': {
        const name = str(msg.server);
        const link = this._links.get(name);
        if (link) link.ended = str(msg.message) || 'the server stopped';
        if (this._onServerClosed) this._onServerClosed({ server: name, message: str(msg.message) });
        return;
      }
    }
    const key = msg.type + '#' + msg.id;
    const p = this._pending.get(key);
    if (p) {
      this._pending.delete(key);
      // The bridge reads requests in order: those sent up to this one
      // need never be sent again.
      if (p.n) this._unconfirmed = this._unconfirmed.filter((u) => u.n > p.n);
      p.resolve(msg);
    }
  }

  // _binaryPiece adds a binary frame to the binary chunk sequence its head
  // announced, decoding as it goes; the whole message is handled once all
  // count frames are in.
  _binaryPiece(data) {
    const s = this._bin;
    if (!s || !(data instanceof ArrayBuffer)) return;
    if (s.stream) {
      let bytes = new Uint8Array(data);
      if (this._session) {
        // In a page session a streamed frame leads with its number.
        if (data.byteLength < 8) return;
        const n = Number(new DataView(data).getBigUint64(0));
        if (n <= this._lastSeq) return; // sent again after a resume: this page has it
        this._lastSeq = n;
        this._scheduleAck();
        bytes = bytes.subarray(8);
      }
      s.frames++;
      s.bytes += bytes.byteLength;
      if (s.bytes > MAX_INBOUND) {
        this._bin = null;
        return;
      }
      try {
        s.text.push(s.decoder.decode(bytes, { stream: true }));
      } catch (e) {
        this._bin = null; // not UTF-8: the bridge never sends that
      }
      return;
    }
    s.bytes += data.byteLength;
    if (s.bytes > s.size) {
      this._bin = null;
      return;
    }
    try {
      s.text.push(s.decoder.decode(new Uint8Array(data), { stream: true }));
      if (++s.next < s.count) return;
      s.text.push(s.decoder.decode());
    } catch (e) {
      this._bin = null; // not UTF-8: the bridge never sends that
      return;
    }
    this._bin = null;
    if (s.bytes === s.size) this._frame(s.text.join(''));
  }

  // _stream begins a streamed result (its head) or ends it: ok, the
  // reassembled reply is handled; not ok, what came is dropped and the
  // call's error follows (PROTOCOL.md, Streamed results).
  _stream(m) {
    if (m.stream === true) {
      this._bin = { stream: true, frames: 0, bytes: 0, text: [], decoder: new TextDecoder('utf-8', { fatal: true }) };
      return;
    }
    const s = this._bin;
    if (!s || !s.stream) return;
    this._bin = null;
    if (m.ok !== true || m.count !== s.frames || m.size !== s.bytes) return;
    try {
      s.text.push(s.decoder.decode());
    } catch (e) {
      return;
    }
    this._frame(s.text.join(''));
  }

  // _chunk reassembles the bridge's tools:chunk sequences (PROTOCOL.md, Chunks).
  _chunk(m) {
    if (m.binary === true) {
      if (!Number.isInteger(m.count) || m.count < 1 || !Number.isInteger(m.size) || m.size < 0 || m.size > MAX_INBOUND) return;
      this._bin = { count: m.count, size: m.size, next: 0, bytes: 0, text: [], decoder: new TextDecoder('utf-8', { fatal: true }) };
      return;
    }
    const id = str(m.id);
    let s = this._chunks.get(id);
    if (m.seq === 0 && !s) {
      if (!Number.isInteger(m.count) || m.count < 1 || !Number.isInteger(m.size) || m.size < 0 || m.size > MAX_INBOUND) return;
      s = { count: m.count, size: m.size, next: 0, parts: [], units: 0 };
      this._chunks.set(id, s);
    }
    if (!s || m.seq !== s.next || m.count !== s.count || m.size !== s.size || typeof m.data !== 'string') {
      this._chunks.delete(id);
      return;
    }
    s.parts.push(m.data);
    s.units += m.data.length;
    s.next++;
    if (s.units > s.size) {
      this._chunks.delete(id);
      return;
    }
    if (s.next < s.count) return;
    this._chunks.delete(id);
    const text = s.parts.join('');
    if (utf8Length(text) !== s.size) return;
    this._frame(text);
  }

  _status(reply) {
    this.info = reply.bridge || {};
    this.user = str(reply.user);
    return {
      bridge: this.info,
      user: this.user,
      servers: Array.isArray(reply.servers) ? reply.servers : [],
      problems: Array.isArray(reply.problems) ? reply.problems : [],
    };
  }

  // ---- public API ----

  // status is the whole tools:servers answer: { bridge, user, servers, problems }.
  async status() {
    const reply = await this._request({ type: 'tools:servers' });
    if (!reply.ok) throw replyError(reply, 'Cannot list the servers');
    return this._status(reply);
  }

  // servers lists the configured servers as the bridge describes them (name,
  // transport, commandLine or url, fingerprint, state, …).
  async servers() {
    return (await this.status()).servers;
  }

  // settings says where servers are configured (tools:openSettings).
  async settings() {
    const reply = await this._request({ type: 'tools:openSettings' });
    if (!reply.ok) throw replyError(reply, 'Cannot read the settings');
    return { files: Array.isArray(reply.files) ? reply.files : [], userFile: reply.userFile || null };
  }

  // connect connects this page to a server and returns a ToolConnection.
  // options: confirm(server, { reason }) → boolean, asked only when the bridge
  // has no valid receipt; signal to give up on a start; onStarting(line)
  // with the server's latest stderr line while it starts.
  async connect(name, options) {
    const o = options || {};
    let link = this._links.get(name);
    if (!link) {
      link = { name, gen: 0, ended: '', users: 0, confirm: o.confirm || null, tools: [], reply: null, conns: new Set() };
      this._links.set(name, link);
    }
    if (o.confirm) link.confirm = o.confirm;
    link.users++;
    try {
      await this._establish(link, o.signal, o.onStarting);
    } catch (e) {
      link.users--;
      if (!link.users && !link.gen) this._links.delete(name);
      throw e;
    }
    const conn = new ToolConnection(this, link);
    link.conns.add(conn);
    return conn;
  }

  // _establish sends tools:connect, confirming when needed, and records the
  // server's identity and listing on the link.
  async _establish(link, signal, onStarting) {
    if (signal && signal.aborted) throw new BridgeError('Cancelled.', { code: 'cancelled' });
    const list = await this.status();
    let server = list.servers.find((s) => s.name === link.name);
    if (!server) {
      const p = list.problems.find((x) => x.server === link.name);
      throw new BridgeError('unknown-server: no tool server named ' + JSON.stringify(link.name) + ' is configured' +
        (p ? ' (' + str(p.message) + ')' : '') + '.', { code: 'unknown-server' });
    }
    let reason = '';
    for (let attempt = 0; attempt < 3; attempt++) {
      const fp = str(server.fingerprint);
      const approval = await this._approvals.get(fp);
      const msg = { type: 'tools:connect', id: this._nextId++, server: link.name, fingerprint: fp };
      if (approval) msg.approval = approval;
      else {
        if (!link.confirm) {
          throw new BridgeError('confirmation-required: ' + link.name + ' must be confirmed before its first connection.', { code: 'confirmation-required', server });
        }
        if (!(await link.confirm(server, { reason }))) {
          throw new BridgeError(link.name + ' was not confirmed.', { code: 'declined', server });
        }
        msg.confirmed = true;
      }
      if (signal && signal.aborted) throw new BridgeError('Cancelled.', { code: 'cancelled' });
      await this.open();
      const gen = this._sgen;
      const onAbort = () => this._rawRequest({ type: 'tools:cancel', id: msg.id });
      if (signal) signal.addEventListener('abort', onAbort, { once: true });
      let reply;
      try {
        reply = await this._rawRequest(msg, (p) => { if (onStarting && p.message !== undefined) onStarting(str(p.message)); });
      } finally {
        if (signal) signal.removeEventListener('abort', onAbort);
      }
      if (reply.ok) {
        if (reply.approval) await this._approvals.set(fp, str(reply.approval));
        link.gen = gen;
        link.ended = '';
        link.server = server;
        link.reply = reply;
        link.tools = Array.isArray(reply.tools) ? reply.tools : [];
        link.listing = this._parseTools(link.tools);
        for (const c of link.conns) c._refresh();
        return;
      }
      const code = reply.error && reply.error.code;
      if (code === 'cancelled' && signal && signal.aborted) throw new BridgeError('Cancelled.', { code: 'cancelled' });
      if ((code === 'confirmation-required' || code === 'fingerprint-changed') && reply.error.server) {
        // The receipt was refused (revoked, expired) or the entry changed:
        // forget it and ask again with the current entry.
        await this._approvals.set(fp, '');
        server = reply.error.server;
        reason = code === 'fingerprint-changed'
          ? 'This server\u2019s configuration changed since it was approved.'
          : (approval ? 'The earlier approval is no longer valid.' : '');
        continue;
      }
      throw replyError(reply);
    }
    throw new BridgeError('confirmation-required: ' + link.name + ' was refused three times.', { code: 'confirmation-required' });
  }

  async _release(link) {
    link.users--;
    if (link.users > 0) return;
    this._links.delete(link.name);
    if (this._ready && link.gen === this._sgen && !link.ended) {
      await this._rawRequest({ type: 'tools:disconnect', server: link.name });
    }
  }

  // close closes the socket (1000); calls in flight fail, and are
  // cancelled at the bridge (which would otherwise keep them for a resume).
  async close() {
    if (this._closed) return;
    const ws = this._ws;
    if (isOpen(ws) && this._ready && this._session) {
      for (const [k, p] of this._pending) {
        if (k.startsWith('tools:call#') || k.startsWith('tools:connect#')) {
          try { ws.send(JSON.stringify({ type: 'tools:cancel', id: p.id })); } catch (e) { /* closing */ }
        }
      }
      for (const link of this._links.values()) {
        try { ws.send(JSON.stringify({ type: 'tools:disconnect', id: 'bye-' + link.name, server: link.name })); } catch (e) { /* closing */ }
      }
    }
    this._closed = true;
    this._session = null;
    if (ws) {
      this._dropped(ws, new BridgeError('The page closed the bridge connection.', { code: 'socket-closed', closeCode: 1000 }));
      try {
        ws.close(1000);
      } catch (e) {
        // already closing
      }
    }
  }
}

// ToolConnection is one server connection as the Builder expects it.
class ToolConnection {
  constructor(bridge, link) {
    this._bridge = bridge;
    this._link = link;
    this._closed = false;
    this.server = link.name; // the name in the configuration
    this._refresh();
  }

  _refresh() {
    const r = this._link.reply || {};
    const info = r.serverInfo && typeof r.serverInfo === 'object' ? r.serverInfo : {};
    let host = '';
    const s = this._link.server || {};
    if (s.url) {
      try {
        host = new URL(s.url).host;
      } catch (e) {
        host = '';
      }
    }
    this.serverName = str(info.name) || host || this._link.name;
    this.serverVersion = info.version === undefined || info.version === null ? null : str(info.version);
    this.listing = this._link.listing;
  }

  // _revive connects the server again when the socket was replaced or the
  // server's session ended since the last connect.
  async _revive(signal) {
    const b = this._bridge;
    await b.open();
    if (this._link.gen === b._sgen && !this._link.ended) return;
    await b._establish(this._link, signal);
  }

  async call(name, args, options) {
    const o = options || {};
    const signal = o.signal;
    if (this._closed) return failure('The server failed: this connection was closed.', 'server-failed');
    if (signal && signal.aborted) return failure('Cancelled.', 'cancelled');
    for (let attempt = 0; ; attempt++) {
      try {
        await this._revive(signal);
      } catch (e) {
        if ((signal && signal.aborted) || e.code === 'cancelled') return failure('Cancelled.', 'cancelled');
        return failure('The server failed: ' + e.message, 'server-failed');
      }
      const outcome = await this._call(name, args, o);
      if (outcome === 'again' && attempt === 0) {
        this._link.ended = 'not connected';
        continue;
      }
      if (outcome === 'again') return failure('The server failed: the bridge says this page is not connected to ' + this._link.name + '.', 'server-failed');
      return outcome;
    }
  }

  _call(name, args, o) {
    const b = this._bridge;
    const signal = o.signal;
    const msg = { type: 'tools:call', id: b._nextId++, server: this._link.name, tool: str(name), arguments: args === undefined ? {} : args };
    if (Number.isFinite(o.timeoutMs) && o.timeoutMs > 0) msg.timeoutMs = o.timeoutMs;
    return new Promise((resolve) => {
      let done = false;
      let timer = 0;
      const finish = (outcome) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        if (signal) signal.removeEventListener('abort', onAbort);
        resolve(outcome);
      };
      const gen = b._sgen;
      const giveUp = () => {
        b._pending.delete('tools:call#' + msg.id);
        if (b._sgen !== gen) return;
        if (b._ready) b._rawRequest({ type: 'tools:cancel', id: msg.id });
        else if (b._session) b._cancelLater.push(msg.id); // sent once the session resumes
      };
      const onAbort = () => {
        giveUp();
        finish(failure('Cancelled.', 'cancelled'));
      };
      if (signal) signal.addEventListener('abort', onAbort, { once: true });
      if (msg.timeoutMs) {
        // The bridge answers timeout itself; this only covers a bridge that
        // does not answer at all.
        timer = setTimeout(() => {
          giveUp();
          finish(failure('The server failed: no answer within ' + Math.round((msg.timeoutMs + SAFETY_MS) / 1000) + ' s; the call was cancelled.', 'server-failed'));
        }, msg.timeoutMs + SAFETY_MS);
      }
      const onProgress = o.onProgress
        ? (p) => {
          if (done) return;
          const total = Number(p.total);
          const progress = Number(p.progress);
          const fraction = p.total !== undefined && total > 0 && Number.isFinite(progress) ? Math.min(progress / total, 1) : null;
          o.onProgress(fraction, p.message === undefined || p.message === null ? null : str(p.message));
        }
        : undefined;
      b._rawRequest(msg, onProgress).then((reply) => {
        if (done) return;
        if (reply.ok === false && reply.error && reply.error.code === 'not-connected') {
          finish('again');
          return;
        }
        finish(this._outcome(reply));
      });
    });
  }

  _outcome(reply) {
    if (!reply.ok) {
      const e = reply.error || {};
      if (e.code === 'cancelled') return failure('Cancelled.', 'cancelled');
      let m = str(e.message) || str(e.code) || 'no answer';
      if (e.code === 'socket-closed') m += ' Whether the call finished is unknown; run it again.';
      else if (e.code === 'timeout') m = 'the call timed out: ' + m;
      else if (e.code && e.code !== 'server-failed') m = e.code + ': ' + m;
      return failure('The server failed: ' + m, 'server-failed');
    }
    const r = reply.result && typeof reply.result === 'object' ? reply.result : {};
    const text = firstText(r);
    if (r.isError) return failure((text && text.trim()) || 'The tool reported an error.', 'tool-error');
    let result;
    try {
      result = this._bridge._parseResult(r.structuredContent);
    } catch (e) {
      return failure('The tool returned an invalid result: ' + (e && e.message ? e.message : e), 'invalid-result');
    }
    const summary = text === null ? null : text.trim();
    return { ok: true, result, summary };
  }

  async close() {
    if (this._closed) return;
    this._closed = true;
    this._link.conns.delete(this);
    await this._bridge._release(this._link);
  }
}
