package bridge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// CodeTooLarge is the JSON-RPC error code the stdio transport synthesizes,
// in place of a response, when a message from the server exceeds
// StdioOptions.MaxMessageBytes. The error's data is {"size": N, "limit": M}.
const CodeTooLarge = -32050

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
	// keeperKillGrace is how long the transport waits for the keeper to
	// SIGKILL and reap the group itself before it SIGKILLs the group.
	keeperKillGrace = 2 * time.Second
	// streamDrainBound is how long stdout and stderr may stay open after the
	// keeper exited (a process that escaped the keeper still holds them)
	// before the transport stops reading them.
	streamDrainBound = 5 * time.Second
)

// StdioOptions configures one stdio tool server process.
type StdioOptions struct {
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
	// KeeperPath is the executable that runs the keeper: a binary whose main
	// calls RunKeeperIfRequested first. If empty, os.Executable().
	KeeperPath string
	// Logger receives warnings about skipped stdout lines. Nil discards.
	Logger *slog.Logger
}

// StdioTransport runs a tool server as a child process and speaks
// newline-delimited JSON-RPC with it over stdin and stdout. It implements
// mcp.Transport; Connect may be called once.
//
// Unlike go-sdk's CommandTransport it skips non-JSON stdout lines instead of
// ending the session, fails only the affected call when a message is over
// the size limit, keeps a bounded stderr tail for error messages, and runs
// the server under a keeper (see RunKeeperIfRequested) in its own process
// group, so that the server and its descendants are stopped in steps by
// Close and die with the bridge.
type StdioTransport struct {
	opts StdioOptions // defaults applied; read-only after NewStdioTransport
	log  *slog.Logger
	tail *stderrTail

	mu   sync.Mutex
	conn *stdioConn // guarded by mu; set by Connect
	used bool       // guarded by mu; Connect was called
}

// NewStdioTransport returns a transport for opts. Nothing starts until
// Connect.
func NewStdioTransport(opts StdioOptions) *StdioTransport {
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
	return &StdioTransport{opts: opts, log: log, tail: &stderrTail{max: opts.StderrTailBytes}}
}

// StderrTail returns the last stderr lines kept (oldest first).
func (t *StdioTransport) StderrTail() []string { return t.tail.lines() }

// Pgid returns the process group id of the server (the keeper's pid), or 0
// before it started.
func (t *StdioTransport) Pgid() int {
	if c := t.connection(); c != nil {
		return c.pgid
	}
	return 0
}

// Pid returns the pid of the server process itself (the keeper's child), or
// 0 before it started.
func (t *StdioTransport) Pid() int {
	if c := t.connection(); c != nil {
		return int(c.childPid.Load())
	}
	return 0
}

// Done returns a channel closed once the server's process group leader has
// exited and been reaped, or nil before Connect succeeded.
func (t *StdioTransport) Done() <-chan struct{} {
	if c := t.connection(); c != nil {
		return c.exited
	}
	return nil
}

// ExitError returns how the server ended, or nil while it runs.
func (t *StdioTransport) ExitError() *ExitError {
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

func (t *StdioTransport) connection() *stdioConn {
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

// Connect starts the server under a keeper and returns the connection once
// the server process has started. ctx bounds only the start, not the
// process's life. A start failure is one line naming what to fix.
func (t *StdioTransport) Connect(ctx context.Context) (mcp.Connection, error) {
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
	path, err := resolveCommand(o.Command, lastEnv(env, "PATH"), dir)
	if err != nil {
		return nil, fail("%v", err)
	}
	keeper := o.KeeperPath
	if keeper == "" {
		if keeper, err = os.Executable(); err != nil {
			return nil, fail("cannot find the bridge's own executable to run the keeper: %v", err)
		}
	}
	spec, err := json.Marshal(keeperSpec{Path: path, Argv: append([]string{o.Command}, o.Args...), Env: env, Dir: dir})
	if err != nil {
		return nil, fail("%v", err)
	}

	// Descriptors: ours are close-on-exec and non-blocking (pollable, so
	// deadlines and Close unblock them); the keeper's ends are dup'ed into it.
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC|syscall.SOCK_NONBLOCK, 0)
	if err != nil {
		return nil, fail("lifeline: %v", err)
	}
	link := os.NewFile(uintptr(fds[0]), "lifeline")
	keeperLink := os.NewFile(uintptr(fds[1]), "lifeline-keeper")
	var toClose []*os.File // the child's ends, closed once the keeper has them
	closeAll := func(fs ...*os.File) {
		for _, f := range fs {
			if f != nil {
				_ = f.Close()
			}
		}
	}
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		closeAll(link, keeperLink)
		return nil, fail("%v", err)
	}
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		closeAll(link, keeperLink, stdinR, stdinW)
		return nil, fail("%v", err)
	}
	stderrR, stderrW, err := os.Pipe()
	if err != nil {
		closeAll(link, keeperLink, stdinR, stdinW, stdoutR, stdoutW)
		return nil, fail("%v", err)
	}
	toClose = []*os.File{keeperLink, stdinR, stdoutW, stderrW}
	// The keeper's environment: the marker and settings of the Go runtime
	// only (so that a race-enabled or coverage build behaves as configured);
	// the server's environment travels on the lifeline.
	keeperEnvList := []string{keeperEnv + "=1"}
	for _, k := range []string{"GORACE", "GOCOVERDIR", "GOTRACEBACK"} {
		if v, ok := os.LookupEnv(k); ok {
			keeperEnvList = append(keeperEnvList, k+"="+v)
		}
	}
	cmd := &exec.Cmd{
		Path:       keeper,
		Args:       []string{keeper, keeperArg, o.Name},
		Env:        keeperEnvList,
		Dir:        "/",
		Stdin:      stdinR,
		Stdout:     stdoutW,
		Stderr:     stderrW,
		ExtraFiles: []*os.File{keeperLink},
		SysProcAttr: &syscall.SysProcAttr{
			Setpgid: true,
			// A backup for the lifeline: the keeper treats SIGHUP after its
			// parent changed as the bridge's death. (SIGKILL would kill the
			// keeper before it could kill the server's descendants.)
			Pdeathsig: syscall.SIGHUP,
		},
	}
	if err := cmd.Start(); err != nil {
		closeAll(toClose...)
		closeAll(link, stdinW, stdoutR, stderrR)
		return nil, fail("cannot run the keeper %q: %v", keeper, pathErrText(err))
	}
	closeAll(toClose...)

	c := &stdioConn{
		t:        t,
		cmd:      cmd,
		pgid:     cmd.Process.Pid,
		stdin:    stdinW,
		stdout:   stdoutR,
		stderr:   stderrR,
		link:     link,
		incoming: make(chan jsonrpc.Message),
		started:  make(chan error, 1),
		closing:  make(chan struct{}),
		exited:   make(chan struct{}),
		linkDone: make(chan struct{}),
		readDone: make(chan struct{}),
		errDone:  make(chan struct{}),
	}
	t.mu.Lock()
	t.conn = c
	t.mu.Unlock()
	c.wg.Add(4) // plus the command writer below
	go c.linkLoop()
	go c.waitLoop()
	go c.stderrLoop()
	go c.readLoop()

	// The command goes to the keeper from its own goroutine, so that a
	// keeper that does not read cannot block Connect past ctx.
	spec = append(spec, '\n')
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		if _, err := link.Write(spec); err != nil {
			c.t.log.Debug("the keeper did not take the command", "error", err)
		}
	}()
	started := func(err error) (mcp.Connection, error) {
		if err != nil {
			_ = c.Close()
			return nil, fail("%v", err)
		}
		return c, nil
	}
	select {
	case err := <-c.started:
		return started(err)
	case <-c.exited:
		select {
		case err := <-c.started: // reported just before the keeper exited
			return started(err)
		default:
		}
		_ = c.Close()
		return nil, fail("the keeper %q exited before starting the server (%s)", keeper, c.exitSummary())
	case <-ctx.Done():
		_ = c.Close()
		return nil, fmt.Errorf("starting %s: %w", o.Name, ctx.Err())
	}
}

// stdioConn is the mcp.Connection of a running server.
type stdioConn struct {
	t    *StdioTransport
	pgid int // the keeper's pid, which is the process group id

	cmd    *exec.Cmd // owned by waitLoop (Wait); pgid is read by stop under reapMu
	stdin  *os.File  // written by Write under writeMu; closed by Close
	stdout *os.File  // owned by readLoop, which closes it; deadline set by waitLoop/Close
	stderr *os.File  // owned by stderrLoop, which closes it; deadline set by waitLoop/Close
	link   *os.File  // read by linkLoop; written by Connect's command writer and stop; closed by waitLoop

	writeMu sync.Mutex // serializes Write

	incoming chan jsonrpc.Message // unbuffered; sent by readLoop, closed by readLoop at end of stdout
	started  chan error           // buffered 1; the keeper's start report, sent once by linkLoop

	childPid    atomic.Int64 // set by linkLoop from "started <pid>"
	childReport atomic.Value // string: the keeper's final "exit N" / "signal N" line; set by linkLoop

	reapMu sync.Mutex // guards reaped: no signal is sent to -pgid once the keeper is reaped
	reaped bool       // guarded by reapMu

	stopping atomic.Bool // Close has begun
	exitErr  *ExitError  // written by waitLoop before it closes exited

	closing  chan struct{} // closed by Close
	exited   chan struct{} // closed by waitLoop once the keeper is reaped and exitErr is set
	linkDone chan struct{} // closed by linkLoop
	readDone chan struct{} // closed by readLoop
	errDone  chan struct{} // closed by stderrLoop

	closeOnce sync.Once
	wg        sync.WaitGroup // the four loops and the command writer
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

// Close implements mcp.Connection: it stops the process group in steps
// (close stdin, wait TerminateDuration, SIGTERM, wait KillDuration, SIGKILL)
// and returns once the keeper is reaped and every goroutine of the
// connection has ended. It is idempotent and safe concurrently with Read and
// Write; concurrent callers all wait for the first to finish.
func (c *stdioConn) Close() error {
	c.closeOnce.Do(func() {
		c.stopping.Store(true)
		close(c.closing)
		_ = c.stdin.Close()
		c.stop()
		c.wg.Wait()
	})
	return nil
}

// stop runs the stop steps until the keeper is reaped.
func (c *stdioConn) stop() {
	o := &c.t.opts
	if c.waitExited(o.TerminateDuration) {
		return
	}
	c.signalGroup(syscall.SIGTERM)
	if c.waitExited(o.KillDuration) {
		return
	}
	// Ask the keeper to SIGKILL and reap the group itself, so that no
	// zombie is left to an init that may not reap; then SIGKILL the group.
	_, _ = c.link.Write([]byte("kill\n"))
	if c.waitExited(keeperKillGrace) {
		return
	}
	c.signalGroup(syscall.SIGKILL)
	<-c.exited
}

func (c *stdioConn) waitExited(d time.Duration) bool {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-c.exited:
		return true
	case <-tm.C:
		return false
	}
}

// signalGroup sends sig to the process group unless the keeper (whose pid is
// the group id) has been reaped, when the id could be reused.
func (c *stdioConn) signalGroup(sig syscall.Signal) {
	c.reapMu.Lock()
	defer c.reapMu.Unlock()
	if !c.reaped {
		_ = syscall.Kill(-c.pgid, sig)
	}
}

// waitLoop owns the keeper process: it waits for it to exit, SIGKILLs
// whatever is left in its group while the keeper is a zombie (so the group
// id cannot be reused), reaps it, and builds exitErr.
func (c *stdioConn) waitLoop() {
	defer c.wg.Done()
	waitNoReap(c.pgid)
	c.reapMu.Lock()
	_ = syscall.Kill(-c.pgid, syscall.SIGKILL)
	_ = c.cmd.Wait()
	c.reaped = true
	c.reapMu.Unlock()

	// The keeper's end of the lifeline closed with it; the deadline only
	// guards against a descriptor that leaked elsewhere.
	_ = c.link.SetReadDeadline(time.Now().Add(time.Second))
	<-c.linkDone
	_ = c.link.Close()

	// Stdout and stderr end when their last writer is gone. Everything
	// under the keeper was killed, so that is now, unless something escaped
	// (a descriptor passed to an unrelated process): stop reading after
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

// buildExitError describes the end of the server from the keeper's report,
// or from the keeper's own status when it could not report.
func (c *stdioConn) buildExitError() *ExitError {
	e := &ExitError{Name: c.t.opts.Name, Stopped: c.stopping.Load(), StderrTail: c.t.tail.lines()}
	report, _ := c.childReport.Load().(string)
	kind, num, _ := strings.Cut(report, " ")
	n, err := strconv.Atoi(num)
	switch {
	case err == nil && kind == "exit":
		e.Status = n
	case err == nil && kind == "signal":
		e.Status, e.Signal = -1, signalName(syscall.Signal(n))
	default:
		ws, _ := c.cmd.ProcessState.Sys().(syscall.WaitStatus)
		if ws.Signaled() {
			e.Status, e.Signal = -1, signalName(ws.Signal())
		} else {
			e.Status = ws.ExitStatus()
		}
	}
	return e
}

// exitSummary describes the keeper's end for a start failure.
func (c *stdioConn) exitSummary() string {
	<-c.exited
	e := *c.exitErr
	e.Stopped = false
	return e.Error()
}

// linkLoop reads the keeper's reports from the lifeline.
func (c *stdioConn) linkLoop() {
	defer c.wg.Done()
	defer close(c.linkDone)
	br := bufio.NewReaderSize(c.link, 4096)
	sentStart := false
	for {
		line, err := br.ReadString('\n')
		line = strings.TrimSpace(line)
		kind, rest, _ := strings.Cut(line, " ")
		switch {
		case line == "":
		case !sentStart && kind == "started":
			if pid, err := strconv.Atoi(rest); err == nil {
				c.childPid.Store(int64(pid))
			}
			sentStart = true
			c.started <- nil
		case !sentStart && kind == "error":
			sentStart = true
			c.started <- errors.New(rest)
		case kind == "exit" || kind == "signal":
			c.childReport.Store(line)
		}
		if err != nil {
			return
		}
	}
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

// waitNoReap blocks until process pid has exited, leaving it waitable (a
// zombie), so that its pid (and process group id) stays reserved.
func waitNoReap(pid int) {
	const (
		pPID    = 1
		wExited = 0x4
		wNoWait = 0x1000000
	)
	var info [128]byte // siginfo_t
	for {
		_, _, e := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid), uintptr(unsafe.Pointer(&info[0])), wExited|wNoWait, 0, 0)
		if e != syscall.EINTR {
			return
		}
	}
}

// resolveCommand finds the executable the way the kernel will run it: a name
// with a slash is a path (relative to dir); any other name is looked up on
// pathList, whose relative entries are ignored.
func resolveCommand(command, pathList, dir string) (string, error) {
	if command == "" {
		return "", errors.New("no command is configured")
	}
	if strings.Contains(command, "/") {
		p := command
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if err := checkExecutable(p); err != nil {
			if p != command {
				return "", fmt.Errorf("%q (%s) %v", command, p, err)
			}
			return "", fmt.Errorf("%q %v", command, err)
		}
		return p, nil
	}
	if pathList == "" {
		return "", fmt.Errorf("%q not found: PATH is not set in the server's environment", command)
	}
	var notExec string
	for _, d := range filepath.SplitList(pathList) {
		if d == "" || !filepath.IsAbs(d) {
			continue
		}
		p := filepath.Join(d, command)
		err := checkExecutable(p)
		if err == nil {
			return p, nil
		}
		if notExec == "" && !errors.Is(err, os.ErrNotExist) {
			notExec = fmt.Sprintf("; %s %v", p, err)
		}
	}
	return "", fmt.Errorf("%q not found on PATH (%s)%s", command, pathList, notExec)
}

// checkExecutable reports why p cannot be executed, as the end of a sentence.
func checkExecutable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("does not exist: %w", os.ErrNotExist)
		}
		return errors.New(pathErrText(err))
	}
	if fi.IsDir() {
		return errors.New("is a directory")
	}
	if err := syscall.Access(p, 1 /* X_OK */); err != nil || fi.Mode()&0o111 == 0 {
		return errors.New("is not executable")
	}
	return nil
}

// pathErrText is err without the path an *os.PathError repeats.
func pathErrText(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// lastEnv returns the value of the last key= entry in env.
func lastEnv(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v
		}
	}
	return ""
}

// signalName is "SIGKILL" for syscall.SIGKILL.
func signalName(s syscall.Signal) string {
	names := map[syscall.Signal]string{
		syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT",
		syscall.SIGILL: "SIGILL", syscall.SIGTRAP: "SIGTRAP", syscall.SIGABRT: "SIGABRT",
		syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE", syscall.SIGKILL: "SIGKILL",
		syscall.SIGUSR1: "SIGUSR1", syscall.SIGSEGV: "SIGSEGV", syscall.SIGUSR2: "SIGUSR2",
		syscall.SIGPIPE: "SIGPIPE", syscall.SIGALRM: "SIGALRM", syscall.SIGTERM: "SIGTERM",
		syscall.SIGXCPU: "SIGXCPU", syscall.SIGXFSZ: "SIGXFSZ", syscall.SIGSYS: "SIGSYS",
	}
	if n, ok := names[s]; ok {
		return n
	}
	return "signal " + strconv.Itoa(int(s))
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
