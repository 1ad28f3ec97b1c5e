package bridgetest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Protocol versions answered as requested; any other is answered with the
// first.
var protocolVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26"}

// Serve runs a stdio MCP server that behaves as mode says, reading
// newline-delimited JSON-RPC from in and writing to out, until in reaches end
// of file (unless mode.LingerAfterEOF; a mode.Deaf server never reads it),
// ctx ends, or a simulated exit (the crash tool, ExitBeforeInit,
// ExitAfterStart) returns an *ExitError. Noise goes to errw.
//
// It answers initialize, ping, tools/list (paginated by mode.PageSize) and
// tools/call; handles notifications/initialized and notifications/cancelled;
// and answers every other request with JSON-RPC error -32601. Every message
// received is journaled (mode.Journal).
//
// Built-in tools (arguments are all optional; "tag" is echoed into results
// so that routing tests can tell calls apart):
//
//   - echo: structuredContent {"echo": <the arguments exactly as received>}.
//   - slow {steps, intervalMs, tag, ignoreCancel}: one notifications/progress
//     per step ("<tag> step i") when the call has a progressToken, then a
//     result {"tag", "steps"}. notifications/cancelled stops it silently,
//     unless ignoreCancel, which carries on to the result.
//   - big {bytes, tag}: a result whose response line (without its newline)
//     is exactly bytes long (or the minimum), streamed in 64 KiB pieces.
//   - atoms {n, seed, tag}: a BuilderResult of a water box with n atoms
//     (bonds, residue names and ids), streamed; 500000 atoms make about
//     40 MB.
//   - crash {}: writes "fatal: simulated crash" to stderr and exits with
//     status 3 without answering.
//   - fail {code, message}: a JSON-RPC error (default -32000).
//   - toolerror {tag}: a result with isError true.
//   - listchanged {}: adds a tool "added" to the listing, sends
//     notifications/tools/list_changed, then answers.
//
// If in is an io.Closer, Serve closes it before returning so that its reader
// goroutine ends; otherwise the caller must make in reach end of file.
// Serve's other goroutines have ended when it returns.
func Serve(ctx context.Context, in io.Reader, out io.Writer, errw io.Writer, mode Mode) error {
	return serve(ctx, in, out, errw, mode, nil)
}

// serve is Serve; exitNow, when non-nil, ends the process at once for a
// simulated exit (used by ServeFromEnv), instead of returning *ExitError.
func serve(ctx context.Context, in io.Reader, out io.Writer, errw io.Writer, mode Mode, exitNow func(int)) error {
	if errw == nil {
		errw = io.Discard
	}
	if mode.Name == "" {
		mode.Name = "bridgetest"
	}
	if mode.Version == "" && !mode.EmptyVersion {
		mode.Version = Version
	}
	if mode.IgnoreSIGTERM {
		// os.Interrupt too: on Windows the stop ladder's request is
		// CTRL_BREAK, which Go delivers as os.Interrupt.
		signal.Ignore(syscall.SIGTERM, os.Interrupt)
	}
	s := &server{mode: mode, errw: errw, exitNow: exitNow, inflight: map[string]*call{}, exit: make(chan int, 1)}
	var err error
	if s.builtin, err = builtinTools(); err != nil {
		return err
	}
	if err := s.loadFixtures(); err != nil {
		return err
	}
	if s.journal, err = openJournal(mode.Journal); err != nil {
		return err
	}
	defer s.journal.close()
	s.journal.start()

	if mode.PidFile != "" {
		if err := writePidFile(mode.PidFile, os.Getpid()); err != nil {
			return err
		}
	}
	if err := startStderr(errw, mode); err != nil {
		return fmt.Errorf("stderr at start: %w", err)
	}
	if mode.SpawnGrandchild {
		if err := spawnSleeper(mode.GrandchildPidFile, false, false); err != nil {
			return err
		}
	}
	if mode.SpawnDetached {
		if err := spawnSleeper(mode.DetachedPidFile, true, mode.DetachGroupOnly); err != nil {
			return err
		}
	}
	if mode.KillParent {
		if err := killParent(); err != nil {
			return fmt.Errorf("kill the parent: %w", err)
		}
	}
	if mode.ExitBeforeInit {
		fmt.Fprintln(errw, "bridgetest: fatal: simulated failure before initialize")
		return s.simulateExit(2)
	}
	if mode.ExitAfterStart {
		return s.simulateExit(0)
	}

	junk := mode.Junk
	if len(junk) == 0 {
		junk = mode.Banner
	}
	if len(junk) == 0 {
		junk = DefaultJunk()
	}
	s.out = &lineWriter{w: bufio.NewWriterSize(out, 64*1024), junkEvery: mode.JunkEveryN, junk: junk}
	for _, line := range mode.Banner {
		s.out.raw(line)
	}

	sctx, cancel := context.WithCancel(ctx)
	s.ctx = sctx
	var readDone chan error // nil for a deaf server: that case never fires
	if !mode.Deaf {
		readDone = make(chan error, 1)
		go func() { readDone <- s.readLoop(in) }() // ends when in reaches EOF or is closed
	}

	var result error
	select {
	case err := <-readDone:
		readDone = nil
		if err != nil {
			result = err
		} else if mode.LingerAfterEOF {
			select {
			case <-ctx.Done():
			case code := <-s.exit:
				result = &ExitError{Code: code}
			}
		}
	case <-ctx.Done():
	case code := <-s.exit:
		result = &ExitError{Code: code}
	}
	cancel()
	s.mu.Lock()
	s.closed = true // no call starts after this
	s.mu.Unlock()
	if readDone != nil {
		if c, ok := in.(io.Closer); ok {
			c.Close()
			<-readDone
		}
	}
	s.calls.Wait()
	return result
}

// server is one Serve run.
type server struct {
	mode    Mode
	errw    io.Writer
	exitNow func(int)
	journal *journal
	out     *lineWriter
	ctx     context.Context // ends when Serve ends; set before readLoop starts
	exit    chan int        // simulated exit codes; buffered 1, never closed

	builtin      []toolDef         // read-only after start
	fixtureTools [][]byte          // compacted fixture tools; read-only after start
	extraTools   [][]byte          // compacted Mode.Tools; read-only after start
	fixtureCalls map[string][]byte // tool name to compacted result; read-only after start
	self         struct {          // Mode.SelfFile's values; read-only after start
		ServerInfo   json.RawMessage `json:"serverInfo"`
		Instructions json.RawMessage `json:"instructions"`
	}
	known map[string]bool // names in fixtureTools and extraTools; read-only after start
	// required: each fixture tool's required arguments (its inputSchema's);
	// read-only after start.
	required map[string][]string

	calls sync.WaitGroup // one per tools/call goroutine and per FixtureWork worker
	// work is the one lock FixtureWork's workers hold while they compute.
	work sync.Mutex

	mu       sync.Mutex       // guards inflight, added and closed
	inflight map[string]*call // by the request id's bytes
	added    bool             // listchanged was called
	closed   bool             // Serve is ending: start no more calls
}

// call is a tools/call in flight.
type call struct {
	cancel context.CancelFunc // cancels the call's context (notifications/cancelled)
}

func (s *server) simulateExit(code int) error {
	if s.exitNow != nil {
		s.exitNow(code)
	}
	return &ExitError{Code: code}
}

// triggerExit asks Serve to end with a simulated exit (or ends the process).
func (s *server) triggerExit(code int) {
	if s.exitNow != nil {
		s.exitNow(code)
		return
	}
	select {
	case s.exit <- code:
	default:
	}
}

// startStderr writes what Mode says a server writes to stderr at start, in
// the order Mode documents, buffered and flushed before it returns.
func startStderr(errw io.Writer, mode Mode) error {
	w := bufio.NewWriterSize(errw, 64*1024)
	if mode.StderrLongLine > 0 {
		chunk := bytes.Repeat([]byte("e"), 64*1024)
		for n := mode.StderrLongLine; n > 0; n -= int64(len(chunk)) {
			w.Write(chunk[:min(n, int64(len(chunk)))])
		}
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if mode.StderrFlood > 0 {
		if err := flood(errw, mode.StderrFlood); err != nil {
			return err
		}
	}
	var num []byte
	for i := 0; i < mode.StderrFloodLines; i++ {
		num = append(strconv.AppendInt(append(num[:0], "line "...), int64(i), 10), '\n')
		w.Write(num)
	}
	for _, line := range mode.Stderr {
		w.WriteString(line)
		w.WriteByte('\n')
	}
	return w.Flush()
}

func flood(w io.Writer, n int64) error {
	line := bytes.Repeat([]byte("noise "), 16)
	line = append(line, '\n')
	for n > 0 {
		chunk := line
		if int64(len(chunk)) > n {
			chunk = chunk[:n]
		}
		if _, err := w.Write(chunk); err != nil {
			return err
		}
		n -= int64(len(chunk))
	}
	return nil
}

// writePidFile writes pid to path whole: aside first, then renamed, so that
// a test polling for the file never reads half of it.
func writePidFile(path string, pid int) error {
	if err := os.WriteFile(path+".tmp", []byte(strconv.Itoa(pid)+"\n"), 0o600); err != nil {
		return fmt.Errorf("write pid file: %w", err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		return fmt.Errorf("write pid file: %w", err)
	}
	return nil
}

// spawnSleeper starts the grandchild of Mode.SpawnGrandchild, or with
// detached that of Mode.SpawnDetached, and writes its pid to pidFile.
func spawnSleeper(pidFile string, detached, groupOnly bool) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("spawn grandchild: %w", err)
	}
	// The grandchild is this binary, sleeping (ServeFromEnv sees sleepEnv):
	// no other program is needed, on any system.
	cmd := exec.Command(exe)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, EnvVar+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, sleepEnv+"=1")
	if detached {
		detach(cmd, groupOnly)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("spawn grandchild: %w", err)
	}
	if err := writePidFile(pidFile, cmd.Process.Pid); err != nil {
		return err
	}
	// Deliberately not waited for: see Mode.SpawnGrandchild.
	return cmd.Process.Release()
}

func (s *server) loadFixtures() error {
	s.known = map[string]bool{}
	if s.mode.FixtureList != "" {
		data, err := os.ReadFile(s.mode.FixtureList)
		if err != nil {
			return fmt.Errorf("fixture list: %w", err)
		}
		var doc struct {
			Tools []json.RawMessage `json:"tools"`
		}
		if err := json.Unmarshal(data, &doc); err != nil {
			return fmt.Errorf("fixture list %s: %w", s.mode.FixtureList, err)
		}
		s.required = map[string][]string{}
		for _, t := range doc.Tools {
			c, name, err := compactTool(t)
			if err != nil {
				return fmt.Errorf("fixture list %s: %w", s.mode.FixtureList, err)
			}
			s.fixtureTools = append(s.fixtureTools, c)
			s.known[name] = true
			var def struct {
				InputSchema struct {
					Required []string `json:"required"`
				} `json:"inputSchema"`
			}
			json.Unmarshal(t, &def)
			s.required[name] = def.InputSchema.Required
		}
	}
	for _, t := range s.mode.Tools {
		c, name, err := compactTool(t)
		if err != nil {
			return fmt.Errorf("mode tools: %w", err)
		}
		s.extraTools = append(s.extraTools, c)
		s.known[name] = true
	}
	if s.mode.SelfFile != "" {
		data, err := os.ReadFile(s.mode.SelfFile)
		if err != nil {
			return fmt.Errorf("self file: %w", err)
		}
		if err := json.Unmarshal(data, &s.self); err != nil {
			return fmt.Errorf("self file %s: %w", s.mode.SelfFile, err)
		}
	}
	s.fixtureCalls = map[string][]byte{}
	for name, path := range s.mode.FixtureCalls {
		data, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("call fixture: %w", err)
		}
		var doc struct {
			Result json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal(data, &doc); err != nil || len(doc.Result) == 0 {
			return fmt.Errorf("call fixture %s: no result (%v)", path, err)
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, doc.Result); err != nil {
			return fmt.Errorf("call fixture %s: %w", path, err)
		}
		s.fixtureCalls[name] = buf.Bytes()
	}
	return nil
}

func compactTool(t json.RawMessage) ([]byte, string, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, t); err != nil {
		return nil, "", err
	}
	var head struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(t, &head); err != nil || head.Name == "" {
		return nil, "", fmt.Errorf("a tool without a name: %.80s", t)
	}
	return buf.Bytes(), head.Name, nil
}

// lineWriter owns out: every message is one line written under mu, so
// messages never interleave, and junk lines go between them.
type lineWriter struct {
	mu        sync.Mutex // guards everything below
	w         *bufio.Writer
	n         int // messages written
	junkEvery int
	junk      []string
	junkNext  int
	err       error // the first write error; later writes are dropped
}

// message writes one line produced by fn and flushes it.
func (lw *lineWriter) message(fn func(w *bufio.Writer) error) error {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.err != nil {
		return lw.err
	}
	err := fn(lw.w)
	if err == nil {
		err = lw.w.WriteByte('\n')
	}
	if err == nil {
		err = lw.w.Flush()
	}
	lw.n++
	if err == nil && lw.junkEvery > 0 && lw.n%lw.junkEvery == 0 {
		lw.w.WriteString(lw.junk[lw.junkNext%len(lw.junk)])
		lw.junkNext++
		lw.w.WriteByte('\n')
		err = lw.w.Flush()
	}
	lw.err = err
	return err
}

// raw writes a non-message line (a banner).
func (lw *lineWriter) raw(line string) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.err != nil {
		return
	}
	lw.w.WriteString(line)
	lw.w.WriteByte('\n')
	lw.err = lw.w.Flush()
}

// send writes a complete message given as bytes.
func (lw *lineWriter) send(b []byte) error {
	return lw.message(func(w *bufio.Writer) error { _, err := w.Write(b); return err })
}

// incoming is any JSON-RPC message the client sends.
type incoming struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

func (m *incoming) hasID() bool { return len(m.ID) > 0 && !bytes.Equal(m.ID, []byte("null")) }

// readLoop reads lines until EOF and handles each in order.
func (s *server) readLoop(in io.Reader) error {
	r := bufio.NewReaderSize(in, 64*1024)
	for {
		line, err := r.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			s.handleLine(line)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe) || errors.Is(err, os.ErrClosed) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
	}
}

// handleLine handles one received line. It never blocks on a tool: calls
// run on their own goroutines.
func (s *server) handleLine(line []byte) {
	var m incoming
	if err := json.Unmarshal(line, &m); err != nil {
		s.journal.add(JournalEntry{ParseError: true})
		s.replyError(json.RawMessage("null"), -32700, "parse error")
		return
	}
	if m.Method == "" {
		if m.hasID() {
			s.journal.add(JournalEntry{Response: m.ID})
		} else {
			s.journal.add(JournalEntry{ParseError: true})
		}
		return
	}
	entry := JournalEntry{Method: m.Method}
	if m.hasID() {
		entry.ID = m.ID
	}
	switch m.Method {
	case "initialize":
		var p struct {
			ProtocolVersion string          `json:"protocolVersion"`
			Capabilities    json.RawMessage `json:"capabilities"`
		}
		json.Unmarshal(m.Params, &p)
		entry.ProtocolVersion = p.ProtocolVersion
		entry.Capabilities = p.Capabilities
		entry.Params = m.Params
		s.journal.add(entry)
		if s.mode.HangInit || !m.hasID() {
			return
		}
		if s.mode.Modern {
			s.response(m.ID, func(w *bufio.Writer) error {
				_, err := w.WriteString(`"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":["2026-07-28"]}}`)
				return err
			})
			return
		}
		version := protocolVersions[0]
		for _, v := range protocolVersions {
			if v == p.ProtocolVersion {
				version = v
			}
		}
		res := map[string]any{
			"protocolVersion": version,
			"capabilities":    map[string]any{"tools": map[string]any{"listChanged": true}},
			"serverInfo":      map[string]any{"name": s.mode.Name, "version": s.mode.Version},
		}
		if s.mode.ServerInfo != nil {
			res["serverInfo"] = s.mode.ServerInfo
		}
		if s.mode.Instructions != "" {
			res["instructions"] = s.mode.Instructions
		}
		if s.self.ServerInfo != nil {
			res["serverInfo"] = s.self.ServerInfo
		}
		if s.self.Instructions != nil {
			res["instructions"] = s.self.Instructions
		}
		s.reply(m.ID, res)
	case "notifications/initialized":
		s.journal.add(entry)
		if s.mode.PingAfterInit {
			s.out.send([]byte(`{"jsonrpc":"2.0","id":"bridgetest-ping","method":"ping"}`))
		}
	case "ping":
		s.journal.add(entry)
		if m.hasID() {
			s.reply(m.ID, map[string]any{})
		}
	case "tools/list":
		s.journal.add(entry)
		if m.hasID() {
			s.list(m.ID, m.Params)
		}
	case "tools/call":
		var p struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
			Meta      struct {
				ProgressToken json.RawMessage `json:"progressToken"`
			} `json:"_meta"`
		}
		if err := json.Unmarshal(m.Params, &p); err != nil {
			s.journal.add(entry)
			if m.hasID() {
				s.replyError(m.ID, -32602, "invalid tools/call params")
			}
			return
		}
		entry.Tool = p.Name
		entry.ProgressToken = p.Meta.ProgressToken
		s.journal.add(entry)
		if !m.hasID() {
			return
		}
		s.startCall(m.ID, p.Name, p.Arguments, p.Meta.ProgressToken)
	case "notifications/cancelled":
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		json.Unmarshal(m.Params, &p)
		entry.Cancelled = p.RequestID
		s.mu.Lock()
		c, ok := s.inflight[string(p.RequestID)]
		s.mu.Unlock()
		entry.Matched = &ok
		s.journal.add(entry)
		if ok {
			c.cancel()
		}
	default:
		entry.Unknown = !(m.Method == "server/discover" && s.mode.Modern)
		if m.Method == "server/discover" {
			entry.Params = m.Params
		}
		s.journal.add(entry)
		switch {
		case !m.hasID() || s.mode.IgnoreUnknown && entry.Unknown:
		case m.Method == "server/discover" && s.mode.Modern:
			info, _ := json.Marshal(map[string]string{"name": s.mode.Name, "version": s.mode.Version})
			s.replyRaw(m.ID, []byte(`{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"_meta":{"io.modelcontextprotocol/serverInfo":`+string(info)+`}}`))
		case m.Method == "server/discover" && s.mode.DiscoverCode != 0:
			s.replyError(m.ID, s.mode.DiscoverCode, "Invalid request parameters")
		default:
			s.replyError(m.ID, -32601, "method not found: "+m.Method)
		}
	}
}

// reply sends a result.
func (s *server) reply(id json.RawMessage, result any) {
	rb, err := json.Marshal(result)
	if err != nil {
		rb = []byte(`{}`)
	}
	s.replyRaw(id, rb)
}

// response writes one response line: the id, before or after the body as
// Mode.IDLast says, and body, which writes `"result":…` or `"error":…`.
func (s *server) response(id []byte, body func(w *bufio.Writer) error) error {
	return s.out.message(func(w *bufio.Writer) error {
		w.WriteString(`{"jsonrpc":"2.0",`)
		if !s.mode.IDLast {
			w.WriteString(`"id":`)
			w.Write(id)
			w.WriteByte(',')
		}
		if err := body(w); err != nil {
			return err
		}
		if s.mode.IDLast {
			w.WriteString(`,"id":`)
			w.Write(id)
		}
		_, err := w.WriteString(`}`)
		return err
	})
}

// replyRaw sends a result given as JSON bytes, unchanged (but for what
// Mode.CompleteResults adds).
func (s *server) replyRaw(id, result []byte) {
	if s.mode.CompleteResults && !bytes.Contains(result, []byte(`"supportedVersions"`)) {
		result = completeResult(true, s.mode.Name, s.mode.Version, result)
	}
	s.response(id, func(w *bufio.Writer) error {
		w.WriteString(`"result":`)
		_, err := w.Write(result)
		return err
	})
}

func (s *server) replyError(id json.RawMessage, code int, msg string) {
	mb, _ := json.Marshal(msg)
	s.response(id, func(w *bufio.Writer) error {
		_, err := fmt.Fprintf(w, `"error":{"code":%d,"message":%s}`, code, mb)
		return err
	})
}

// listing returns the current tools, each compacted.
func (s *server) listing() [][]byte {
	var tools [][]byte
	if s.mode.FixtureList != "" {
		tools = append(tools, s.fixtureTools...)
	} else {
		for _, t := range s.builtin {
			tools = append(tools, t.def)
		}
	}
	tools = append(tools, s.extraTools...)
	s.mu.Lock()
	added := s.added
	s.mu.Unlock()
	if added {
		tools = append(tools, []byte(addedTool))
	}
	return tools
}

func (s *server) list(id, params json.RawMessage) {
	var p struct {
		Cursor string `json:"cursor"`
	}
	json.Unmarshal(params, &p)
	tools := s.listing()
	start := 0
	if p.Cursor != "" {
		n, err := strconv.Atoi(p.Cursor)
		if err != nil || n < 0 || n > len(tools) {
			s.replyError(id, -32602, "invalid cursor")
			return
		}
		start = n
	}
	end := len(tools)
	if s.mode.PageSize > 0 && start+s.mode.PageSize < end {
		end = start + s.mode.PageSize
	}
	var b bytes.Buffer
	b.WriteString(`{"tools":[`)
	b.Write(bytes.Join(tools[start:end], []byte(",")))
	b.WriteString(`]`)
	if end < len(tools) {
		fmt.Fprintf(&b, `,"nextCursor":"%d"`, end)
	}
	if n := s.mode.ListPadBytes; n > 0 {
		b.WriteString(`,"padding":"`)
		b.Write(bytes.Repeat([]byte("x"), int(n)))
		b.WriteByte('"')
	}
	if n := s.mode.ListPadDepth; n > 0 {
		b.WriteString(`,"nesting":`)
		b.Write(bytes.Repeat([]byte("["), n))
		b.Write(bytes.Repeat([]byte("]"), n))
	}
	b.WriteString(`}`)
	s.replyRaw(id, b.Bytes())
}
