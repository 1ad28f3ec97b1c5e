package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
)

// TestIdleConnectionsDoNotLockOutPages: idle connections, some that never
// send a request and some kept alive after one, do not keep a page out: it
// connects and is answered within 1 s while they press, and the bridge
// holds at most maxPending of them. Before the bound, 20,000 of them used up
// the bridge's file descriptors and no page could connect.
// MEGANE_ABUSE_CONNS sets their number (default 2,000; `make abuse` 20,000).
func TestIdleConnectionsDoNotLockOutPages(t *testing.T) {
	n := 2000
	if v, err := strconv.Atoi(os.Getenv("MEGANE_ABUSE_CONNS")); err == nil && v > 0 {
		n = v
	}
	r := startServe(t, "--standalone", "--token", "tok-0123456789abcdef", "--servers", demoServersFile(t, nil))
	defer r.stop()
	// Children hold the idle connections (a process may have 20,000 files
	// here, and the bridge's side of them is in this one).
	const perChild = 5000
	var closed, held int
	var children []*idleHolder
	defer func() {
		for _, c := range children {
			c.stop()
		}
	}()
	for left := n; left > 0; left -= perChild {
		children = append(children, startIdleHolder(t, r.addr, min(left, perChild)))
	}

	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, _, err := bridgetest.Dial(ctx, "ws://"+r.addr+"/megane/builder-tools/ws?token=tok-0123456789abcdef", nil)
	if err != nil {
		t.Fatalf("a page could not connect while %d idle connections press: %v", n, err)
	}
	defer p.Close()
	if m, err := p.Request(ctx, map[string]any{"type": "tools:servers", "id": 1}); err != nil || m.OK == nil || !*m.OK {
		t.Fatalf("tools:servers: %v %v", err, m)
	}
	took := time.Since(start)
	t.Logf("a page connected and was answered in %s while %d idle connections pressed", took.Round(time.Millisecond), n)
	if took > time.Second {
		t.Errorf("the page took %s, want at most 1 s", took)
	}

	// The bridge closed all but the newest maxPending of them.
	for _, c := range children {
		cl, h := c.stop()
		closed += cl
		held += h
	}
	t.Logf("the bridge closed %d of them and held %d", closed, held)
	t.Logf("abuse: %d idle connections | a page answered within 1 s; at most %d held | answered in %s; %d held", n, maxPending, took.Round(time.Millisecond), held)
	if held > maxPending {
		t.Errorf("the bridge held %d idle connections open, want at most %d", held, maxPending)
	}
	if n > maxPending && closed < n-maxPending {
		t.Errorf("the bridge closed %d of %d idle connections, want at least %d (it holds at most %d pending)", closed, n, n-maxPending, maxPending)
	}
}

// idleConnsEnv makes this test binary hold idle connections
// ("ADDR COUNT"): half that never send anything, half kept alive after one
// request; it prints "ready" once all are open and, when its standard input
// closes, how many the server had closed and how many were still open.
const idleConnsEnv = "MEGANE_TEST_IDLE_CONNS"

func holdIdleConnections(spec string) int {
	var addr string
	var n int
	if _, err := fmt.Sscan(spec, &addr, &n); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	conns := make([]net.Conn, 0, n)
	for i := 0; i < n; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			fmt.Fprintf(os.Stderr, "connection %d: %v\n", i, err)
			return 1
		}
		conns = append(conns, c)
		if i%2 == 1 {
			c.Write([]byte("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"))
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
				resp.Body.Close()
			}
		}
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	closed := 0
	one := make([]byte, 1)
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(time.Millisecond))
		if _, err := c.Read(one); err != nil {
			if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
				closed++
			}
		}
		c.Close()
	}
	fmt.Println(closed, n-closed)
	return 0
}

type idleHolder struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

func startIdleHolder(t *testing.T, addr string, n int) *idleHolder {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), idleConnsEnv+"="+addr+" "+strconv.Itoa(n))
	cmd.Stderr = os.Stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &idleHolder{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}
	if line, err := h.out.ReadString('\n'); err != nil || strings.TrimSpace(line) != "ready" {
		h.stop()
		t.Fatalf("idle connection holder: %q %v", line, err)
	}
	return h
}

// stop lets the holder count and close its connections; it returns how
// many the server had closed and how many were open.
func (h *idleHolder) stop() (closed, open int) {
	if h.stdin != nil {
		h.stdin.Close()
		h.stdin = nil
		fmt.Fscan(h.out, &closed, &open)
		h.cmd.Wait()
	}
	return closed, open
}

// deadlineConn records the read deadlines set on it.
type deadlineConn struct {
	net.Conn
	got []time.Time
}

func (c *deadlineConn) SetReadDeadline(t time.Time) error {
	c.got = append(c.got, t)
	return nil
}

// TestDeadlinesSpread: connections accepted together do not time out
// together: each puts its future read deadlines (the header timeout, the
// idle timeout) off by a share of deadlineSpread of its own, so that an
// abuser's hundreds of idle connections are closed over that time rather
// than in one burst. A deadline already past (an aborted read) and no
// deadline are set as given.
func TestDeadlinesSpread(t *testing.T) {
	l := newConnLimiter(maxPending, maxConns)
	base := time.Now().Add(readHeaderTimeout)
	past, none := time.Unix(1, 0), time.Time{}
	distinct := map[time.Duration]bool{}
	const conns = 100
	for range conns {
		raw := &deadlineConn{}
		c := newLimitedConn(raw, l)
		for _, d := range []time.Time{base, past, none} {
			if err := c.SetReadDeadline(d); err != nil {
				t.Fatal(err)
			}
		}
		later := raw.got[0].Sub(base)
		if later < 0 || later >= deadlineSpread {
			t.Fatalf("a deadline %s from now was put off by %s, want under %s", readHeaderTimeout, later, deadlineSpread)
		}
		distinct[later.Truncate(deadlineSpread/20)] = true
		if !raw.got[1].Equal(past) || !raw.got[2].IsZero() {
			t.Fatalf("a past deadline became %s and none became %s: want them as given", raw.got[1], raw.got[2])
		}
	}
	// 100 connections over 20 slots of 100 ms: all in a few slots would be
	// a burst (at random, fewer than 10 slots happens once in 10^20).
	if len(distinct) < 10 {
		t.Errorf("%d connections' deadlines fell in %d of 20 slots of %s: not spread", conns, len(distinct), deadlineSpread/20)
	}
}
