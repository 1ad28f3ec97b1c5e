package bridge

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

// TestSSEOverLimitKeepsID: an event over the result limit on a stream
// without a request id (a resumed GET stream) is answered too-large for the
// id read from its start, so the call it answers fails at once instead of
// waiting for its timeout (an answer for id null reaches nobody).
func TestSSEOverLimitKeepsID(t *testing.T) {
	big := strings.Repeat("x", 300)
	for _, tc := range []struct {
		name, stream string
	}{
		{"one data line", "id: e1\ndata: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":\"" + big + "\"}\n\n"},
		{"data lines", "data: {\"jsonrpc\":\"2.0\",\"id\":5,\ndata: \"result\":\"" + big + "\"}\n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSSETap(io.NopCloser(strings.NewReader(tc.stream)), newTap(nil), 100, nil)
			out, _ := io.ReadAll(s)
			var data []byte
			for _, line := range bytes.Split(out, []byte("\n")) {
				if d, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
					data = d
				}
			}
			var m struct {
				ID    json.RawMessage
				Error struct{ Code int }
			}
			if err := json.Unmarshal(data, &m); err != nil || string(m.ID) != "5" || m.Error.Code != -32050 {
				t.Fatalf("the event became %s, want a too-large error for id 5", out)
			}
		})
	}
}

// TestReadEventBounds: an event's lines other than data are bounded one by
// one and together, comments are dropped, and an ordinary event with a
// keep-alive comment passes whole.
func TestReadEventBounds(t *testing.T) {
	long := strings.Repeat("y", sseFieldMax+1)
	for _, tc := range []struct {
		name, stream string
		fields       []string
		data         string
		tooLong      bool
	}{
		{"ordinary", "id: 7\nevent: message\n: ping\ndata: {\"a\":1}\n\n", []string{"id: 7", "event: message"}, `{"a":1}`, false},
		{"field at its bound", "id: " + long[:sseFieldMax-4] + "\ndata: 1\n\n", []string{"id: " + long[:sseFieldMax-4]}, "1", false},
		{"long id line", "id: " + long + "\ndata: 1\n\n", nil, "", true},
		{"long comment", ":" + long + "\ndata: 1\n\n", nil, "", true},
		{"long unknown field", "x-custom:" + long + "\n\n", nil, "", true},
		{"many short lines", strings.Repeat("id: 123456789\n", sseFieldsMax/14+1) + "\n", nil, "", true},
		{"many short comments", strings.Repeat(": k\n", sseFieldsMax/4+1) + "\n", nil, "", true},
		{"long data line is not a field", "data: \"" + long + "\"\n\n", nil, `"` + long + `"`, false},
		{"data lines joined, CRLF", "data: a\r\ndata: b\r\n\r\n", nil, "a\nb", false},
		{"one space taken", "data:x\ndata:  y\n\n", nil, "x\n y", false},
		{"empty data line", "data:\ndata: z\n\n", nil, "\nz", false},
		{"data over the reader's buffer", "data: " + strings.Repeat("d", 200<<10) + "\r\n\n", nil, strings.Repeat("d", 200<<10), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := readEvent(bufio.NewReaderSize(strings.NewReader(tc.stream), 64<<10), 1<<20, nil)
			if tc.tooLong {
				if !errors.Is(err, errFieldsTooLong) {
					t.Fatalf("err = %v, want errFieldsTooLong", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var fields []string
			for _, f := range ev.fields {
				fields = append(fields, string(f))
			}
			if strings.Join(fields, "|") != strings.Join(tc.fields, "|") || string(ev.data) != tc.data {
				t.Fatalf("fields %q data %q, want %q %q", fields, ev.data, tc.fields, tc.data)
			}
		})
	}
}

// FuzzEventStream: whatever a server sends as an event stream, the tap
// ends (no endless loop), never panics, and what it hands go-sdk has no
// comment and no line other than data over sseFieldMax.
func FuzzEventStream(f *testing.F) {
	for _, s := range []string{
		"id: 1\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n",
		": ping\n\ndata: x\ndata: y\n\n",
		"id: " + strings.Repeat("z", 5000) + "\n",
		"data: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":\"" + strings.Repeat("x", 300) + "\"}\n\n",
		"retry: 10\r\nevent: message\r\ndata: 1\r\n\r\n",
		"data:\ndata::\n\n", // data joined from lines: each goes back behind its own data:
	} {
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, stream []byte, withID bool) {
		var id json.RawMessage
		if withID {
			id = json.RawMessage("3")
		}
		s := newSSETap(io.NopCloser(bytes.NewReader(stream)), newTap(nil), 200, id)
		out, _ := io.ReadAll(s)
		for _, line := range bytes.Split(out, []byte("\n")) {
			if bytes.HasPrefix(line, []byte("data:")) {
				continue
			}
			if bytes.HasPrefix(line, []byte(":")) {
				t.Fatalf("a comment reached go-sdk: %q", line)
			}
			if len(line) > sseFieldMax+1 {
				t.Fatalf("a line of %d bytes other than data reached go-sdk", len(line))
			}
		}
	})
}
