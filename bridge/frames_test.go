package bridge_test

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
)

// TestEveryMessageIsOneFrame: each message and each chunk the bridge sends
// is a single WebSocket frame, never continuation frames. tornado before
// 6.3 (under jupyter-server-proxy on Debian 12) joins continuation frames
// quadratically: an 8 MiB chunk in 32 KiB pieces cost it about 1 GiB of
// copying, and the Jupyter hop 1.3-1.5x the bridge alone
// (BenchmarkJupyterHop).
func TestEveryMessageIsOneFrame(t *testing.T) {
	spec := fakeServer(t, "fake", bridgetest.Mode{})
	h := newHarness(t, bridge.Options{FrameLimit: 1 << 20}, spec)
	conn := rawDial(t, strings.TrimPrefix(h.srv.URL, "http://"))
	defer conn.Close()
	r := bufio.NewReader(conn)
	send := func(v map[string]any) {
		b, _ := json.Marshal(v)
		writeMaskedText(t, conn, b)
	}
	send(map[string]any{"type": "tools:connect", "id": 1, "server": spec.Name, "fingerprint": spec.Fingerprint, "confirmed": true})
	conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	if _, _, payload := readFrame(t, r); !strings.Contains(string(payload), `"ok":true`) {
		t.Fatalf("connect: %.300s", payload)
	}
	// 200 KB: one message over gorilla's 32 KiB buffer; 3 MB: chunks of
	// up to 1 MiB.
	send(map[string]any{"type": "tools:call", "id": 2, "server": spec.Name, "tool": "big", "arguments": map[string]any{"bytes": 200 << 10}})
	send(map[string]any{"type": "tools:call", "id": 3, "server": spec.Name, "tool": "big", "arguments": map[string]any{"bytes": 3 << 20}})
	replies, frames, chunks := 0, 0, 0
	for replies < 2 {
		fin, opcode, payload := readFrame(t, r)
		frames++
		if !fin || opcode != 1 {
			t.Fatalf("frame %d: fin %v, opcode %d (%d bytes): every message must be one text frame", frames, fin, opcode, len(payload))
		}
		var m struct {
			Type  string `json:"type"`
			OK    *bool  `json:"ok"`
			Seq   int    `json:"seq"`
			Count int    `json:"count"`
		}
		if err := json.Unmarshal(payload, &m); err != nil {
			t.Fatalf("frame %d is not one JSON message: %v", frames, err)
		}
		if m.Type == "tools:chunk" {
			chunks++
			if m.Seq+1 == m.Count {
				replies++
			}
			continue
		}
		if m.OK != nil {
			replies++
		}
	}
	if chunks < 3 {
		t.Fatalf("the 3 MB result came in %d chunks, want at least 3 of 1 MiB", chunks)
	}
}

// rawDial opens a WebSocket to the bridge by hand, so that frames can be
// read as they are on the wire.
func rawDial(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	key := make([]byte, 16)
	rand.Read(key)
	fmt.Fprintf(conn, "GET /builder-tools/ws HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n",
		addr, base64.StdEncoding.EncodeToString(key))
	// Read the handshake answer byte by byte up to the blank line, so that
	// no frame byte is consumed by a buffer.
	var head []byte
	b := make([]byte, 1)
	for !strings.HasSuffix(string(head), "\r\n\r\n") {
		if _, err := conn.Read(b); err != nil {
			t.Fatalf("handshake: %v (%q)", err, head)
		}
		head = append(head, b[0])
	}
	if !strings.Contains(string(head), " 101 ") {
		t.Fatalf("handshake: %q", head)
	}
	return conn
}

func writeMaskedText(t *testing.T, w io.Writer, p []byte) {
	t.Helper()
	hdr := []byte{0x81}
	switch {
	case len(p) < 126:
		hdr = append(hdr, 0x80|byte(len(p)))
	case len(p) < 1<<16:
		hdr = append(hdr, 0x80|126, byte(len(p)>>8), byte(len(p)))
	default:
		t.Fatalf("message too long for this test")
	}
	mask := []byte{1, 2, 3, 4}
	hdr = append(hdr, mask...)
	out := make([]byte, len(p))
	for i := range p {
		out[i] = p[i] ^ mask[i%4]
	}
	if _, err := w.Write(append(hdr, out...)); err != nil {
		t.Fatal(err)
	}
}

func readFrame(t *testing.T, r *bufio.Reader) (fin bool, opcode byte, payload []byte) {
	t.Helper()
	fin, opcode, payload, err := tryReadFrame(r)
	if err != nil {
		t.Fatalf("read frame: %v", err)
	}
	return fin, opcode, payload
}

// tryReadFrame reads one frame, or says why it could not.
func tryReadFrame(r *bufio.Reader) (fin bool, opcode byte, payload []byte, err error) {
	var h [2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return false, 0, nil, err
	}
	fin, opcode = h[0]&0x80 != 0, h[0]&0x0f
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		io.ReadFull(r, b[:])
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		io.ReadFull(r, b[:])
		n = binary.BigEndian.Uint64(b[:])
	}
	payload = make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		return false, 0, nil, fmt.Errorf("payload: %w", err)
	}
	return fin, opcode, payload, nil
}
