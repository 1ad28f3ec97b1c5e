package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"

	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
)

// hostileHTTP is a Streamable HTTP tool server (bridgetest's replay server,
// tools echo and slow) whose answer to a tools/call with the argument
// "attack" is hostile:
//
//   - "fields": an event stream of 1 MiB id: and comment lines that never
//     ends its event;
//   - "json": a plain JSON result of size bytes, with its length;
//   - "gzip": the same, gzip-compressed (about a thousandth on the wire).
//
// Any other call is the replay server's.
type hostileHTTP struct {
	size     int
	gzipOnce sync.Once
	gzipped  []byte
}

const hostileBlock = 1 << 20

func (h *hostileHTTP) result(w io.Writer, id json.RawMessage) {
	block := bytes.Repeat([]byte("x"), hostileBlock)
	io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(id)+`,"result":{"content":[{"type":"text","text":"`)
	for n := 0; n < h.size; n += hostileBlock {
		if _, err := w.Write(block[:min(hostileBlock, h.size-n)]); err != nil {
			return
		}
	}
	io.WriteString(w, `"}]}}`)
}

func (h *hostileHTTP) handler(t *testing.T) http.Handler {
	replay, err := bridgetest.NewHTTPReplay(bridgetest.HTTPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			r.Body = io.NopCloser(bytes.NewReader(body))
			var m struct {
				ID     json.RawMessage
				Method string
				Params struct {
					Arguments struct{ Attack string }
				}
			}
			if json.Unmarshal(body, &m) == nil && m.Method == "tools/call" {
				switch m.Params.Arguments.Attack {
				case "fields":
					w.Header().Set("Content-Type", "text/event-stream")
					w.WriteHeader(http.StatusOK)
					line := append(append([]byte("id: "), bytes.Repeat([]byte("i"), hostileBlock)...), '\n')
					comment := append(append([]byte(": "), bytes.Repeat([]byte("c"), hostileBlock)...), '\n')
					for i := 0; i < 4096 && r.Context().Err() == nil; i++ { // at most 8 GiB
						if _, err := w.Write(line); err != nil {
							return
						}
						if _, err := w.Write(comment); err != nil {
							return
						}
					}
					return
				case "json":
					w.Header().Set("Content-Type", "application/json")
					w.Header().Set("Content-Length", strconv.Itoa(len(`{"jsonrpc":"2.0","id":`)+len(m.ID)+len(`,"result":{"content":[{"type":"text","text":"`)+h.size+len(`"}]}}`)))
					h.result(w, m.ID)
					return
				case "gzip":
					// Two gzip members, which a reader takes as one
					// stream: the head with this call's id, and the text
					// and tail, compressed once for every call.
					h.gzipOnce.Do(func() {
						var b bytes.Buffer
						zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
						block := bytes.Repeat([]byte("x"), hostileBlock)
						for n := 0; n < h.size; n += hostileBlock {
							zw.Write(block[:min(hostileBlock, h.size-n)])
						}
						io.WriteString(zw, `"}]}}`)
						zw.Close()
						h.gzipped = b.Bytes()
					})
					w.Header().Set("Content-Type", "application/json")
					w.Header().Set("Content-Encoding", "gzip")
					zw := gzip.NewWriter(w)
					io.WriteString(zw, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"content":[{"type":"text","text":"`)
					zw.Close()
					w.Write(h.gzipped)
					return
				}
			}
		}
		replay.ServeHTTP(w, r)
	})
}
