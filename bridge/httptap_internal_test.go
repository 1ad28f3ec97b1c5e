package bridge

import (
	"bytes"
	"encoding/json"
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
