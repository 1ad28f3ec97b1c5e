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
    for (const a of [...x.attributes]) if (!y.hasAttribute(a.name)) x.removeAttribute(a.name);
    for (const a of y.attributes) if (x.getAttribute(a.name) !== a.value) x.setAttribute(a.name, a.value);
    if (x.onclick !== y.onclick) x.onclick = y.onclick;
    morphChildren(x, [...y.childNodes]);
  }

  function str(v) {
    if (v === undefined || v === null) return '';
    return typeof v === 'string' ? v : JSON.stringify(v);
  }

  function addError(text) {
    state.errors.push({ time: new Date(), text: str(text) });
    if (state.errors.length > MAX_ERRORS) state.errors.splice(0, state.errors.length - MAX_ERRORS);
    renderErrors();
  }

  // ---- socket --------------------------------------------------------------

  function socketURL() {
    const u = new URL('ws' + location.search, location.href);
    u.protocol = u.protocol === 'https:' ? 'wss:' : 'ws:';
    u.hash = '';
    return u.href;
  }

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
    if (!state.open && !byId('socket-banner').hidden) return;
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
    if (!state.servers.length) {
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
    morphChildren(box, cards);
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
      byId('args').value = JSON.stringify(prefill(t), null, 2);
      byId('args-error').hidden = true;
    }
    byId('new-seed').hidden = seedProps(t).length === 0;
    renderProps(t);
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
      s = cur;
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
    const args = {};
    for (const [k, p] of properties(t)) {
      const w = p['x-megane-widget'];
      if (w === 'document') continue;
      if (w === 'seed') args[k] = freshSeed();
      else if (Object.prototype.hasOwnProperty.call(p, 'default')) args[k] = p.default;
      else if (Array.isArray(p.examples) && p.examples.length) args[k] = p.examples[0];
    }
    return args;
  }

  function renderProps(t) {
    const table = byId('args-props');
    table.replaceChildren();
    const root = t.inputSchema || {};
    const req = Array.isArray(root.required) ? root.required.map(str) : [];
    for (const [k, p] of properties(t)) {
      const type = [str(p.type), p['x-megane-widget'] ? 'widget ' + str(p['x-megane-widget']) : '', p['x-megane-unit'] ? str(p['x-megane-unit']) : ''].filter(Boolean).join(', ');
      table.append(el('tr', {},
        el('th', { className: 'mono', text: k + (req.includes(k) ? ' *' : '') }),
        el('td', {},
          el('div', { text: [str(p.title), type ? '(' + type + ')' : ''].filter(Boolean).join(' ') }),
          p.description ? el('div', { className: 'small muted', text: str(p.description) }) : null)));
    }
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
    byId('args').value = JSON.stringify(args, null, 2);
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
    const call = { server, tool: str(t.name), abort: new AbortController() };
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
  }

  // cut shortens a text to MAX_TEXT characters.
  function cut(text) {
    return text.length > MAX_TEXT ? text.slice(0, MAX_TEXT) + '… (' + text.length + ' characters)' : text;
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

  // ---- picture -----------------------------------------------------------------

  function colorOf(z) {
    return COLORS[z] || 'hsl(' + ((z * 47) % 360) + ', 55%, 62%)';
  }

  function drawAtoms(elements, positions, cell) {
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

    // A fixed oblique view: rotate about y, then about x.
    const ay = -0.6;
    const ax = 0.45;
    const cy = Math.cos(ay);
    const sy = Math.sin(ay);
    const cx = Math.cos(ax);
    const sx = Math.sin(ax);
    const project = (x, y, z) => {
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
    let minX = Infinity;
    let maxX = -Infinity;
    let minY = Infinity;
    let maxY = -Infinity;
    for (const p of pts.concat(corners)) {
      minX = Math.min(minX, p[0]);
      maxX = Math.max(maxX, p[0]);
      minY = Math.min(minY, p[1]);
      maxY = Math.max(maxY, p[1]);
    }
    const pad = 16;
    const span = Math.max(maxX - minX, maxY - minY, 1e-6);
    const scale = Math.min((cssW - 2 * pad) / Math.max(maxX - minX, 1e-6), (cssH - 2 * pad) / Math.max(maxY - minY, 1e-6));
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

  // ---- start -----------------------------------------------------------------

  function start() {
    state.client = client.createBridge(socketURL(), { onStatus, onServerClosed: onClosed });
    byId('reconnect').onclick = openSocket;
    byId('refresh').onclick = refreshServers;
    byId('runner-server').onchange = () => renderRunner();
    byId('runner-tool').onchange = () => renderTool();
    byId('run').onclick = run;
    byId('cancel').onclick = cancelCall;
    byId('new-seed').onclick = newSeed;
    byId('reset-args').onclick = resetArgs;
    renderErrors();
    openSocket();
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
}
