package bridgetest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if ServeFromEnv() {
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// lockedBuffer collects a child's stderr.
type lockedBuffer = Buffer

func (b *lockedBuffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Len()
}

// child is this test binary re-executed as a server. Its stdin and stdout
// are plain os.Pipe files, so that Wait never closes what the test reads.
type child struct {
	cmd    *exec.Cmd
	stdin  *os.File // the test's write end
	stdout *os.File // the test's read end
	stderr *lockedBuffer
	done   chan struct{} // closed when the child has exited
	err    error         // Wait's result; set before done is closed
}

func startChild(t *testing.T, mode Mode) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), mode.Env())
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, stdin: inW, stdout: outR, stderr: &lockedBuffer{}, done: make(chan struct{})}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, c.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	inR.Close()
	outW.Close()
	go func() {
		c.err = cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		inW.Close()
		cmd.Process.Kill()
		<-c.done
		outR.Close()
	})
	return c
}

// wait returns the child's exit error, failing after 20 s.
func (c *child) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-c.done:
		return c.err
	case <-time.After(20 * time.Second):
		t.Fatalf("the server did not exit within 20 s")
		return nil
	}
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err == nil {
		return 0
	}
	return -1
}

// connectSDK connects a go-sdk client to r/w (a child's or in-process pipes).
func connectSDK(t *testing.T, r io.ReadCloser, w io.WriteCloser, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "bridgetest-test", Version: "1"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: r, Writer: w, MaxLineLength: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	return cs
}

// inProcess runs Serve on pipes in this process.
type inProcess struct {
	toServer   *io.PipeWriter
	fromServer *io.PipeReader
	stderr     *lockedBuffer
	done       chan error // receives Serve's result
}

func startInProcess(t *testing.T, mode Mode) *inProcess {
	t.Helper()
	sr, cw := io.Pipe()
	cr, sw := io.Pipe()
	p := &inProcess{toServer: cw, fromServer: cr, stderr: &lockedBuffer{}, done: make(chan error, 1)}
	go func() {
		err := Serve(context.Background(), sr, sw, p.stderr, mode)
		sw.Close()
		p.done <- err
	}()
	t.Cleanup(func() {
		cw.Close()
		cr.Close()
		select {
		case <-p.done:
		case <-time.After(20 * time.Second):
			t.Errorf("Serve did not return within 20 s of its input closing")
		}
	})
	return p
}

// rawClient speaks newline-delimited JSON-RPC by hand, so that junk lines and
// exact bytes are visible.
type rawClient struct {
	t *testing.T
	w io.Writer
	r *bufio.Reader
}

func newRaw(t *testing.T, w io.Writer, r io.Reader) *rawClient {
	return &rawClient{t: t, w: w, r: bufio.NewReaderSize(r, 1<<20)}
}

func (c *rawClient) send(format string, args ...any) {
	c.t.Helper()
	if _, err := fmt.Fprintf(c.w, format+"\n", args...); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

// line reads the next line (without its newline), failing after 20 s.
func (c *rawClient) line() string {
	c.t.Helper()
	type res struct {
		s   string
		err error
	}
	ch := make(chan res, 1)
	go func() {
		s, err := c.r.ReadString('\n')
		ch <- res{strings.TrimSuffix(s, "\n"), err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			c.t.Fatalf("read: %v (after %q)", r.err, r.s)
		}
		return r.s
	case <-time.After(20 * time.Second):
		c.t.Fatalf("no line within 20 s")
		return ""
	}
}

type rpcMsg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// msg reads the next JSON-RPC message, skipping junk lines; junk counts them.
func (c *rawClient) msg(junk *int) rpcMsg {
	c.t.Helper()
	for {
		l := c.line()
		var m rpcMsg
		if err := json.Unmarshal([]byte(l), &m); err != nil || (m.ID == nil && m.Method == "") {
			if junk != nil {
				*junk++
			}
			continue
		}
		return m
	}
}

func (c *rawClient) initialize() {
	c.t.Helper()
	c.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	m := c.msg(nil)
	if string(m.ID) != "0" || m.Result == nil {
		c.t.Fatalf("initialize answer %+v", m)
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}
