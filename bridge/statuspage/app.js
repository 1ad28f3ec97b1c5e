// The bridge's status page and tool runner, an ES module. It reaches the
// bridge only through builder-tools-client.js (the client module any page
// uses; imported with this script's ?token= so that standalone mode admits
// it), over the WebSocket beside this page. Everything a server or the bridge
// sends is shown as text (textContent, never HTML); tool icons are shown only
// from data: URIs of image types.

const client = await import(new URL('builder-tools-client.js' + new URL(import.meta.url).search, import.meta.url).href);

{
  // ---- constants ---------------------------------------------------------

  const BUILDER_META = 'io.github.megane-labs/builder';
  const SUPPORTED_CONTRACT = 1;
  const REFRESH_MS = 3000; // tools:servers while the socket is open
  const MAX_ERRORS = 50; // recent errors kept
  const MAX_TEXT = 4000; // characters of a result's text shown
  const MAX_DRAWN_ATOMS = 200000; // the picture samples larger structures
  const ICON_TYPES = ['image/png', 'image/svg+xml', 'image/jpeg', 'image/gif', 'image/webp'];

  const SYMBOLS = ('H He Li Be B C N O F Ne Na Mg Al Si P S Cl Ar K Ca Sc Ti V Cr Mn Fe Co Ni Cu Zn ' +
    'Ga Ge As Se Br Kr Rb Sr Y Zr Nb Mo Tc Ru Rh Pd Ag Cd In Sn Sb Te I Xe Cs Ba La Ce Pr Nd Pm Sm ' +
    'Eu Gd Tb Dy Ho Er Tm Yb Lu Hf Ta W Re Os Ir Pt Au Hg Tl Pb Bi Po At Rn Fr Ra Ac Th Pa U Np Pu ' +
    'Am Cm Bk Cf Es Fm Md No Lr Rf Db Sg Bh Hs Mt Ds Rg Cn Nh Fl Mc Lv Ts Og').split(' ');
  // Jmol-style colours for common elements; others get a colour from their number.
  const COLORS = {
    1: '#ffffff', 2: '#d9ffff', 3: '#cc80ff', 5: '#ffb5b5', 6: '#909090', 7: '#3050f8', 8: '#ff0d0d',
    9: '#90e050', 10: '#b3e3f5', 11: '#ab5cf2', 12: '#8aff00', 13: '#bfa6a6', 14: '#f0c8a0',
    15: '#ff8000', 16: '#ffff30', 17: '#1ff01f', 18: '#80d1e3', 19: '#8f40d4', 20: '#3dff00',
    22: '#bfc2c7', 26: '#e06633', 27: '#f090a0', 28: '#50d050', 29: '#c88033', 30: '#7d80b0',
    35: '#a62929', 36: '#5cb8d1', 47: '#c0c0c0', 53: '#940094', 54: '#429eb0', 78: '#d0d0e0',
    79: '#ffd123',
  };

  // ---- state ---------------------------------------------------------------

  const state = {
    client: null, // the client module's bridge object
    open: false,
    bridge: null, // tools:servers' bridge object
    user: '',
    servers: [], // the last tools:servers list
    problems: [],
    settingsFiles: [],
    errors: [], // {time, text}, newest last
    conns: new Map(), // server name -> {conn (ToolConnection), serverInfo, tools}
    starting: new Map(), // server name -> {abort (AbortController), line}
    refreshing: false,
    refreshTimer: 0,
    call: null, // {server, tool, abort (AbortController)}
    schemaFor: null, // {server, tool} the argument text was prefilled for
    args: {}, // the arguments the form and the JSON editor edit
    fields: new Map(), // path (JSON) -> {input, error} of the form's controls
    lastStructure: null, // the last result's structure (a document input can use it)
    history: [], // this browser's runs, newest first (localStorage)
    rawResult: undefined, // the result the raw view shows
    scene: null, // the structure the picture shows
    view: null, // its view: {ay, ax (radians), zoom}
  };

  const byId = (id) => document.getElementById(id);

  // el builds an element. props: className, text, title, hidden, and any
  // other property set as an attribute (values are strings from anywhere:
  // setAttribute never parses HTML). Children are nodes or strings (text).
  function el(tag, props, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'className') e.className = v;
      else if (k === 'text') e.textContent = String(v);
      else if (k === 'hidden') e.hidden = true;
      else e.setAttribute(k, String(v));
    }
    for (const c of children) {
      if (c === undefined || c === null || c === false) continue;
      e.append(typeof c === 'string' ? document.createTextNode(c) : c);
    }
    return e;
  }

  // morphChildren makes parent's children look like next (freshly built
  // nodes) by changing the existing nodes in place: an element whose tag
  // (and data-server) matches is kept and patched, so focus, text selection
  // and scroll inside it survive a refresh; only what changed is touched.
  function morphChildren(parent, next) {
    const have = [...parent.childNodes];
    next.forEach((y, i) => {
      const x = have[i];
      if (!x) parent.append(y);
      else if (x.nodeType === 3 && y.nodeType === 3) {
        if (x.data !== y.data) x.data = y.data;
      } else if (x.nodeType === 1 && y.nodeType === 1 && x.nodeName === y.nodeName &&
        x.getAttribute('data-server') === y.getAttribute('data-server')) {
        morph(x, y);
      } else parent.replaceChild(y, x);
    });
    for (let i = next.length; i < have.length; i++) have[i].remove();
  }

  function morph(x, y) {
    // A details element stays open or closed as the person left it.
    const own = (a) => x.nodeName === 'DETAILS' && a.name === 'open';
    for (const a of [...x.attributes]) if (!y.hasAttribute(a.name) && !own(a)) x.removeAttribute(a.name);
    for (const a of y.attributes) if (x.getAttribute(a.name) !== a.value && !own(a)) x.setAttribute(a.name, a.value);
    if (x.onclick !== y.onclick) x.onclick = y.onclick;
    morphChildren(x, [...y.childNodes]);
  }

  function str(v) {
    if (v === undefined || v === null) return '';
    return typeof v === 'string' ? v : JSON.stringify(v);
  }

  // announce tells screen readers what happened (a polite live region).
  function announce(text) {
    byId('announce').textContent = text;
  }

  function addError(text) {
    state.errors.push({ time: new Date(), text: str(text) });
    if (state.errors.length > MAX_ERRORS) state.errors.splice(0, state.errors.length - MAX_ERRORS);
    renderErrors();
  }

  // ---- socket --------------------------------------------------------------

  // The socket beside this page, without the page's ?token= (standalone
  // mode): the client module sends that only if the cookie is refused,
  // because jupyter-server-proxy logs a socket's query in clear.
  function socketURL() {
    const u = new URL('ws' + location.search, location.href);
    u.protocol = u.protocol === 'https:' ? 'wss:' : 'ws:';
    u.hash = '';
    u.searchParams.delete('token');
    return u.href;
  }
  const pageToken = new URLSearchParams(location.search).get('token') || undefined;
  // 'token' when the bridge runs without Jupyter (standalone): the token at
  // once, so that no refused cookie attempt is logged and audited first.
  const authMeta = document.querySelector('meta[name="megane-auth"]');
  const pageAuth = authMeta && authMeta.content === 'token' && pageToken ? 'token' : 'auto';

  function setSocketState(text, cls) {
    const s = byId('socket-state');
    s.textContent = text;
    s.className = 'pill ' + (cls || '');
  }

  function openSocket() {
    byId('reconnect').hidden = true;
    byId('socket-banner').hidden = true;
    setSocketState('connecting…', '');
    state.client.open().catch((e) => socketLost(e));
  }

  // onStatus follows the client's socket: open (first or again after a
  // drop, whoever reopened it) or closed.
  function onStatus(s) {
    if (s.reconnecting) {
      // A page session: the client resumes it by itself, and the calls in
      // flight (the runner's too) get their outcome then.
      state.open = false;
      state.reconnecting = true;
      clearInterval(state.refreshTimer);
      setSocketState('reconnecting…', '');
      const banner = byId('socket-banner');
      banner.textContent = str(s.message) + ' Calls in flight go on at the bridge; their results arrive once the page is back.';
      banner.hidden = false;
      return;
    }
    if (s.open && s.resumed) {
      state.reconnecting = false;
      state.open = true;
      byId('socket-banner').hidden = true;
      setSocketState('connected (resumed)', 'ok');
      refreshServers();
      clearInterval(state.refreshTimer);
      state.refreshTimer = setInterval(refreshServers, REFRESH_MS);
      return;
    }
    if (s.resumed === false) {
      socketLost({ closeCode: s.code, message: s.message });
      return;
    }
    if (s.open) {
      if (state.open) return;
      state.open = true;
      byId('reconnect').hidden = true;
      byId('socket-banner').hidden = true;
      setSocketState('connected', 'ok');
      refreshServers();
      showSettings();
      clearInterval(state.refreshTimer);
      state.refreshTimer = setInterval(refreshServers, REFRESH_MS);
      return;
    }
    socketLost({ closeCode: s.code, message: s.message });
  }

  function socketLost(e) {
    if (!state.open && !byId('socket-banner').hidden && !state.reconnecting) return;
    state.reconnecting = false;
    state.open = false;
    clearInterval(state.refreshTimer);
    const stopped = e.closeCode === 1001 || e.closeCode === 1006;
    setSocketState(stopped ? 'bridge stopped' : 'disconnected', 'bad');
    const banner = byId('socket-banner');
    banner.textContent = str(e.message) + ' Tool servers connected from this page were released; Reconnect connects again.';
    banner.hidden = false;
    byId('reconnect').hidden = false;
    addError(str(e.message));
    state.conns.clear();
    state.starting.clear();
    renderServers();
    renderRunner();
  }

  function errorOf(e) {
    return e && e.message ? e.message : str(e);
  }

  function onClosed(msg) {
    const name = str(msg.server);
    addError(name + ' stopped: ' + str(msg.message));
    const held = state.conns.get(name);
    if (held) held.conn.close();
    state.conns.delete(name);
    renderServers();
    renderRunner();
    refreshServers();
  }

  // ---- servers ---------------------------------------------------------------

  async function refreshServers() {
    if (!state.open || state.refreshing) return;
    state.refreshing = true;
    let reply;
    try {
      reply = await state.client.status();
    } catch (e) {
      if (e.code !== 'socket-closed') addError('tools:servers: ' + errorOf(e));
      return;
    } finally {
      state.refreshing = false;
    }
    state.bridge = reply.bridge || {};
    state.user = str(reply.user);
    state.servers = Array.isArray(reply.servers) ? reply.servers : [];
    state.problems = Array.isArray(reply.problems) ? reply.problems : [];
    // A share this page holds that the bridge no longer reports is gone.
    for (const name of [...state.conns.keys()]) {
      const s = state.servers.find((x) => x.name === name);
      if (!s || !s.connected) {
        state.conns.get(name).conn.close();
        state.conns.delete(name);
      }
    }
    renderBridge();
    renderServers();
    renderProblems();
    renderRunnerServers();
  }

  // showSettings says where servers are configured (tools:openSettings).
  async function showSettings() {
    const p = byId('settings-files');
    let reply;
    try {
      reply = await state.client.settings();
    } catch (e) {
      p.textContent = '';
      return;
    }
    const files = Array.isArray(reply.files) ? reply.files : [];
    const parts = files.map((f) => str(f.path) + (f.level ? ' (' + str(f.level) + ')' : ''));
    let text = parts.length ? 'Servers are configured in ' + parts.join(', ') + '.' : 'No file configures servers.';
    const u = reply.userFile;
    if (u && u.path) text += ' Your file: ' + str(u.path) + (u.exists ? '' : ' (does not exist yet)') + '.';
    p.textContent = text;
  }

  function renderBridge() {
    const b = state.bridge || {};
    byId('bridge-name').textContent = str(b.name) || 'megane-jupyter-bridge';
    byId('bridge-version').textContent = str(b.version) || '?';
    byId('bridge-protocol').textContent = str(b.protocol) || '?';
    byId('bridge-user').textContent = state.user || '?';
  }

  function kv(dl, key, value, cls) {
    if (value === undefined || value === null || value === '') return;
    dl.append(el('dt', { text: key }), el('dd', { className: cls || '' }, value));
  }

  function names(list) {
    return Array.isArray(list) && list.length ? list.map(str).join(', ') : '';
  }

  function renderServers() {
    const box = byId('servers');
    if (!state.servers.length && !state.problems.some((p) => p.server)) {
      morphChildren(box, [el('p', { className: 'muted', text: state.open ? 'No servers are configured.' : 'Not connected to the bridge.' })]);
      return;
    }
    const cards = [];
    for (const s of state.servers) {
      const name = str(s.name);
      const starting = state.starting.get(name);
      const here = state.conns.has(name);
      // Without the socket, the last state seen is not known to hold.
      let st = state.open ? str(s.state) || 'stopped' : 'unknown';
      if (starting && st === 'stopped') st = 'starting';
      const card = el('article', { className: 'server state-' + st.replace(/[^a-z]/g, ''), 'data-server': name });
      card.append(el('header', {},
        el('h3', { text: name }),
        el('span', { className: 'pill', text: str(s.transport) }),
        el('span', { className: 'pill state', text: st }),
        here ? el('span', { className: 'pill ok', text: 'connected here' }) : null));
      const dl = el('dl', { className: 'kv' });
      if (s.transport === 'http') kv(dl, 'URL', str(s.url), 'mono');
      else kv(dl, 'Command', str(s.commandLine || s.command), 'mono');
      kv(dl, 'Working directory', str(s.cwd), 'mono');
      kv(dl, 'Environment', names(s.env), 'mono');
      kv(dl, 'Headers', names(s.headers), 'mono');
      kv(dl, 'Configured in', str(s.source), 'mono');
      kv(dl, 'Fingerprint', str(s.fingerprint), 'mono fp');
      const tabs = Number(s.tabs) || 0;
      const calls = Number(s.calls) || 0;
      kv(dl, 'In use', tabs + (tabs === 1 ? ' tab, ' : ' tabs, ') + calls + (calls === 1 ? ' call' : ' calls') + ' in flight');
      // The server kept computing after a call was cancelled: its next
      // calls wait behind that work (the bridge measured its processes).
      const busy = Number(s.busyAfterCancelMs) || 0;
      if (busy > 0) {
        kv(dl, 'Busy', 'still finishing a cancelled call, for ' + Math.round(busy / 1000) + ' s: its next calls wait until it is done', 'busy-after-cancel');
      }
      // The bridge's own counters, the ones its metrics report.
      const tot = s.totals || {};
      const done = Number(tot.calls) || 0;
      kv(dl, 'Since the bridge started', done + (done === 1 ? ' call, ' : ' calls, ') + (Number(tot.failures) || 0) + ' failed; ' +
        byteSize(tot.bytesIn) + ' of arguments sent, ' + byteSize(tot.bytesOut) + ' of results received');
      const conn = state.conns.get(name);
      if (conn && conn.serverInfo) kv(dl, 'Server', str(conn.serverInfo.name) + ' ' + str(conn.serverInfo.version));
      card.append(dl);
      if (Array.isArray(s.warnings) && s.warnings.length) {
        card.append(el('ul', { className: 'warnings' }, ...s.warnings.map((w) => el('li', { text: str(w) }))));
      }
      if (starting) {
        card.append(el('p', { className: 'starting' },
          el('span', { className: 'spinner' }), 'Starting… ',
          el('span', { className: 'stderr-line mono', text: starting.line || '' })));
      }
      const mine = state.problems.filter((p) => str(p.server) === name);
      if (mine.length) card.append(problemList(mine));
      const lines = Array.isArray(s.stderr) ? s.stderr.map(str) : [];
      if (lines.length) {
        card.append(el('details', { className: 'stderr-pane' },
          el('summary', { className: 'small', text: 'stderr (' + lines.length + (lines.length === 1 ? ' line)' : ' lines)') }),
          el('pre', { className: 'stderr', text: lines.join('\n') })));
      }
      if (s.lastError) {
        card.append(el('div', { className: 'last-error' },
          el('strong', { text: 'Last error' }),
          el('pre', { className: 'stderr', text: str(s.lastError) })));
      }
      const buttons = el('div', { className: 'row buttons' });
      if (starting) {
        const b = el('button', { type: 'button', className: 'cancel-start', text: 'Cancel start' });
        b.onclick = () => starting.abort.abort();
        buttons.append(b);
      } else if (here) {
        const use = el('button', { type: 'button', className: 'use', text: 'Use in runner' });
        use.onclick = () => selectServer(name);
        const d = el('button', { type: 'button', className: 'disconnect', text: 'Disconnect' });
        d.onclick = () => disconnect(name);
        buttons.append(use, d);
      } else {
        const c = el('button', { type: 'button', className: 'connect primary', text: 'Connect' });
        c.onclick = () => connect(s);
        buttons.append(c);
      }
      card.append(buttons);
      cards.push(card);
    }
    // Entries that could not be used are listed too, with the reason.
    const listed = new Set(state.servers.map((s) => str(s.name)));
    const orphans = new Map();
    for (const p of state.problems) {
      const n = str(p.server);
      if (n && !listed.has(n)) orphans.set(n, (orphans.get(n) || []).concat(p));
    }
    for (const [name, list] of orphans) {
      cards.push(el('article', { className: 'server state-unusable', 'data-server': name },
        el('header', {}, el('h3', { text: name }), el('span', { className: 'pill state', text: 'not usable' })),
        problemList(list)));
    }
    morphChildren(box, cards);
  }

  function problemList(list) {
    return el('div', { className: 'card-problems', role: 'group', 'aria-label': 'Configuration problems' },
      el('strong', { text: 'Configuration problem' + (list.length === 1 ? '' : 's') }),
      el('ul', { className: 'problems' }, ...list.map((p) => el('li', {},
        el('div', { className: 'problem-msg', text: str(p.message) }),
        el('div', { className: 'mono small muted', text: [str(p.file), str(p.key)].filter(Boolean).join(' › ') })))));
  }

  function renderProblems() {
    const box = byId('problems');
    if (!state.problems.length) {
      morphChildren(box, [el('p', { className: 'muted', text: 'None.' })]);
      return;
    }
    const ul = el('ul', { className: 'problems' });
    for (const p of state.problems) {
      const where = [str(p.file), str(p.key)].filter(Boolean).join(' › ');
      ul.append(el('li', {},
        el('div', { className: 'problem-msg', text: str(p.message) }),
        el('div', { className: 'mono small muted', text: where + (p.server ? ' (server ' + str(p.server) + ')' : '') })));
    }
    morphChildren(box, [ul]);
  }

  function renderErrors() {
    const ol = byId('errors');
    const items = [];
    for (let i = state.errors.length - 1; i >= 0; i--) {
      const e = state.errors[i];
      items.push(el('li', {},
        el('time', { className: 'small muted', text: e.time.toLocaleTimeString() }), ' ',
        el('span', { className: 'error-text', text: e.text })));
    }
    morphChildren(ol, items);
    byId('errors-empty').hidden = state.errors.length > 0;
  }

  // ---- confirmation and connect -------------------------------------------------

  // confirm shows the server entry and resolves true if the person agrees.
  function confirmServer(s, reason) {
    const d = byId('confirm');
    byId('confirm-name').textContent = str(s.name);
    const r = byId('confirm-reason');
    r.textContent = reason || '';
    r.hidden = !reason;
    const dl = byId('confirm-details');
    dl.replaceChildren();
    if (s.transport === 'http') kv(dl, 'URL', str(s.url), 'mono');
    else {
      kv(dl, 'Command line', str(s.commandLine || s.command), 'mono');
      kv(dl, 'Working directory', str(s.cwd) || '(the bridge\u2019s)', 'mono');
    }
    kv(dl, 'Environment variables', names(s.env), 'mono');
    kv(dl, 'Headers', names(s.headers), 'mono');
    kv(dl, 'Configured in', str(s.source), 'mono');
    kv(dl, 'Fingerprint', str(s.fingerprint), 'mono fp');
    return new Promise((resolve) => {
      d.returnValue = '';
      d.onclose = () => resolve(d.returnValue === 'yes');
      d.showModal();
      byId('confirm-no').focus();
    });
  }

  async function connect(entry) {
    const name = str(entry.name);
    if (state.starting.has(name)) return;
    const starting = { abort: new AbortController(), line: '' };
    state.starting.set(name, starting);
    renderServers();
    let conn;
    try {
      conn = await state.client.connect(name, {
        confirm: async (s, o) => {
          state.starting.delete(name);
          renderServers();
          const yes = await confirmServer(s, o && o.reason);
          if (yes) {
            state.starting.set(name, starting);
            renderServers();
          }
          return yes;
        },
        signal: starting.abort.signal,
        onStarting: (line) => {
          starting.line = line;
          const el = document.querySelector('article.server[data-server="' + CSS.escape(name) + '"] .stderr-line');
          if (el) el.textContent = line;
        },
      });
    } catch (e) {
      state.starting.delete(name);
      renderServers();
      if (e.code !== 'declined' && e.code !== 'cancelled') addError(name + ': connect failed: ' + errorOf(e));
      refreshServers();
      return;
    }
    state.starting.delete(name);
    state.conns.set(name, { conn, tools: Array.isArray(conn.listing) ? conn.listing : [], serverInfo: { name: conn.serverName, version: conn.serverVersion } });
    renderServers();
    await refreshServers();
    selectServer(name);
  }

  async function disconnect(name) {
    if (state.call && state.call.server === name) cancelCall();
    const held = state.conns.get(name);
    state.conns.delete(name);
    if (held) {
      try {
        await held.conn.close();
      } catch (e) {
        addError(name + ': disconnect failed: ' + errorOf(e));
      }
    }
    renderServers();
    renderRunner();
    refreshServers();
  }

  // ---- tool runner -------------------------------------------------------------

  function builderMeta(tool) {
    const m = tool && tool._meta && tool._meta[BUILDER_META];
    return m && typeof m === 'object' ? m : null;
  }

  function toolLabel(t) {
    const a = t.annotations && t.annotations.title;
    return str(t.title) || str(a) || str(t.name);
  }

  function safeIcon(tool) {
    if (!Array.isArray(tool.icons)) return '';
    for (const ic of tool.icons) {
      const src = ic && typeof ic.src === 'string' ? ic.src : '';
      if (!src.startsWith('data:image/')) continue;
      const type = src.slice(5, src.search(/[;,]/)).toLowerCase();
      if (ICON_TYPES.includes(type)) return src;
    }
    return '';
  }

  // syncServerSelect lists the servers this page holds in the runner's
  // server select and reports whether the list changed.
  function syncServerSelect() {
    const sel = byId('runner-server');
    const namesHere = [...state.conns.keys()];
    const same = namesHere.length === sel.options.length && namesHere.every((n, i) => sel.options[i].value === n);
    if (same) return false;
    const current = sel.value;
    sel.replaceChildren(...namesHere.map((n) => el('option', { value: n, text: n })));
    if (namesHere.includes(current)) sel.value = current;
    return true;
  }

  function renderRunnerServers() {
    if (syncServerSelect()) renderRunner();
  }

  function selectServer(name) {
    syncServerSelect();
    if (state.conns.has(name)) byId('runner-server').value = name;
    renderRunner();
  }

  function currentTool() {
    const conn = state.conns.get(byId('runner-server').value);
    if (!conn) return null;
    const name = byId('runner-tool').value;
    return conn.tools.find((t) => str(t.name) === name) || null;
  }

  function renderRunner() {
    const have = state.conns.size > 0;
    byId('runner-empty').hidden = have;
    byId('runner-body').hidden = !have;
    syncServerSelect();
    if (!have) return;
    const conn = state.conns.get(byId('runner-server').value);
    const toolSel = byId('runner-tool');
    const keep = toolSel.value;
    const groups = new Map();
    for (const t of conn ? conn.tools : []) {
      if (!t || typeof t !== 'object') continue;
      const m = builderMeta(t);
      let g = 'Other tools (not Builder buttons)';
      if (m) {
        g = m.contract === SUPPORTED_CONTRACT ? 'Builder: ' + (str(m.category) || 'other') : 'Builder contract ' + str(m.contract) + ' (unsupported)';
      }
      if (!groups.has(g)) groups.set(g, []);
      groups.get(g).push(t);
    }
    const ordered = [...groups.keys()].sort((a, b) => (a.startsWith('Builder: ') ? 0 : 1) - (b.startsWith('Builder: ') ? 0 : 1) || a.localeCompare(b));
    toolSel.replaceChildren(...ordered.map((g) => el('optgroup', { label: g },
      ...groups.get(g).map((t) => {
        const label = toolLabel(t);
        const n = str(t.name);
        return el('option', { value: n, text: label === n ? n : label + ' (' + n + ')' });
      }))));
    if (keep && [...toolSel.options].some((o) => o.value === keep)) toolSel.value = keep;
    renderTool();
  }

  function renderTool() {
    const t = currentTool();
    const info = byId('tool-info');
    info.replaceChildren();
    const server = byId('runner-server').value;
    if (!t) {
      info.append(el('p', { className: 'muted', text: 'This server lists no tools.' }));
      byId('run').disabled = true;
      return;
    }
    byId('run').disabled = !!state.call;
    const icon = safeIcon(t);
    const head = el('div', { className: 'tool-head' });
    if (icon) head.append(el('img', { src: icon, alt: '', className: 'tool-icon', width: 32, height: 32 }));
    head.append(el('div', {},
      el('div', { className: 'tool-title', text: toolLabel(t) }),
      el('div', { className: 'mono small muted', text: str(t.name) })));
    info.append(head);
    if (t.description) info.append(el('p', { className: 'tool-desc', text: str(t.description) }));
    const m = builderMeta(t);
    if (m) {
      const bits = ['category ' + str(m.category), 'apply ' + str(m.apply), 'document ' + str(m.document)];
      if (m.stochastic) bits.push('stochastic');
      if (m.expectedSeconds !== undefined) bits.push('about ' + str(m.expectedSeconds) + ' s');
      info.append(el('p', { className: 'small muted', text: 'Builder contract ' + str(m.contract) + ': ' + bits.join(', ') }));
    } else {
      info.append(el('p', { className: 'small muted', text: 'Not a Builder button (no ' + BUILDER_META + ' metadata).' }));
    }
    const key = server + '\u0000' + str(t.name);
    if (state.schemaFor !== key) {
      state.schemaFor = key;
      state.args = prefill(t);
      byId('args').value = JSON.stringify(state.args, null, 2);
      byId('args-error').hidden = true;
      buildForm(t);
    }
    byId('new-seed').hidden = seedProps(t).length === 0;
  }

  function resolveRef(schema, root, depth) {
    let s = schema;
    for (let i = 0; i < (depth || 8) && s && typeof s === 'object' && typeof s.$ref === 'string'; i++) {
      const ref = s.$ref;
      if (!ref.startsWith('#/')) return s;
      let cur = root;
      for (const part of ref.slice(2).split('/')) {
        const k = part.replace(/~1/g, '/').replace(/~0/g, '~');
        cur = cur && typeof cur === 'object' ? cur[k] : undefined;
      }
      if (!cur || typeof cur !== 'object') return s;
      // Keywords beside $ref (title, x-megane-widget, examples) apply too.
      const rest = Object.assign({}, s);
      delete rest.$ref;
      s = Object.assign({}, cur, rest);
    }
    return s;
  }

  function properties(t) {
    const root = t.inputSchema && typeof t.inputSchema === 'object' ? t.inputSchema : {};
    const props = root.properties && typeof root.properties === 'object' ? root.properties : {};
    return Object.entries(props).map(([k, v]) => [k, resolveRef(v, root) || {}]);
  }

  function seedProps(t) {
    return properties(t).filter(([, p]) => p['x-megane-widget'] === 'seed').map(([k]) => k);
  }

  function freshSeed() {
    const a = new Uint32Array(1);
    crypto.getRandomValues(a);
    return a[0] >>> 1; // 0 .. 2^31-1: fits every integer type a server may use
  }

  // prefill builds the arguments from defaults, else first examples; a fresh
  // seed for seed widgets; never a document.
  function prefill(t) {
    const root = t.inputSchema && typeof t.inputSchema === 'object' ? t.inputSchema : {};
    const args = {};
    for (const [k, p] of properties(t)) {
      const v = initial(p, root);
      if (v !== undefined) args[k] = v;
    }
    return args;
  }

  // ---- forms from the schema (contract §4.1) ------------------------------------
  //
  // The form and the raw JSON editor (Advanced) edit one arguments object,
  // state.args: a control writes its value at its path and the JSON text
  // follows; editing the JSON rebuilds the form from it. Run validates the
  // object against the schema first and shows each message at its field.

  const MOLECULE_PRESETS = [['water', 'O'], ['methane', 'C'], ['ethylene', 'C=C'], ['methanol', 'CO'], ['ethanol', 'CCO'],
    ['acetone', 'CC(C)=O'], ['benzene', 'c1ccccc1'], ['toluene', 'Cc1ccccc1'], ['styrene', 'C=Cc1ccccc1'], ['carbon dioxide', 'O=C=O']];
  const UNITS = { angstrom: 'Å', degree: '°', 'g/cm3': 'g/cm³', kelvin: 'K', count: '' };
  const UNSUPPORTED = ['oneOf', 'anyOf', 'allOf', 'if', 'not'];
  let fieldSeq = 0;

  function symbolOf(z) {
    return Number.isInteger(z) && z >= 1 && z <= SYMBOLS.length ? SYMBOLS[z - 1] : '';
  }

  function elementOf(text) {
    const t = String(text).trim();
    if (/^\d+$/.test(t)) return Number(t);
    const i = SYMBOLS.findIndex((s) => s.toLowerCase() === t.toLowerCase());
    return i >= 0 ? i + 1 : NaN;
  }

  // molAtoms reads the atom block of a V2000 mol block: [symbol, …].
  function molAtoms(molblock) {
    if (typeof molblock !== 'string') return [];
    const lines = molblock.split(/\r?\n/);
    const n = parseInt((lines[3] || '').slice(0, 3), 10);
    if (!(n > 0)) return [];
    const out = [];
    for (let i = 0; i < n && 4 + i < lines.length; i++) out.push((lines[4 + i].slice(31, 34) || '').trim() || '?');
    return out;
  }

  function typeOf(p) {
    return Array.isArray(p.type) ? p.type.find((x) => x !== 'null') : p.type;
  }

  function getAt(obj, path) {
    let cur = obj;
    for (const k of path) cur = cur !== null && typeof cur === 'object' ? cur[k] : undefined;
    return cur;
  }

  function setAt(obj, path, v) {
    let cur = obj;
    for (let i = 0; i < path.length - 1; i++) {
      const k = path[i];
      if (cur[k] === null || typeof cur[k] !== 'object') cur[k] = typeof path[i + 1] === 'number' ? [] : {};
      cur = cur[k];
    }
    const last = path[path.length - 1];
    if (v === undefined) {
      if (Array.isArray(cur)) cur[last] = null;
      else delete cur[last];
    } else cur[last] = v;
  }

  const pathKey = (path) => JSON.stringify(path);

  // initial is a property's pre-filled value: a fresh seed, else its
  // default, else its first example; never a document.
  function initial(p, root) {
    const w = p['x-megane-widget'];
    if (w === 'document') return undefined;
    if (w === 'seed') return freshSeed();
    if (Object.prototype.hasOwnProperty.call(p, 'default')) return structuredClone(p.default);
    if (Array.isArray(p.examples) && p.examples.length) return structuredClone(p.examples[0]);
    if (!w && typeOf(p) === 'array' && p.items) {
      const it = resolveRef(p.items, root) || {};
      if (typeOf(it) === 'object' && Number(p.minItems) > 0) {
        return Array.from({ length: Number(p.minItems) }, () => initialObject(it, root));
      }
    }
    return undefined;
  }

  function initialObject(s, root) {
    const o = {};
    for (const [k, v] of Object.entries(s.properties || {})) {
      const val = initial(resolveRef(v, root) || {}, root);
      if (val !== undefined) o[k] = val;
    }
    return o;
  }

  function unitLabel(p) {
    const u = p['x-megane-unit'];
    if (u === undefined) return '';
    return Object.prototype.hasOwnProperty.call(UNITS, u) ? UNITS[u] : str(u);
  }

  // validate returns [{path, message}] for value against schema p.
  function validate(p, v, path, root, out) {
    p = resolveRef(p, root) || {};
    const w = p['x-megane-widget'];
    const t = typeOf(p);
    if (v === undefined || v === null) return out;
    if (w === 'molecule') {
      if (!v || typeof v !== 'object' || Array.isArray(v)) out.push({ path, message: 'Give a molecule.' });
      else {
        if (!str(v.name).trim()) out.push({ path: path.concat('name'), message: 'Give the molecule a name.' });
        if (!str(v.smiles).trim() && !str(v.molblock).trim()) out.push({ path: path.concat('structure'), message: 'Give a SMILES or a mol block.' });
      }
      return out;
    }
    if (w === 'document') {
      if (typeof v !== 'object' || !Array.isArray(v.elements) || !Array.isArray(v.positions)) out.push({ path, message: 'The document must be a Structure: elements, positions, cell, bonds.' });
      return out;
    }
    if (t === 'integer' || t === 'number') {
      if (typeof v !== 'number' || !Number.isFinite(v)) return out.push({ path, message: 'Enter a number.' }), out;
      if (t === 'integer' && !Number.isInteger(v)) out.push({ path, message: 'Enter a whole number.' });
      const u = unitLabel(p) ? ' ' + unitLabel(p) : '';
      if (typeof p.minimum === 'number' && v < p.minimum) out.push({ path, message: 'Must be at least ' + p.minimum + u + '.' });
      if (typeof p.maximum === 'number' && v > p.maximum) out.push({ path, message: 'Must be at most ' + p.maximum + u + '.' });
      if (typeof p.exclusiveMinimum === 'number' && v <= p.exclusiveMinimum) out.push({ path, message: 'Must be more than ' + p.exclusiveMinimum + u + '.' });
      if (typeof p.exclusiveMaximum === 'number' && v >= p.exclusiveMaximum) out.push({ path, message: 'Must be less than ' + p.exclusiveMaximum + u + '.' });
      if (typeof p.multipleOf === 'number' && p.multipleOf > 0 && Math.abs(v / p.multipleOf - Math.round(v / p.multipleOf)) > 1e-9) out.push({ path, message: 'Must be a multiple of ' + p.multipleOf + '.' });
      return out;
    }
    if (t === 'string') {
      if (typeof v !== 'string') return out.push({ path, message: 'Enter text.' }), out;
      if (Array.isArray(p.enum) && !p.enum.includes(v)) out.push({ path, message: 'Choose one of ' + p.enum.map(str).join(', ') + '.' });
      if (typeof p.maxLength === 'number' && [...v].length > p.maxLength) out.push({ path, message: 'At most ' + p.maxLength + ' characters.' });
      if (typeof p.minLength === 'number' && [...v].length < p.minLength) out.push({ path, message: 'At least ' + p.minLength + ' characters.' });
      return out;
    }
    if (t === 'boolean' && typeof v !== 'boolean') return out.push({ path, message: 'Must be true or false.' }), out;
    if (t === 'array') {
      if (!Array.isArray(v)) return out.push({ path, message: 'Must be a list.' }), out;
      if (typeof p.minItems === 'number' && v.length < p.minItems) out.push({ path, message: 'Needs at least ' + p.minItems + (p.minItems === 1 ? ' item.' : ' items.') });
      if (typeof p.maxItems === 'number' && v.length > p.maxItems) out.push({ path, message: 'At most ' + p.maxItems + ' items.' });
      if (p.items) v.forEach((x, i) => (x === null ? out.push({ path: path.concat(i), message: 'Fill this in.' }) : validate(p.items, x, path.concat(i), root, out)));
      return out;
    }
    if (t === 'object') {
      if (typeof v !== 'object' || Array.isArray(v)) return out.push({ path, message: 'Must be an object.' }), out;
      const req = Array.isArray(p.required) ? p.required : [];
      for (const k of req) if (v[k] === undefined || v[k] === null || v[k] === '') out.push({ path: path.concat(k), message: 'Required.' });
      for (const [k, s] of Object.entries(p.properties || {})) if (v[k] !== undefined) validate(s, v[k], path.concat(k), root, out);
    }
    return out;
  }

  // buildForm renders the current tool's form from state.args.
  function buildForm(t) {
    const form = byId('args-form');
    state.fields = new Map();
    const root = t.inputSchema && typeof t.inputSchema === 'object' ? t.inputSchema : {};
    const req = Array.isArray(root.required) ? root.required.map(str) : [];
    const rows = [];
    for (const [k, p] of properties(t)) rows.push(fieldFor(k, p, [k], root, req.includes(k), 0));
    if (!rows.length) rows.push(el('p', { className: 'muted small', text: 'This tool takes no arguments.' }));
    form.replaceChildren(...rows);
  }

  // changed is called by a control after it wrote state.args.
  function changed(path) {
    const f = state.fields.get(pathKey(path));
    if (f) showFieldError(f, '');
    const ta = byId('args');
    if (document.activeElement !== ta) ta.value = JSON.stringify(state.args, null, 2);
  }

  function showFieldError(f, message) {
    f.error.textContent = message;
    f.error.hidden = !message;
    if (message) f.input.setAttribute('aria-invalid', 'true');
    else f.input.removeAttribute('aria-invalid');
  }

  function register(path, input, error) {
    state.fields.set(pathKey(path), { input, error });
  }

  // fieldFor builds one labelled control with its help and error line.
  function fieldFor(name, p, path, root, required, depth) {
    p = resolveRef(p, root) || {};
    const id = 'f' + (++fieldSeq);
    const title = str(p.title) || name;
    const hasDefault = Object.prototype.hasOwnProperty.call(p, 'default');
    const label = el('label', { for: id, className: 'field-label' }, title,
      required ? el('span', { className: 'req', 'aria-hidden': 'true', text: ' *' }) : null,
      !required && !hasDefault ? el('span', { className: 'muted small', text: ' (optional)' }) : null);
    const help = p.description ? el('div', { className: 'small muted help', id: id + '-help', text: str(p.description) }) : null;
    const error = el('div', { className: 'field-error', id: id + '-err', role: 'alert', hidden: true });
    const control = controlFor(name, p, path, root, id, depth);
    const input = control.querySelector('input, select, textarea') || control;
    if (input.id !== id && !control.querySelector('#' + id)) label.removeAttribute('for');
    if (required) input.setAttribute('aria-required', 'true');
    input.setAttribute('aria-describedby', [help ? id + '-help' : '', id + '-err'].filter(Boolean).join(' '));
    register(path, input, error);
    return el('div', { className: 'field', 'data-path': pathKey(path), 'data-widget': str(p['x-megane-widget']) || typeOf(p) || '' }, label, control, help, error);
  }

  function numberInput(id, p, path, extra) {
    const v = getAt(state.args, path);
    const inp = el('input', { type: 'number', id, inputmode: 'decimal', className: 'num', ...extra });
    if (typeof p.minimum === 'number') inp.min = p.minimum;
    if (typeof p.maximum === 'number') inp.max = p.maximum;
    inp.step = typeOf(p) === 'integer' ? (p.multipleOf || 1) : (p.multipleOf || 'any');
    if (v !== undefined && v !== null) inp.value = String(v);
    inp.oninput = () => {
      const s = inp.value.trim();
      setAt(state.args, path, s === '' ? undefined : (Number.isFinite(Number(s)) && !inp.validity.badInput ? Number(s) : s));
      changed(path);
    };
    return inp;
  }

  function controlFor(name, p, path, root, id, depth) {
    const w = p['x-megane-widget'];
    const t = typeOf(p);
    const cur = getAt(state.args, path);
    if (w === 'seed') {
      const inp = numberInput(id, { type: 'integer', minimum: 0 }, path);
      const b = el('button', { type: 'button', className: 'seed-new', text: 'New seed', 'aria-label': 'New seed for ' + (str(p.title) || name) });
      b.onclick = () => {
        const s = freshSeed();
        inp.value = String(s);
        setAt(state.args, path, s);
        changed(path);
      };
      return el('div', { className: 'row tight' }, inp, b);
    }
    if (w === 'element') {
      const inp = el('input', { type: 'text', id, className: 'element', autocomplete: 'off', size: 6, placeholder: 'Fe or 26' });
      const shown = el('span', { className: 'small muted element-other', 'aria-live': 'polite' });
      const show = (z) => { shown.textContent = Number.isInteger(z) && symbolOf(z) ? symbolOf(z) + ', Z = ' + z : ''; };
      if (Number.isInteger(cur)) inp.value = symbolOf(cur) || String(cur);
      show(cur);
      inp.oninput = () => {
        const s = inp.value.trim();
        const z = elementOf(s);
        setAt(state.args, path, s === '' ? undefined : (Number.isFinite(z) ? z : s));
        show(z);
        changed(path);
      };
      return el('div', { className: 'row tight' }, inp, shown);
    }
    if (w === 'cell') return cellControl(name, p, path, id);
    if (w === 'molecule') return moleculeControl(name, p, path, id);
    if (w === 'atom') return atomControl(p, path, id);
    if (w === 'document') return documentControl(path, id);
    if (w === 'selection') {
      const inp = el('input', { type: 'text', id, placeholder: 'atom indices, e.g. 0, 3, 7' });
      if (Array.isArray(cur)) inp.value = cur.join(', ');
      inp.oninput = () => {
        const parts = inp.value.split(/[\s,]+/).filter(Boolean);
        setAt(state.args, path, parts.length ? parts.map((x) => (/^\d+$/.test(x) ? Number(x) : x)) : undefined);
        changed(path);
      };
      return inp;
    }
    // Any other widget (cell, or one this page does not know: §11) falls back
    // to the plain control of its schema.
    if (t === 'integer' || t === 'number') {
      const inp = numberInput(id, p, path);
      const u = unitLabel(p);
      return u ? el('div', { className: 'row tight' }, inp, el('span', { className: 'unit', text: u })) : inp;
    }
    if (t === 'string' && Array.isArray(p.enum)) {
      const sel = el('select', { id }, ...(Object.prototype.hasOwnProperty.call(p, 'default') ? [] : [el('option', { value: '', text: '—' })]),
        ...p.enum.map((x) => el('option', { value: str(x), text: str(x) })));
      sel.value = cur === undefined ? '' : str(cur);
      sel.onchange = () => {
        setAt(state.args, path, sel.value === '' ? undefined : sel.value);
        changed(path);
      };
      return sel;
    }
    if (t === 'string') {
      const inp = el('input', { type: 'text', id, maxlength: typeof p.maxLength === 'number' ? p.maxLength : undefined });
      if (typeof cur === 'string') inp.value = cur;
      inp.oninput = () => {
        setAt(state.args, path, inp.value === '' ? undefined : inp.value);
        changed(path);
      };
      return inp;
    }
    if (t === 'boolean') {
      const inp = el('input', { type: 'checkbox', id });
      inp.checked = cur === true;
      inp.onchange = () => {
        setAt(state.args, path, inp.checked);
        changed(path);
      };
      return inp;
    }
    if (t === 'array' && p.items) {
      const it = resolveRef(p.items, root) || {};
      const n = p.minItems;
      if ((typeOf(it) === 'number' || typeOf(it) === 'integer') && n === p.maxItems && n >= 1 && n <= 9) {
        const box = el('div', { className: 'row tight vector', id, role: 'group' });
        for (let i = 0; i < n; i++) {
          const sub = numberInput(id + '-' + i, it, path.concat(i), { 'aria-label': (str(p.title) || name) + ' ' + (i + 1) + ' of ' + n });
          box.append(sub);
        }
        const u = unitLabel(p) || unitLabel(it);
        if (u) box.append(el('span', { className: 'unit', text: u }));
        return box;
      }
      if (typeOf(it) === 'object' && depth === 0) return tableControl(name, p, it, path, root, id);
    }
    if (t === 'object' && p.properties && depth === 0 && !UNSUPPORTED.some((k) => p[k])) {
      const req = Array.isArray(p.required) ? p.required : [];
      return el('fieldset', { id, className: 'sub' }, el('legend', { className: 'small muted', text: str(p.title) || name }),
        ...Object.entries(p.properties).map(([k, s]) => fieldFor(k, s, path.concat(k), root, req.includes(k), depth + 1)));
    }
    return jsonControl(path, id);
  }

  // cellControl: three lattice vectors (rows, Å) and the orthorhombic
  // a, b, c shortcut that fills the diagonal.
  function cellControl(name, p, path, id) {
    const label = str(p.title) || name;
    const box = el('div', { className: 'cell', id, role: 'group', 'aria-label': label + ' (Å)' });
    const inputs = [];
    for (let r = 0; r < 3; r++) {
      const row = el('div', { className: 'row tight' }, el('span', { className: 'small muted', text: 'abc'[r] }));
      for (let c = 0; c < 3; c++) {
        const inp = numberInput(id + '-' + (3 * r + c), { type: 'number' }, path.concat(3 * r + c), { 'aria-label': label + ' vector ' + 'abc'[r] + ' ' + 'xyz'[c] });
        inputs.push(inp);
        row.append(inp);
      }
      row.append(el('span', { className: 'unit', text: 'Å' }));
      box.append(row);
    }
    const abc = [0, 1, 2].map((i) => el('input', { type: 'number', className: 'num', step: 'any', min: 0, 'aria-label': label + ': orthorhombic ' + 'abc'[i] }));
    const set = el('button', { type: 'button', className: 'cell-abc', text: 'Set orthorhombic a, b, c' });
    set.onclick = () => {
      const v = [0, 0, 0, 0, 0, 0, 0, 0, 0];
      abc.forEach((inp, i) => { v[4 * i] = Number(inp.value) || 0; });
      setAt(state.args, path, v);
      v.forEach((x, i) => { inputs[i].value = String(x); });
      changed(path);
    };
    box.append(el('div', { className: 'row tight' }, el('span', { className: 'small muted', text: 'or a, b, c:' }), ...abc, set));
    return box;
  }

  // jsonControl edits one value the form cannot show as JSON text.
  function jsonControl(path, id) {
    const ta = el('textarea', { id, rows: 3, spellcheck: 'false', className: 'json-field' });
    const cur = getAt(state.args, path);
    ta.value = cur === undefined ? '' : JSON.stringify(cur, null, 2);
    ta.oninput = () => {
      let v;
      try {
        v = ta.value.trim() === '' ? undefined : JSON.parse(ta.value);
      } catch (e) {
        v = ta.value; // validation says it is not JSON
      }
      setAt(state.args, path, v);
      changed(path);
    };
    return ta;
  }

  function moleculeControl(name, p, path, id) {
    const cur = getAt(state.args, path);
    const v = cur && typeof cur === 'object' ? cur : {};
    const kind = v.molblock ? 'molblock' : 'smiles';
    const nameIn = el('input', { type: 'text', id, placeholder: 'name, e.g. water', 'aria-label': (str(p.title) || name) + ' name' });
    nameIn.value = str(v.name);
    const kindSel = el('select', { 'aria-label': (str(p.title) || name) + ': given as' },
      el('option', { value: 'smiles', text: 'SMILES' }), el('option', { value: 'molblock', text: 'Mol block (V2000, 3D)' }));
    kindSel.value = kind;
    const smiles = el('input', { type: 'text', className: 'mono', placeholder: 'SMILES, e.g. O', 'aria-label': (str(p.title) || name) + ' SMILES' });
    smiles.value = str(v.smiles);
    const mol = el('textarea', { rows: 6, spellcheck: 'false', className: 'mono', placeholder: 'V2000 mol block', 'aria-label': (str(p.title) || name) + ' mol block' });
    mol.value = str(v.molblock);
    // A few common molecules (this page has no Builder library to offer).
    const preset = el('select', { className: 'preset', 'aria-label': (str(p.title) || name) + ': preset' },
      el('option', { value: '', text: 'Preset…' }), ...MOLECULE_PRESETS.map(([n, sm]) => el('option', { value: n, text: n + ' (' + sm + ')' })));
    preset.onchange = () => {
      const hit = MOLECULE_PRESETS.find(([n]) => n === preset.value);
      if (!hit) return;
      nameIn.value = hit[0];
      kindSel.value = 'smiles';
      smiles.value = hit[1];
      preset.value = '';
      write();
    };
    const err = el('div', { className: 'field-error', role: 'alert', hidden: true });
    const nameErr = el('div', { className: 'field-error', role: 'alert', hidden: true });
    const write = () => {
      smiles.hidden = kindSel.value !== 'smiles';
      mol.hidden = kindSel.value !== 'molblock';
      const o = { name: nameIn.value };
      if (kindSel.value === 'smiles' && smiles.value.trim()) o.smiles = smiles.value.trim();
      if (kindSel.value === 'molblock' && mol.value.trim()) o.molblock = mol.value;
      const empty = !o.name && !o.smiles && !o.molblock;
      setAt(state.args, path, empty ? undefined : o);
      changed(path);
      refreshAtoms();
    };
    smiles.hidden = kind !== 'smiles';
    mol.hidden = kind !== 'molblock';
    nameIn.oninput = write;
    kindSel.onchange = write;
    smiles.oninput = write;
    mol.oninput = write;
    register(path.concat('name'), nameIn, nameErr);
    register(path.concat('structure'), kindSel.value === 'smiles' ? smiles : mol, err);
    kindSel.addEventListener('change', () => register(path.concat('structure'), kindSel.value === 'smiles' ? smiles : mol, err));
    return el('div', { className: 'molecule', role: 'group' }, el('div', { className: 'row tight' }, nameIn, kindSel, preset), nameErr, smiles, mol, err);
  }

  // atomControl: a plain number until the molecule it names has a mol
  // block, then a list of that molecule's atoms.
  function atomControl(p, path, id) {
    const box = el('div', { className: 'atom', 'data-of': pathKey(path.slice(0, -1).concat(str(p['x-megane-of']))) });
    const inp = numberInput(id, { type: 'integer', minimum: 0 }, path);
    const sel = el('select', { 'aria-label': 'Atom of ' + str(p['x-megane-of']), hidden: true });
    sel.onchange = () => {
      inp.value = sel.value;
      setAt(state.args, path, Number(sel.value));
      changed(path);
    };
    const note = el('span', { className: 'small muted' });
    box.append(el('div', { className: 'row tight' }, inp, sel, note));
    box._update = () => {
      const mol = getAt(state.args, JSON.parse(box.dataset.of));
      const atoms = molAtoms(mol && mol.molblock);
      if (!atoms.length) {
        sel.hidden = true;
        note.textContent = mol && mol.smiles ? '0-based index of an atom of the SMILES, as the server numbers them' : '';
        return;
      }
      sel.replaceChildren(...atoms.map((s, i) => el('option', { value: String(i), text: i + ': ' + s })));
      const v = getAt(state.args, path);
      if (Number.isInteger(v) && v < atoms.length) sel.value = String(v);
      sel.hidden = false;
      note.textContent = atoms.length + ' atoms';
    };
    return box;
  }

  function refreshAtoms() {
    for (const a of document.querySelectorAll('#args-form .atom')) if (a._update) a._update();
  }

  function documentControl(path, id) {
    const box = el('div', { className: 'document' });
    const cur = getAt(state.args, path);
    const n = cur && Array.isArray(cur.elements) ? cur.elements.length : 0;
    const say = el('span', { id, className: 'small', tabindex: '-1', text: cur ? 'A structure of ' + n + ' atoms.' : 'No document: this page has none open.' });
    const use = el('button', { type: 'button', className: 'use-result', text: 'Use the last result' });
    use.disabled = !state.lastStructure;
    use.onclick = () => {
      setAt(state.args, path, structuredClone(state.lastStructure));
      changed(path);
      say.textContent = 'The last result: ' + state.lastStructure.elements.length + ' atoms.';
    };
    box.append(el('div', { className: 'row tight' }, say, use), el('div', { className: 'small muted', text: 'Or paste a Structure into the arguments as JSON (Advanced).' }));
    return box;
  }

  // tableControl edits an array of objects, one row per item.
  function tableControl(name, p, it, path, root, id) {
    const items = getAt(state.args, path);
    const list = Array.isArray(items) ? items : [];
    const props = Object.entries(it.properties || {});
    const req = Array.isArray(it.required) ? it.required : [];
    const box = el('div', { className: 'table-field', id, role: 'group' });
    list.forEach((row, i) => {
      const rowBox = el('fieldset', { className: 'table-row' }, el('legend', { className: 'small muted', text: (str(it.title) || 'Row') + ' ' + (i + 1) }));
      for (const [k, s] of props) rowBox.append(fieldFor(k, s, path.concat(i, k), root, req.includes(k), 1));
      const rm = el('button', { type: 'button', text: 'Remove', 'aria-label': 'Remove ' + (str(it.title) || 'row') + ' ' + (i + 1) });
      rm.disabled = typeof p.minItems === 'number' && list.length <= p.minItems;
      rm.onclick = () => {
        list.splice(i, 1);
        setAt(state.args, path, list);
        changed(path);
        buildForm(currentTool());
      };
      rowBox.append(rm);
      box.append(rowBox);
    });
    const add = el('button', { type: 'button', className: 'add-row', text: 'Add ' + (str(it.title) || 'row').toLowerCase() });
    add.disabled = typeof p.maxItems === 'number' && list.length >= p.maxItems;
    add.onclick = () => {
      list.push(initialObject(it, root));
      setAt(state.args, path, list);
      changed(path);
      buildForm(currentTool());
    };
    box.append(add);
    return box;
  }

  // checkForm validates state.args; it shows each message at its field (the
  // rest under the form) and focuses the first. It reports whether all is well.
  function checkForm(t) {
    for (const f of state.fields.values()) showFieldError(f, '');
    const root = t.inputSchema && typeof t.inputSchema === 'object' ? t.inputSchema : { type: 'object' };
    const errs = validate(Object.assign({ type: 'object' }, root), state.args, [], root, []);
    const loose = [];
    let first = null;
    for (const e of errs) {
      let f = null;
      for (let n = e.path.length; n > 0 && !f; n--) f = state.fields.get(pathKey(e.path.slice(0, n)));
      if (f && f.error.hidden) {
        showFieldError(f, e.message);
        first = first || f.input;
      } else if (!f) loose.push(e.path.join('.') + ': ' + e.message);
    }
    const err = byId('args-error');
    if (errs.length) {
      err.textContent = 'Check the arguments: ' + (errs.length === 1 ? 'one field needs' : errs.length + ' fields need') + ' attention.' + (loose.length ? ' ' + loose.join(' ') : '');
      err.hidden = false;
      if (first) first.focus();
      return false;
    }
    return true;
  }

  function parseArgs() {
    const err = byId('args-error');
    err.hidden = true;
    let v;
    try {
      v = JSON.parse(byId('args').value);
    } catch (e) {
      err.textContent = 'The arguments are not valid JSON: ' + e.message;
      err.hidden = false;
      return null;
    }
    if (!v || typeof v !== 'object' || Array.isArray(v)) {
      err.textContent = 'The arguments must be one JSON object.';
      err.hidden = false;
      return null;
    }
    return v;
  }

  function newSeed() {
    const t = currentTool();
    const args = t && parseArgs();
    if (!args) return;
    for (const k of seedProps(t)) args[k] = freshSeed();
    state.args = args;
    byId('args').value = JSON.stringify(args, null, 2);
    buildForm(t);
  }

  // onArgsText follows the raw JSON editor: a valid object becomes the
  // arguments and the form shows it.
  function onArgsText() {
    const t = currentTool();
    if (!t) return;
    let v;
    try {
      v = JSON.parse(byId('args').value);
    } catch (e) {
      return;
    }
    if (!v || typeof v !== 'object' || Array.isArray(v)) return;
    state.args = v;
    byId('args-error').hidden = true;
    buildForm(t);
  }

  function resetArgs() {
    state.schemaFor = null;
    renderTool();
  }

  function setCalling(on) {
    byId('run').disabled = on || !currentTool();
    byId('cancel').disabled = !on;
    byId('runner-server').disabled = on;
    byId('runner-tool').disabled = on;
  }

  async function run() {
    const t = currentTool();
    const server = byId('runner-server').value;
    const held = state.conns.get(server);
    if (!t || !held || state.call) return;
    const args = parseArgs();
    if (!args) return;
    state.args = args;
    if (!checkForm(t)) return;
    const call = { server, tool: str(t.name), abort: new AbortController(), started: performance.now() };
    announce('Running ' + toolLabel(t) + '.');
    state.call = call;
    setCalling(true);
    byId('result').hidden = true;
    const status = byId('call-status');
    const bar = byId('call-progress');
    bar.removeAttribute('value'); // indeterminate until the first progress
    bar.max = 1;
    byId('call-message').textContent = 'Running ' + toolLabel(t) + '…';
    status.hidden = false;
    const pending = held.conn.call(call.tool, args, {
      signal: call.abort.signal,
      onProgress: (fraction, message) => {
        if (state.call !== call) return;
        if (fraction !== null) bar.value = fraction;
        byId('call-message').textContent = message !== null ? message : (fraction !== null ? Math.round(fraction * 100) + '%' : 'Working…');
      },
    });
    refreshServers(); // the server's card counts the call in flight
    const outcome = await pending;
    if (state.call === call) state.call = null;
    setCalling(false);
    status.hidden = true;
    if (outcome.kind === 'cancelled') showCancelled(call);
    else showResult(t, outcome);
    const kind = outcome.ok ? 'ok' : str(outcome.kind) || 'error';
    const message = outcome.ok ? str(outcome.summary) : str(outcome.error);
    record({ time: new Date().toISOString(), server, tool: call.tool, args, outcome: kind, message: message.slice(0, 300), ms: performance.now() - call.started });
    announce(toolLabel(t) + (kind === 'ok' ? ' finished. ' : kind === 'cancelled' ? ' was cancelled.' : ' failed. ') + (kind === 'cancelled' ? '' : message.slice(0, 200)));
    refreshServers();
  }

  function cancelCall() {
    const call = state.call;
    if (!call) return;
    byId('call-message').textContent = 'Cancelling…';
    byId('cancel').disabled = true;
    call.abort.abort();
  }

  function showCancelled(call) {
    const box = byId('result');
    resetResult();
    box.hidden = false;
    const e = byId('result-error');
    e.textContent = 'Cancelled: ' + call.tool + ' was stopped before it finished.';
    e.hidden = false;
    box.dataset.outcome = 'cancelled';
  }

  function resetResult() {
    byId('result-error').hidden = true;
    byId('result-text').textContent = '';
    byId('result-summary').replaceChildren();
    byId('result-figure').hidden = true;
    byId('result-raw').hidden = true;
    byId('result-raw').textContent = '';
    byId('result-json').hidden = true;
    state.scene = null;
    byId('result-tree').replaceChildren();
  }

  // cut shortens a text to MAX_TEXT characters.
  function cut(text) {
    return text.length > MAX_TEXT ? text.slice(0, MAX_TEXT) + '… (' + text.length + ' characters)' : text;
  }

  // byteSize writes a count of bytes for people: 512 B, 1.5 KiB, 40.2 MiB.
  function byteSize(v) {
    let n = Number(v) || 0;
    if (n < 1024) return n + ' B';
    const units = ['KiB', 'MiB', 'GiB', 'TiB'];
    let i = -1;
    do { n /= 1024; i++; } while (n >= 1024 && i < units.length - 1);
    return n.toFixed(1) + ' ' + units[i];
  }

  function fmt(n) {
    return Number.isFinite(n) ? (Math.round(n * 1000) / 1000).toString() : str(n);
  }

  function describeCell(cell) {
    if (cell === null) return 'none (not periodic)';
    if (!Array.isArray(cell) || cell.length !== 9 || !cell.every(Number.isFinite)) return 'invalid: ' + str(cell).slice(0, 200);
    const off = [1, 2, 3, 5, 6, 7].every((i) => cell[i] === 0);
    if (off) return fmt(cell[0]) + ' × ' + fmt(cell[4]) + ' × ' + fmt(cell[8]) + ' Å (orthorhombic)';
    return '[' + [0, 3, 6].map((i) => '[' + cell.slice(i, i + 3).map(fmt).join(', ') + ']').join(', ') + '] Å';
  }

  // showResult shows a call's outcome (the client module's: ok with the
  // structured content and the summary text, or an error sentence).
  function showResult(t, outcome) {
    const box = byId('result');
    resetResult();
    box.hidden = false;
    const e = byId('result-error');
    if (!outcome.ok) {
      e.textContent = cut(str(outcome.error));
      e.hidden = false;
      box.dataset.outcome = outcome.kind === 'tool-error' ? 'tool-error' : 'error';
      addError(str(t.name) + ': ' + str(outcome.error));
      return;
    }
    box.dataset.outcome = 'ok';
    byId('result-text').textContent = cut(str(outcome.summary));
    if (outcome.result !== undefined) showTree(outcome.result);
    const sc = outcome.result;
    const st = sc && typeof sc === 'object' ? sc.structure : null;
    const dl = byId('result-summary');
    if (!st || typeof st !== 'object') {
      if (sc !== undefined) {
        const raw = byId('result-raw');
        raw.textContent = JSON.stringify(sc, null, 2).slice(0, 20000);
        raw.hidden = false;
      }
      return;
    }
    const elements = Array.isArray(st.elements) ? st.elements : [];
    const positions = Array.isArray(st.positions) ? st.positions : [];
    if (elements.length && positions.length === 3 * elements.length) state.lastStructure = st;
    kv(dl, 'Name', str(sc.name));
    kv(dl, 'Atoms', String(elements.length), 'atoms');
    kv(dl, 'Cell', describeCell(st.cell));
    kv(dl, 'Bonds', String(Array.isArray(st.bonds) ? st.bonds.length : 0), 'bonds');
    if (positions.length !== 3 * elements.length) {
      kv(dl, 'Invalid', 'positions has ' + positions.length + ' numbers for ' + elements.length + ' atoms', 'error');
    }
    const warnings = Array.isArray(sc.warnings) ? sc.warnings : [];
    kv(dl, 'Warnings', warnings.length ? el('ul', { className: 'warnings' }, ...warnings.map((w) => el('li', { text: str(w) }))) : 'none', 'warnings');
    const prov = sc.provenance && typeof sc.provenance === 'object' ? sc.provenance : null;
    if (prov) {
      kv(dl, 'Provenance', el('ul', { className: 'provenance' }, ...Object.entries(prov).map(([k, v]) => el('li', {},
        el('span', { className: 'mono', text: k }), ': ', el('span', { className: 'mono', text: str(v) })))), 'provenance');
    }
    if (positions.length === 3 * elements.length && elements.length) drawAtoms(elements, positions, st.cell);
  }

  // ---- history of this page's runs (kept in localStorage) -------------------

  const HISTORY_KEY = 'megane-bridge.runner.history';
  const MAX_HISTORY = 100;
  const MAX_HISTORY_ARGS = 64 * 1024; // characters of arguments kept per run

  function loadHistory() {
    try {
      const v = JSON.parse(localStorage.getItem(HISTORY_KEY) || '[]');
      return Array.isArray(v) ? v.filter((h) => h && typeof h === 'object') : [];
    } catch (e) {
      return [];
    }
  }

  function saveHistory(list) {
    try {
      localStorage.setItem(HISTORY_KEY, JSON.stringify(list));
    } catch (e) {
      // Storage full or refused: the history of this page load still shows.
    }
  }

  function record(entry) {
    const text = JSON.stringify(entry.args);
    if (text.length > MAX_HISTORY_ARGS) {
      entry.args = null;
      entry.argsNote = 'arguments of ' + text.length + ' characters were not kept';
    }
    state.history = [entry].concat(loadHistory()).slice(0, MAX_HISTORY);
    saveHistory(state.history);
    renderHistory();
  }

  function duration(ms) {
    return ms < 1000 ? Math.round(ms) + ' ms' : (ms / 1000).toFixed(ms < 10000 ? 1 : 0) + ' s';
  }

  function renderHistory() {
    const ol = byId('history');
    const items = state.history.map((h, i) => {
      const when = new Date(h.time);
      const li = el('li', { className: 'run outcome-' + str(h.outcome), 'data-index': String(i) },
        el('div', { className: 'row tight' },
          el('time', { className: 'small muted', datetime: str(h.time), text: when.toLocaleDateString() + ' ' + when.toLocaleTimeString() }),
          el('strong', { className: 'mono', text: str(h.server) + ' › ' + str(h.tool) }),
          el('span', { className: 'pill outcome', text: str(h.outcome) }),
          el('span', { className: 'small muted', text: duration(Number(h.ms) || 0) })),
        h.message ? el('div', { className: 'small history-msg', text: str(h.message) }) : null,
        el('details', { className: 'history-args' }, el('summary', { className: 'small', text: 'Arguments' }),
          el('pre', { text: h.args ? JSON.stringify(h.args, null, 2) : str(h.argsNote) })));
      const again = el('button', { type: 'button', className: 'rerun', text: 'Run again', 'aria-label': 'Run again: ' + str(h.tool) });
      again.disabled = !h.args;
      again.onclick = () => rerun(h, true);
      const load = el('button', { type: 'button', className: 'load-args', text: 'Load arguments', 'aria-label': 'Load arguments: ' + str(h.tool) });
      load.disabled = !h.args;
      load.onclick = () => rerun(h, false);
      li.append(el('div', { className: 'row tight' }, again, load));
      return li;
    });
    morphChildren(ol, items);
    byId('history-empty').hidden = state.history.length > 0;
    byId('history-clear').hidden = state.history.length === 0;
  }

  // rerun puts a past run's tool and arguments into the runner (and runs
  // them): its server must be connected from this page.
  function rerun(h, go) {
    const msg = byId('history-status');
    const held = state.conns.get(str(h.server));
    if (!held) {
      msg.textContent = 'Connect ' + str(h.server) + ' first: its card is under Servers.';
      return;
    }
    if (!held.tools.some((t) => str(t.name) === str(h.tool))) {
      msg.textContent = str(h.server) + ' no longer lists ' + str(h.tool) + '.';
      return;
    }
    if (state.call) {
      msg.textContent = 'A call is running; wait for it or cancel it.';
      return;
    }
    msg.textContent = '';
    byId('runner-server').value = str(h.server);
    renderRunner();
    byId('runner-tool').value = str(h.tool);
    renderTool();
    state.args = structuredClone(h.args);
    byId('args').value = JSON.stringify(state.args, null, 2);
    buildForm(currentTool());
    byId('runner-h').scrollIntoView({ block: 'start' });
    if (go) run();
    else byId('runner-tool').focus();
  }

  // ---- raw result: a collapsible JSON tree ----------------------------------

  const TREE_PAGE = 200; // children shown per level before "more"

  function treeNode(key, v) {
    const label = key === null ? null : el('span', { className: 'jkey', text: key + ': ' });
    if (v === null || typeof v !== 'object') {
      const cls = v === null ? 'jnull' : typeof v === 'string' ? 'jstr' : typeof v === 'number' ? 'jnum' : 'jbool';
      const text = typeof v === 'string' ? JSON.stringify(v.length > 2000 ? v.slice(0, 2000) + '…' : v) : String(v);
      return el('li', { 'data-key': key }, label, el('span', { className: cls, text }));
    }
    const entries = Array.isArray(v) ? v.map((x, i) => [String(i), x]) : Object.entries(v);
    const brief = Array.isArray(v) ? '[' + v.length + ']' : '{' + entries.length + '}';
    const d = el('details', {}, el('summary', {}, label, el('span', { className: 'muted', text: brief })));
    let filled = false;
    d.addEventListener('toggle', () => {
      if (!d.open || filled) return;
      filled = true;
      const ul = el('ul');
      const more = (from) => {
        for (const [k, x] of entries.slice(from, from + TREE_PAGE)) ul.append(treeNode(k, x));
        if (entries.length > from + TREE_PAGE) {
          const b = el('button', { type: 'button', className: 'small', text: 'Show ' + Math.min(TREE_PAGE, entries.length - from - TREE_PAGE) + ' more of ' + (entries.length - from - TREE_PAGE) });
          b.onclick = () => { b.parentElement.remove(); more(from + TREE_PAGE); };
          ul.append(el('li', {}, b));
        }
      };
      more(0);
      d.append(ul);
    });
    return el('li', { 'data-key': key }, d);
  }

  function showTree(value) {
    state.rawResult = value;
    const tree = byId('result-tree');
    const root = treeNode(null, value);
    tree.replaceChildren(root);
    const top = root.querySelector('details');
    if (top) top.open = true;
    byId('result-json').hidden = value === undefined;
    byId('copy-status').textContent = '';
  }

  async function copyResult() {
    const text = JSON.stringify(state.rawResult, null, 2);
    const say = byId('copy-status');
    try {
      await navigator.clipboard.writeText(text);
      say.textContent = 'Copied the result (' + text.length + ' characters).';
    } catch (e) {
      say.textContent = 'Could not copy: ' + errorOf(e);
    }
  }

  // ---- picture -----------------------------------------------------------------

  function colorOf(z) {
    return COLORS[z] || 'hsl(' + ((z * 47) % 360) + ', 55%, 62%)';
  }

  // drawAtoms shows a structure in the picture; paint draws it from the
  // current view (state.view: two angles and a zoom), which dragging, the
  // wheel and the keyboard (arrows, + and -, 0) change.
  function drawAtoms(elements, positions, cell) {
    state.scene = { elements, positions, cell };
    state.view = { ay: -0.6, ax: 0.45, zoom: 1 };
    paint();
    legendFor(elements);
  }

  function paint() {
    if (!state.scene) return;
    const { elements, positions, cell } = state.scene;
    const canvas = byId('result-canvas');
    const fig = byId('result-figure');
    fig.hidden = false;
    const dpr = window.devicePixelRatio || 1;
    const cssW = canvas.clientWidth || 560;
    const cssH = Math.round(cssW * 0.62);
    canvas.width = Math.round(cssW * dpr);
    canvas.height = Math.round(cssH * dpr);
    const ctx = canvas.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.fillStyle = '#1b2230';
    ctx.fillRect(0, 0, cssW, cssH);

    // Rotate about y, then about x.
    const ay = state.view.ay;
    const ax = state.view.ax;
    const cy = Math.cos(ay);
    const sy = Math.sin(ay);
    const cx = Math.cos(ax);
    const sx = Math.sin(ax);
    // The centre of the unrotated structure: the picture turns about it.
    let c0 = [0, 0, 0];
    {
      const lo = [Infinity, Infinity, Infinity];
      const hi = [-Infinity, -Infinity, -Infinity];
      for (let i = 0; i < positions.length; i += 3) {
        for (let k = 0; k < 3; k++) {
          const v = positions[i + k];
          if (v < lo[k]) lo[k] = v;
          if (v > hi[k]) hi[k] = v;
        }
      }
      if (Array.isArray(cell) && cell.length === 9 && cell.every(Number.isFinite)) {
        for (let k = 0; k < 3; k++) {
          lo[k] = Math.min(lo[k], 0, cell[k], cell[3 + k], cell[6 + k]);
          hi[k] = Math.max(hi[k], cell[k] + cell[3 + k] + cell[6 + k]);
        }
      }
      if (lo.every(Number.isFinite)) c0 = [0, 1, 2].map((k) => (lo[k] + hi[k]) / 2);
    }
    const project = (x, y, z) => {
      x -= c0[0];
      y -= c0[1];
      z -= c0[2];
      const x1 = cy * x + sy * z;
      const z1 = -sy * x + cy * z;
      const y2 = cx * y - sx * z1;
      const z2 = sx * y + cx * z1;
      return [x1, -y2, z2];
    };
    const n = elements.length;
    const stride = n > MAX_DRAWN_ATOMS ? Math.ceil(n / MAX_DRAWN_ATOMS) : 1;
    const pts = [];
    for (let i = 0; i < n; i += stride) {
      const p = project(positions[3 * i], positions[3 * i + 1], positions[3 * i + 2]);
      if (p.every(Number.isFinite)) pts.push([p[0], p[1], p[2], elements[i]]);
    }
    const corners = [];
    if (Array.isArray(cell) && cell.length === 9 && cell.every(Number.isFinite)) {
      for (let c = 0; c < 8; c++) {
        const f = [c & 1, (c >> 1) & 1, (c >> 2) & 1];
        const v = [0, 1, 2].map((k) => f[0] * cell[k] + f[1] * cell[3 + k] + f[2] * cell[6 + k]);
        corners.push(project(v[0], v[1], v[2]));
      }
    }
    // Fit a sphere around everything, so turning does not rescale.
    let rad = 1e-6;
    for (const p of pts.concat(corners)) rad = Math.max(rad, Math.hypot(p[0], p[1], p[2]));
    const minX = -rad;
    const maxX = rad;
    const minY = -rad;
    const maxY = rad;
    const pad = 16;
    const span = Math.max(maxX - minX, maxY - minY, 1e-6);
    const scale = state.view.zoom * Math.min((cssW - 2 * pad) / Math.max(maxX - minX, 1e-6), (cssH - 2 * pad) / Math.max(maxY - minY, 1e-6));
    const ox = (cssW - (maxX - minX) * scale) / 2 - minX * scale;
    const oy = (cssH - (maxY - minY) * scale) / 2 - minY * scale;
    // Atom radius: about a third of the mean spacing, within 1.5..9 px.
    const r = Math.max(1.5, Math.min(9, (span * scale) / Math.cbrt(Math.max(pts.length, 1)) / 3));

    if (corners.length === 8) {
      ctx.strokeStyle = 'rgba(200, 210, 230, 0.55)';
      ctx.lineWidth = 1;
      ctx.beginPath();
      for (let a = 0; a < 8; a++) {
        for (const bit of [1, 2, 4]) {
          const b = a | bit;
          if (b === a) continue;
          ctx.moveTo(corners[a][0] * scale + ox, corners[a][1] * scale + oy);
          ctx.lineTo(corners[b][0] * scale + ox, corners[b][1] * scale + oy);
        }
      }
      ctx.stroke();
    }
    pts.sort((p, q) => p[2] - q[2]); // far first
    let minZ = Infinity;
    let maxZ = -Infinity;
    for (const p of pts) {
      minZ = Math.min(minZ, p[2]);
      maxZ = Math.max(maxZ, p[2]);
    }
    const big = pts.length > 20000;
    for (const p of pts) {
      const x = p[0] * scale + ox;
      const y = p[1] * scale + oy;
      const depth = maxZ > minZ ? (p[2] - minZ) / (maxZ - minZ) : 1;
      ctx.globalAlpha = 0.55 + 0.45 * depth;
      ctx.fillStyle = colorOf(p[3]);
      if (big) {
        ctx.fillRect(x - r / 2, y - r / 2, r, r);
      } else {
        ctx.beginPath();
        ctx.arc(x, y, r, 0, 2 * Math.PI);
        ctx.fill();
        ctx.strokeStyle = 'rgba(0, 0, 0, 0.35)';
        ctx.stroke();
      }
    }
    ctx.globalAlpha = 1;
    state.scene.stride = stride;
  }

  function legendFor(elements) {
    const stride = state.scene.stride || 1;
    const counts = new Map();
    for (const z of elements) counts.set(z, (counts.get(z) || 0) + 1);
    const legend = byId('result-legend');
    legend.replaceChildren();
    for (const [z, c] of [...counts.entries()].sort((a, b) => a[0] - b[0])) {
      const sw = el('span', { className: 'swatch', 'data-z': String(z) });
      sw.style.background = colorOf(z);
      legend.append(el('span', { className: 'legend-item' }, sw, (SYMBOLS[z - 1] || 'Z=' + z) + ' × ' + c));
    }
    if (stride > 1) legend.append(el('span', { className: 'muted', text: '(1 in ' + stride + ' atoms drawn)' }));
  }

  // turnable lets the picture be turned (drag, arrow keys) and zoomed
  // (wheel, + and -); 0 or a double click resets the view.
  function turnable(canvas) {
    let drag = null;
    let queued = false;
    const redraw = () => {
      if (queued) return;
      queued = true;
      requestAnimationFrame(() => {
        queued = false;
        paint();
      });
    };
    const turn = (dy, dx) => {
      if (!state.view) return;
      state.view.ay += dy;
      state.view.ax = Math.max(-Math.PI / 2, Math.min(Math.PI / 2, state.view.ax + dx));
      redraw();
    };
    const zoom = (f) => {
      if (!state.view) return;
      state.view.zoom = Math.max(0.2, Math.min(20, state.view.zoom * f));
      redraw();
    };
    canvas.addEventListener('pointerdown', (e) => {
      drag = { x: e.clientX, y: e.clientY };
      canvas.setPointerCapture(e.pointerId);
    });
    canvas.addEventListener('pointermove', (e) => {
      if (!drag) return;
      turn((e.clientX - drag.x) * 0.01, (e.clientY - drag.y) * 0.01);
      drag = { x: e.clientX, y: e.clientY };
    });
    canvas.addEventListener('pointerup', () => { drag = null; });
    canvas.addEventListener('pointercancel', () => { drag = null; });
    canvas.addEventListener('wheel', (e) => {
      e.preventDefault();
      zoom(Math.exp(-e.deltaY * 0.0015));
    }, { passive: false });
    canvas.addEventListener('dblclick', () => {
      if (state.view) Object.assign(state.view, { ay: -0.6, ax: 0.45, zoom: 1 });
      redraw();
    });
    canvas.addEventListener('keydown', (e) => {
      const step = 0.15;
      const keys = {
        ArrowLeft: () => turn(-step, 0), ArrowRight: () => turn(step, 0), ArrowUp: () => turn(0, -step), ArrowDown: () => turn(0, step),
        '+': () => zoom(1.2), '=': () => zoom(1.2), '-': () => zoom(1 / 1.2),
        0: () => { Object.assign(state.view, { ay: -0.6, ax: 0.45, zoom: 1 }); redraw(); },
      };
      if (!keys[e.key] || !state.view) return;
      e.preventDefault();
      keys[e.key]();
    });
  }

  // ---- start -----------------------------------------------------------------

  function start() {
    state.client = client.createBridge(socketURL(), { token: pageToken, auth: pageAuth, onStatus, onServerClosed: onClosed });
    byId('reconnect').onclick = openSocket;
    byId('refresh').onclick = refreshServers;
    byId('runner-server').onchange = () => renderRunner();
    byId('runner-tool').onchange = () => renderTool();
    byId('run').onclick = run;
    byId('cancel').onclick = cancelCall;
    byId('new-seed').onclick = newSeed;
    byId('reset-args').onclick = resetArgs;
    byId('copy-result').onclick = copyResult;
    turnable(byId('result-canvas'));
    byId('history-clear').onclick = () => {
      state.history = [];
      saveHistory([]);
      renderHistory();
      byId('history-status').textContent = 'History cleared.';
    };
    state.history = loadHistory();
    renderHistory();
    byId('args').oninput = onArgsText;
    byId('args-form').onsubmit = (e) => e.preventDefault();
    // Enter in a field runs the tool, as in any form.
    byId('args-form').addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && e.target.tagName === 'INPUT' && e.target.type !== 'checkbox') {
        e.preventDefault();
        run();
      }
    });
    renderErrors();
    openSocket();
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
}
