package stdio

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// recordingSink keeps what a streamed line hands it.
type recordingSink struct {
	pieces  [][]byte
	stopAt  int // stop after this many bytes (0: never)
	got     int
	size    int64
	over    bool
	ended   int
	replace []byte
}

func (s *recordingSink) Write(p []byte) error {
	s.pieces = append(s.pieces, p)
	s.got += len(p)
	if s.stopAt > 0 && s.got >= s.stopAt {
		return errors.New("stop")
	}
	return nil
}

func (s *recordingSink) End(size int64, over bool) []byte {
	s.size, s.over = size, over
	s.ended++
	return s.replace
}

// TestStreamLine: a long line offered to StreamLine goes to its sink in
// pieces that add up to the line, never larger than a piece, whatever
// the pipe's reads; the line after it is read as usual; a line over the
// limit stops the pieces and says so; a sink that stops gets no more.
func TestStreamLine(t *testing.T) {
	long := `{"jsonrpc":"2.0","id":1,"result":"` + strings.Repeat("é", 2_000_000) + `"}`
	after := `{"jsonrpc":"2.0","id":2,"result":{}}`
	for _, tc := range []struct {
		name   string
		max    int64
		chunk  int
		stopAt int
		over   bool
	}{
		{"pipe reads of 64 KiB", 1 << 30, 64 << 10, 0, false},
		{"reads of 1000 bytes", 1 << 30, 1000, 0, false},
		{"over the limit", 1 << 20, 64 << 10, 0, true},
		{"the sink stops", 1 << 30, 64 << 10, 300_000, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := &recordingSink{stopAt: tc.stopAt, replace: []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`)}
			offered := 0
			r := newMsgReader(&chunkReader{strings.NewReader(long + "\n" + after + "\n"), tc.chunk}, tc.max, nil, slog.New(slog.DiscardHandler))
			r.stream = func(head []byte) LineSink {
				offered++
				if !strings.HasPrefix(long, string(head)) {
					t.Errorf("offered a head that is not the line's start: %.40q", head)
				}
				return sink
			}
			var msgs []jsonrpc.Message
			for {
				m, err := r.next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				msgs = append(msgs, m)
			}
			if offered != 1 || sink.ended != 1 || sink.size != int64(len(long)) || sink.over != tc.over {
				t.Fatalf("offered %d, ended %d, size %d (want %d), over %v", offered, sink.ended, sink.size, len(long), sink.over)
			}
			joined := bytes.Join(sink.pieces, nil)
			switch {
			case tc.over:
				if len(joined) > int(tc.max) {
					t.Errorf("%d bytes handed over past the limit of %d", len(joined), tc.max)
				}
			case tc.stopAt > 0:
				if len(joined) < tc.stopAt || len(joined) > tc.stopAt+PieceSize {
					t.Errorf("%d bytes handed over, the sink stopped at %d", len(joined), tc.stopAt)
				}
			default:
				if string(joined) != long {
					t.Errorf("the pieces make %d bytes, not the line's %d", len(joined), len(long))
				}
			}
			for _, p := range sink.pieces {
				if len(p) > PieceSize {
					t.Errorf("a piece of %d bytes", len(p))
				}
			}
			if len(msgs) != 2 {
				t.Fatalf("%d messages, want the replacement and the next line", len(msgs))
			}
			if resp, ok := msgs[1].(*jsonrpc.Response); !ok || resp.ID.Raw() != int64(2) {
				t.Errorf("the line after the streamed one: %#v", msgs[1])
			}
		})
	}
}
