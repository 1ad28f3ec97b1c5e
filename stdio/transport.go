package stdio

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/megane-labs/megane-jupyter-bridge/child"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// CodeTooLarge is the JSON-RPC error code the stdio transport synthesizes,
// in place of a response, when a message from the server exceeds
// Options.MaxMessageBytes. The error's data is {"size": N, "limit": M}.
const CodeTooLarge = -32050

// CodeUnreadable is the JSON-RPC error code synthesized, in place of a
// response, when a response from the server cannot be decoded (nested
// deeper than a JSON decoder goes, say) but its id can be read: the
// request it answers fails at once instead of waiting for its timeout.
const CodeUnreadable = -32051

const (
	defaultMaxMessageBytes   = 256 << 20
	defaultStderrTailBytes   = 16 << 10
	defaultTerminateDuration = 2 * time.Second
	defaultKillDuration      = 3 * time.Second

	// stderrLineMax is the longest stderr line kept or reported; the rest of
	// a longer line is dropped while reading.
	stderrLineMax = 1024
	// logLineMax is how much of a skipped stdout line is logged.
	logLineMax = 200
	// readChunk is the size of the stdout read buffer and the largest single
	// read into a growing line.
	readChunk = 64 << 10
	// streamDrainBound is how long stdout and stderr may stay open after the
	// keeper exited (a process that escaped the keeper still holds them)
	// before the transport stops reading them.
	streamDrainBound = 5 * time.Second
)

// Options configures one stdio tool server process.
type Options struct {
	// Name is the server's name, used in messages:
	// "megane-builder-tools exited with status 1: <last stderr line>".
	Name string
	// Command is the executable: an absolute path, a path relative to Dir
	// (when it contains a slash), or a name looked up on the PATH of Env.
	// Relative PATH entries are ignored.
	Command string
	Args    []string
	// Env is the child's complete environment (KEY=VALUE). If nil,
	// os.Environ().
	Env []string
	// Dir is the working directory. If empty, the bridge's.
	Dir string
	// MaxMessageBytes bounds one stdout line (one JSON-RPC message). A longer
	// line is discarded while it streams, never buffered whole; if it is a
	// response, Read returns an error response with CodeTooLarge for its id
	// instead. If zero, 256 MiB.
	MaxMessageBytes int64
	// StderrTailBytes is how much stderr is kept for error messages, as a
	// ring of the last lines. If zero, 16 KiB.
	StderrTailBytes int
	// OnStderrLine is called with each non-blank stderr line (truncated to
	// 1 KiB, control characters and terminal escapes removed), from the
	// transport's stderr goroutine. It must not block. May be nil.
	OnStderrLine func(line string)
	// FilterIncoming is called with each complete stdout line that looks
	// like a JSON object (surrounding white space removed), before it is
	// decoded, and returns the bytes to decode; returning nil or nothing
	// drops the message. The transport never reuses raw: the callee may keep
	// it. Called from the transport's read goroutine; it must not block. Nil
	// means the identity. It is not called for the error responses the
	// transport synthesizes for oversized messages.
	FilterIncoming func(raw []byte) []byte
	// StreamLine, if not nil, is offered the first bytes of each stdout
	// line longer than the read buffer (64 KiB; head is the buffer, not
	// to be kept): it returns a LineSink that receives the line in pieces
	// as it is read, never held whole, or nil to read the line whole as
	// usual. What the sink's End returns is decoded in the line's place.
	// Called from the transport's read goroutine; it must not block.
	StreamLine func(head []byte) LineSink
	// OnOutgoing is called with each message just before it is written to
	// stdin, in wire order (under the write lock). It must not block. May be
	// nil.
	OnOutgoing func(msg jsonrpc.Message)
	// TerminateDuration is how long Close waits, after closing stdin, for the
	// server to exit before it sends SIGTERM to the process group. If zero,
	// 2s.
	TerminateDuration time.Duration
	// KillDuration is how long Close waits after SIGTERM before the group is
	// SIGKILLed. If zero, 3s.
	KillDuration time.Duration
	// KeeperPath is the executable that runs the keeper on Linux and macOS
	// (child.Spec.KeeperPath). If empty, os.Executable().
	KeeperPath string
	// Logger receives warnings about skipped stdout lines. Nil discards.
	Logger *slog.Logger
}

// Transport runs a tool server as a child process and speaks
// newline-delimited JSON-RPC with it over stdin and stdout. It implements
// mcp.Transport; Connect may be called once.
//
// Unlike go-sdk's CommandTransport it skips non-JSON stdout lines instead of
// ending the session, fails only the affected call when a message is over
// the size limit, keeps a bounded stderr tail for error messages, and runs
// the server in a group of its own (child.Start: a keeper's process group,
// a Job Object on Windows), so that the server and its descendants are
// stopped in steps by Close and die with the bridge.
type Transport struct {
	opts Options // defaults applied; read-only after NewTransport
	log  *slog.Logger
	tail *stderrTail

	mu   sync.Mutex
	conn *stdioConn // guarded by mu; set by Connect
	used bool       // guarded by mu; Connect was called
}

// NewTransport returns a transport for opts. Nothing starts until
// Connect.
func NewTransport(opts Options) *Transport {
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = defaultMaxMessageBytes
	}
	if opts.StderrTailBytes <= 0 {
		opts.StderrTailBytes = defaultStderrTailBytes
	}
	if opts.TerminateDuration <= 0 {
		opts.TerminateDuration = defaultTerminateDuration
	}
	if opts.KillDuration <= 0 {
		opts.KillDuration = defaultKillDuration
	}
	if opts.Name == "" {
		opts.Name = filepath.Base(opts.Command)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Transport{opts: opts, log: log, tail: &stderrTail{max: opts.StderrTailBytes}}
}

// StderrTail returns the last stderr lines kept (oldest first).
func (t *Transport) StderrTail() []string { return t.tail.lines() }

// Pgid returns the id of the server's group (child.Process.Group: the
// keeper's pid, which is the process group id, on Linux and macOS), or 0
// before it started.
func (t *Transport) Pgid() int {
	if c := t.connection(); c != nil {
		return c.proc.Group()
	}
	return 0
}

// Pid returns the pid of the server process itself (the keeper's child), or
// 0 before it started.
func (t *Transport) Pid() int {
	if c := t.connection(); c != nil {
		return c.proc.Pid()
	}
	return 0
}

// Done returns a channel closed once the server's process group leader has
// exited and been reaped, or nil before Connect succeeded.
func (t *Transport) Done() <-chan struct{} {
	if c := t.connection(); c != nil {
		return c.exited
	}
	return nil
}

// ExitError returns how the server ended, or nil while it runs.
func (t *Transport) ExitError() *ExitError {
	c := t.connection()
	if c == nil {
		return nil
	}
	select {
	case <-c.exited:
		return c.exitErr
	default:
		return nil
	}
}

func (t *Transport) connection() *stdioConn {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.conn
}

// ExitError says how a server process ended. Read returns it once the
// server exited on its own; after Close, ExitError() reports it with Stopped.
type ExitError struct {
	Name       string
	Status     int    // exit code, -1 if killed by a signal
	Signal     string // "SIGKILL", ...; "" if none
	Stopped    bool   // the bridge stopped it (Close)
	StderrTail []string
}

func (e *ExitError) Error() string {
	var b strings.Builder
	b.WriteString(e.Name)
	switch {
	case e.Stopped:
		b.WriteString(" stopped")
		return b.String()
	case e.Signal != "":
		b.WriteString(" was killed by signal " + e.Signal)
	default:
		b.WriteString(" exited with status " + strconv.Itoa(e.Status))
	}
	for i := len(e.StderrTail) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(e.StderrTail[i]); l != "" {
			b.WriteString(": " + l)
			break
		}
	}
	return b.String()
}

// Connect starts the server in a group of its own (child.Start) and returns
// the connection once the server process has started. ctx bounds only the
// start, not the process's life. A start failure is one line naming what to
// fix.
func (t *Transport) Connect(ctx context.Context) (mcp.Connection, error) {
	t.mu.Lock()
	if t.used {
		t.mu.Unlock()
		return nil, fmt.Errorf("%s: the stdio transport was already connected", t.opts.Name)
	}
	t.used = true
	t.mu.Unlock()

	o := &t.opts
	fail := func(format string, args ...any) error {
		return fmt.Errorf("cannot start %s: %s", o.Name, fmt.Sprintf(format, args...))
	}
	env := o.Env
	if env == nil {
		env = os.Environ()
	}
	dir := o.Dir
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, fail("cannot read the current directory: %v", err)
		}
		dir = wd
	} else if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	if fi, err := os.Stat(dir); err != nil {
		return nil, fail("working directory %q: %v", dir, pathErrText(err))
	} else if !fi.IsDir() {
		return nil, fail("working directory %q is not a directory", dir)
	}
	path, err := child.LookPath(o.Command, child.Getenv(env, "PATH"), dir)
	if err != nil {
		return nil, fail("%v", err)
	}

	var ends []*os.File // every pipe end, closed on failure
	closeAll := func(fs []*os.File) {
		for _, f := range fs {
			_ = f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		if r, w, err = os.Pipe(); err == nil {
			ends = append(ends, r, w)
		}
		return r, w, err
	}
	stdinR, stdinW, err1 := pipe()
	stdoutR, stdoutW, err2 := pipe()
	stderrR, stderrW, err3 := pipe()
	if err := errors.Join(err1, err2, err3); err != nil {
		closeAll(ends)
		return nil, fail("%v", err)
	}
	growPipe(stdoutR)
	c := &stdioConn{
		t:        t,
		stdin:    stdinW,
		stdout:   stdoutR,
		stderr:   stderrR,
		incoming: make(chan jsonrpc.Message),
		closing:  make(chan struct{}),
		exited:   make(chan struct{}),
		readDone: make(chan struct{}),
		errDone:  make(chan struct{}),
	}
	// stderr is read from the start, so that a start failure can quote it.
	c.wg.Add(1)
	go c.stderrLoop()
	proc, err := child.Start(ctx, child.Spec{
		Name:       o.Name,
		Path:       path,
		Args:       append([]string{o.Command}, o.Args...),
		Env:        env,
		Dir:        dir,
		Stdin:      stdinR,
		Stdout:     stdoutW,
		Stderr:     stderrW,
		KeeperPath: o.KeeperPath,
	})
	closeAll([]*os.File{stdinR, stdoutW, stderrW})
	if err != nil {
		// Nothing of the child is left (Start saw to it), so stderr ends
		// now unless a descriptor leaked; the deadline bounds that.
		_ = stderrR.SetReadDeadline(time.Now().Add(time.Second))
		<-c.errDone
		c.wg.Wait()
		closeAll([]*os.File{stdinW, stdoutR})
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return nil, err
		}
		if tail := t.tail.lines(); len(tail) > 0 {
			return nil, fail("%v: %s", err, tail[len(tail)-1])
		}
		return nil, fail("%v", err)
	}
	c.proc = proc
	t.mu.Lock()
	t.conn = c
	t.mu.Unlock()
	c.wg.Add(2)
	go c.waitLoop()
	go c.readLoop()
	return c, nil
}

// stdioConn is the mcp.Connection of a running server.
type stdioConn struct {
	t    *Transport
	proc *child.Process // the server and its group; set before the loops start

	stdin  *os.File // written by Write under writeMu; closed by Close
	stdout *os.File // owned by readLoop, which closes it; deadline set by waitLoop
	stderr *os.File // owned by stderrLoop, which closes it; deadline set by waitLoop

	writeMu sync.Mutex // serializes Write

	incoming chan jsonrpc.Message // unbuffered; sent by readLoop, closed by readLoop at end of stdout

	stopping atomic.Bool // Close has begun
	exitErr  *ExitError  // written by waitLoop before it closes exited

	closing  chan struct{} // closed by Close
	exited   chan struct{} // closed by waitLoop once the server's group is gone and exitErr is set
	readDone chan struct{} // closed by readLoop
	errDone  chan struct{} // closed by stderrLoop

	closeOnce sync.Once
	wg        sync.WaitGroup // the three loops
}

// SessionID implements mcp.Connection.
func (c *stdioConn) SessionID() string { return "" }

// Read implements mcp.Connection. After the server exited on its own and
// every message it wrote was read, Read returns its *ExitError; after Close,
// io.EOF.
func (c *stdioConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case <-c.closing:
		return nil, io.EOF
	default:
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.closing:
		return nil, io.EOF
	case msg, ok := <-c.incoming:
		if ok {
			return msg, nil
		}
	}
	// Stdout ended: the keeper (which holds stdout until it exits) is gone
	// or going.
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.closing:
		return nil, io.EOF
	case <-c.exited:
		return nil, c.exitErr
	}
}

// Write implements mcp.Connection. It is safe for concurrent use.
func (c *stdioConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-c.closing:
		return fmt.Errorf("writing to %s: %w", c.t.opts.Name, os.ErrClosed)
	default:
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("encoding a message for %s: %w", c.t.opts.Name, err)
	}
	data = append(data, '\n')
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if f := c.t.opts.OnOutgoing; f != nil {
		f(msg)
	}
	if _, err := c.stdin.Write(data); err != nil {
		select {
		case <-c.exited:
			if !c.exitErr.Stopped {
				return c.exitErr
			}
		default:
		}
		return fmt.Errorf("writing to %s: %w", c.t.opts.Name, err)
	}
	return nil
}

// Close implements mcp.Connection: it stops the server's group in steps
// (close stdin, then child.Process.Stop: wait TerminateDuration, SIGTERM,
// wait KillDuration, SIGKILL) and returns once the group is gone and every
// goroutine of the connection has ended. It is idempotent and safe
// concurrently with Read and Write; concurrent callers all wait for the
// first to finish.
func (c *stdioConn) Close() error {
	c.closeOnce.Do(func() {
		c.stopping.Store(true)
		close(c.closing)
		// Closing stdin is the polite request to stop. It runs beside the
		// stop ladder: on Windows, where pipes are synchronous, a Write
		// blocked on a server that never reads holds stdin's Close until
		// the server is gone, which the ladder sees to.
		stdinClosed := make(chan struct{})
		go func() {
			defer close(stdinClosed)
			_ = c.stdin.Close()
		}()
		c.proc.Stop(c.t.opts.TerminateDuration, c.t.opts.KillDuration)
		<-stdinClosed
		c.wg.Wait()
	})
	return nil
}

// waitLoop waits for the server's group to be gone, then for its streams to
// end, and builds exitErr.
func (c *stdioConn) waitLoop() {
	defer c.wg.Done()
	<-c.proc.Done()

	// Stdout and stderr end when their last writer is gone. Everything in
	// the group was killed, so that is now, unless something escaped (a
	// descriptor passed to an unrelated process): stop reading after
	// streamDrainBound, or at once when the connection is closed. The exit
	// is reported once stderr is read to its end, so that its tail holds
	// the server's last words.
	tm := time.NewTimer(streamDrainBound)
	defer tm.Stop()
	cut := false
	select {
	case <-c.errDone:
	case <-tm.C:
		cut = true
	case <-c.closing:
		cut = true
	}
	if cut {
		c.endStreams()
		<-c.errDone // stderrLoop never blocks but in Read
	}
	c.exitErr = c.buildExitError()
	close(c.exited)
	if cut {
		return
	}
	select {
	case <-c.readDone:
	case <-tm.C:
		c.endStreams()
	case <-c.closing:
		c.endStreams()
	}
}

func (c *stdioConn) endStreams() {
	_ = c.stdout.SetReadDeadline(time.Now())
	_ = c.stderr.SetReadDeadline(time.Now())
}

// buildExitError describes the end of the server.
func (c *stdioConn) buildExitError() *ExitError {
	x := c.proc.Exit()
	return &ExitError{Name: c.t.opts.Name, Status: x.Code, Signal: x.Signal, Stopped: c.stopping.Load(), StderrTail: c.t.tail.lines()}
}

// stderrLoop reads stderr into the tail, line by line, keeping at most
// stderrLineMax bytes of each line: a flood without newlines costs no memory.
func (c *stdioConn) stderrLoop() {
	defer c.wg.Done()
	defer close(c.errDone)
	defer c.stderr.Close()
	buf := make([]byte, 32<<10)
	line := make([]byte, 0, stderrLineMax)
	emit := func() {
		s := truncateUTF8(sanitizeLine(line), stderrLineMax)
		line = line[:0]
		if strings.TrimSpace(s) == "" {
			return
		}
		c.t.tail.add(s)
		if f := c.t.opts.OnStderrLine; f != nil {
			f(s)
		}
	}
	for {
		n, err := c.stderr.Read(buf)
		p := buf[:n]
		for len(p) > 0 {
			i := bytes.IndexByte(p, '\n')
			seg := p
			if i >= 0 {
				seg = p[:i]
			}
			if room := stderrLineMax - len(line); room > 0 {
				line = append(line, seg[:min(room, len(seg))]...)
			}
			if i < 0 {
				break
			}
			emit()
			p = p[i+1:]
		}
		if err != nil {
			if len(line) > 0 {
				emit()
			}
			return
		}
	}
}

// readLoop decodes stdout into incoming until stdout ends.
func (c *stdioConn) readLoop() {
	defer c.wg.Done()
	defer close(c.readDone)
	defer c.stdout.Close()
	defer close(c.incoming)
	o := &c.t.opts
	r := newMsgReader(c.stdout, o.MaxMessageBytes, o.FilterIncoming, c.t.log)
	r.stream = o.StreamLine
	for {
		msg, err := r.next()
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrDeadlineExceeded) {
				c.t.log.Warn("reading the server's stdout failed", "error", err)
			}
			return
		}
		select {
		case c.incoming <- msg:
		case <-c.closing:
			return
		}
	}
}

// pathErrText is err without the path an *os.PathError repeats.
func pathErrText(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// truncateUTF8 cuts s to at most n bytes without splitting a character.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// stderrTail is a bounded ring of the last stderr lines.
type stderrTail struct {
	max int // bytes, counting one extra byte per line

	mu    sync.Mutex
	buf   []string // guarded by mu; buf[head:] are the lines kept, oldest first
	head  int      // guarded by mu
	bytes int      // guarded by mu
}

func (s *stderrTail) add(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf = append(s.buf, line)
	s.bytes += len(line) + 1
	for s.bytes > s.max && s.head < len(s.buf)-1 {
		s.bytes -= len(s.buf[s.head]) + 1
		s.buf[s.head] = ""
		s.head++
	}
	if s.head >= 64 && 2*s.head >= len(s.buf) {
		// Move the kept lines down (amortized O(1) a line), so that the
		// backing array stays bounded.
		n := copy(s.buf, s.buf[s.head:])
		clear(s.buf[n:])
		s.buf, s.head = s.buf[:n], 0
	}
}

func (s *stderrTail) lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.buf[s.head:]...)
}

// sanitizeLine makes a line safe to show and log: valid UTF-8, without
// terminal escape sequences or control characters (tabs become spaces).
func sanitizeLine(b []byte) string {
	plain := true
	for _, c := range b {
		if c < 0x20 || c >= 0x7f {
			plain = false
			break
		}
	}
	if plain {
		return string(b)
	}
	var sb strings.Builder
	sb.Grow(len(b))
	for i := 0; i < len(b); {
		c := b[i]
		if c == 0x1b { // ESC: drop a CSI sequence, or the ESC and its next byte
			i++
			if i < len(b) && b[i] == '[' {
				i++
				for i < len(b) && (b[i] < 0x40 || b[i] > 0x7e) {
					i++
				}
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		i += size
		switch {
		case r == '\t':
			sb.WriteByte(' ')
		case r == utf8.RuneError && size == 1:
			sb.WriteRune(utf8.RuneError)
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
		default:
			sb.WriteRune(r)
		}
	}
	return sb.String()
}
