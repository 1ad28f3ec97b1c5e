package bridge

import (
	"bytes"
	"encoding/json"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// Fuzz tests for the decoders of what a page sends: the envelope of every
// frame and the reassembly of tools:chunk sequences, and of what a server
// answers to initialize. (The stdio line reader
// is fuzzed in stdio_reader_test.go.)

// FuzzDecodeEnvelope: any frame is either accepted with a usable type and
// id, or refused with bad-request; either way the reply the bridge would
// send, echoing what could be read, is one valid JSON object in UTF-8. A
// frame that is not UTF-8 is never accepted.
func FuzzDecodeEnvelope(f *testing.F) {
	for _, s := range []string{
		`{"type":"tools:servers","id":1}`, `{"type":"tools:call","id":"a\"b","server":"x"}`,
		`{"type":"tools:chunk","id":-1.5e3}`, `{"id":{"a":1},"type":"x"}`, `{"type":5,"id":1}`,
		`{"type":"x","id":null}`, `[1]`, ` {"type":"\u0000","id":"\ud800"}`, `{"type":"a","type":"b","id":1,"id":"2"}`,
		`hello`, ``, `{"type":"tools:servers","id":1} trailing`, "{\"type\":\"t\",\"id\":\"\xff\"}",
		`{"type":"tools:call","id":1,"arguments":{"s":"\\\udc00 \ud83d\ude00"}}`, "{\"type\":\"tools:call\",\"id\":1,\"arguments\":{\"\xed\xa0\x80\":1}}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		msg, perr := decodeEnvelope(frame)
		if perr != nil {
			if perr.Code != CodeBadRequest {
				t.Fatalf("envelope errors are bad-request, got %q", perr.Code)
			}
		} else {
			if len(msg.ID) == 0 || !json.Valid(msg.ID) || !strings.ContainsRune(`"-0123456789`, rune(msg.ID[0])) {
				t.Fatalf("accepted an unusable id %q", msg.ID)
			}
			if !bytes.Equal(msg.Frame, frame) {
				t.Fatal("the frame must be kept for the type-specific decoding")
			}
		}
		if msg.ID != nil && (!json.Valid(msg.ID) || !utf8.Valid(msg.ID)) {
			t.Fatalf("an id to echo must be valid JSON in UTF-8: %q", msg.ID)
		}
		if perr == nil && !utf8.Valid(frame) {
			t.Fatalf("accepted a frame that is not UTF-8: %q", frame)
		}
		e := perr
		if e == nil {
			e = errorf(CodeUnknownType, "unknown message type %q", msg.Type)
		}
		reply := errorReply(msg.Type, msg.ID, e)
		if !json.Valid(reply) || reply[0] != '{' {
			t.Fatalf("the reply is not one JSON object: %s", reply)
		}
		if strings.ContainsAny(e.Message, "\r\n") {
			t.Fatalf("the message is not one line: %q", e.Message)
		}
	})
}

// FuzzChunkRoundTrip: whatever message the bridge sends as chunks (valid
// UTF-8, any frame limit) arrives whole and exact through the reassembler,
// and no chunk frame is over the limit.
func FuzzChunkRoundTrip(f *testing.F) {
	f.Add([]byte(`{"type":"tools:call","id":1,"result":"x"}`), 4096)
	f.Add([]byte(strings.Repeat("Å\"\\\n€\x01 ", 3000)), 4200)
	f.Add([]byte(strings.Repeat("😀", 5000)), 4097)
	f.Fuzz(func(t *testing.T, msg []byte, limit int) {
		if !utf8.Valid(msg) || len(msg) > 1<<20 {
			return
		}
		limit = 4096 + abs(limit)%(64<<10) // the bridge's minimum frame limit is 4096
		r := newReassembler(int64(len(msg))+1, 4, time.Minute)
		var whole []byte
		frames := 0
		// The bridge sends a reply as parts (head, raw result, tail): cut
		// the message into three at character boundaries.
		cut := func(i int) int {
			for i > 0 && i < len(msg) && !utf8.RuneStart(msg[i]) {
				i--
			}
			return i
		}
		a, b := cut(len(msg)/3), cut(2*len(msg)/3)
		parts := [][]byte{msg[:a], msg[a:b], msg[b:]}
		err := chunkFrames(parts, "b1", limit, nil, frameSink(func(frame []byte) error {
			frames++
			if len(frame) > limit {
				t.Fatalf("chunk frame of %d bytes over the limit %d", len(frame), limit)
			}
			env, perr := decodeEnvelope(frame)
			if perr != nil || env.Type != typeChunk {
				t.Fatalf("chunk frame not a tools:chunk: %v %s", perr, frame)
			}
			got, ignore, perr := r.add(env.ID, frame)
			if ignore || perr != nil {
				t.Fatalf("the reassembler refused the bridge's own chunk %d: %v", frames-1, perr)
			}
			if got != nil {
				whole = bytes.Clone(got)
			}
			return nil
		}))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(whole, msg) {
			t.Fatalf("reassembled %d bytes, sent %d (%d frames)", len(whole), len(msg), frames)
		}
	})
}

// frameSink adapts a function of whole frames to chunkFrames' writers.
func frameSink(emit func([]byte) error) func() (io.WriteCloser, error) {
	return func() (io.WriteCloser, error) { return &sinkWriter{emit: emit}, nil }
}

type sinkWriter struct {
	buf  bytes.Buffer
	emit func([]byte) error
}

func (w *sinkWriter) Write(p []byte) (int, error) { return w.buf.Write(p) }
func (w *sinkWriter) Close() error                { return w.emit(w.buf.Bytes()) }

func abs(n int) int {
	if n < 0 {
		if n == -n { // math.MinInt
			return 0
		}
		return -n
	}
	return n
}

// FuzzReassembler: any sequence of frames from a page (one per line of the
// input) leaves the reassembler within its bounds: at most maxOpen
// sequences, declared bytes within the limit, a bounded memory of dropped
// ids; a message it completes has exactly its declared size; every error
// is a documented code.
func FuzzReassembler(f *testing.F) {
	f.Add([]byte(`{"type":"tools:chunk","id":"a","seq":0,"count":2,"size":6,"data":"abc"}` + "\n" +
		`{"type":"tools:chunk","id":"a","seq":1,"count":2,"size":6,"data":"def"}`))
	f.Add([]byte(`{"type":"tools:chunk","id":1,"seq":0,"count":1,"size":0,"data":""}` + "\n" +
		`{"type":"tools:chunk","id":1,"seq":1,"count":1,"size":0,"data":""}`))
	f.Add([]byte(`{"type":"tools:chunk","id":"x","seq":0,"count":3,"size":2000,"data":"Å"}` + "\n" +
		`{"type":"tools:chunk","id":"x","seq":0,"count":3,"size":2000,"data":"Å"}` + "\n" +
		`{"type":"tools:chunk","id":"y","seq":0,"count":9223372036854775807,"size":9223372036854775807,"data":""}`))
	f.Add([]byte(`{"type":"tools:chunk","id":"z","seq":0,"count":1,"size":1e400,"data":""}`))
	f.Fuzz(func(t *testing.T, input []byte) {
		const limit, maxOpen = 1024, 3
		r := newReassembler(limit, maxOpen, time.Minute)
		clock := time.Unix(0, 0)
		r.now = func() time.Time { return clock }
		for _, frame := range bytes.Split(input, []byte("\n")) {
			clock = clock.Add(7 * time.Second)
			if len(r.expire()) > maxOpen {
				t.Fatal("expired more sequences than may be open")
			}
			env, perr := decodeEnvelope(frame)
			if perr != nil || env.Type != typeChunk {
				continue
			}
			var declared struct {
				Size int64 `json:"size"`
			}
			json.Unmarshal(frame, &declared)
			msg, ignore, perr := r.add(env.ID, frame)
			switch {
			case perr != nil:
				if perr.Code != CodeBadRequest && perr.Code != CodeTooLargeErr {
					t.Fatalf("undocumented code %q", perr.Code)
				}
				if !json.Valid(errorReply(typeChunk, env.ID, perr)) {
					t.Fatal("the error reply is not JSON")
				}
				if ignore || msg != nil {
					t.Fatal("an error comes alone")
				}
			case msg != nil && int64(len(msg)) != declared.Size:
				t.Fatalf("completed a message of %d bytes, declared %d", len(msg), declared.Size)
			}
			if len(r.open) > maxOpen || r.pending > limit || r.pending < 0 || len(r.dropped) > 64 {
				t.Fatalf("out of bounds: %d open, %d bytes declared, %d dropped ids", len(r.open), r.pending, len(r.dropped))
			}
			var held int64
			for _, s := range r.open {
				held += int64(len(s.buf))
				if int64(len(s.buf)) > s.size {
					t.Fatalf("a sequence holds %d bytes, more than its size %d", len(s.buf), s.size)
				}
			}
			if held > limit {
				t.Fatalf("open sequences hold %d bytes, over the limit", held)
			}
		}
	})
}

// FuzzInitialize: whatever a server answers to initialize, the SDK gets a
// well-formed response (initStub) and the page gets serverInfo as a JSON
// object and instructions as a JSON string or nothing (describedSelf),
// exactly as they appear in the server's bytes, except that bytes that are
// not UTF-8 are shown as U+FFFD.
func FuzzInitialize(f *testing.F) {
	f.Add([]byte(`{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"a","version":"1","title":"T","icons":[{"src":"data:,","sizes":1}]},"instructions":"hi"}`))
	f.Add([]byte(`{"serverInfo":"x","instructions":5}`))
	f.Add([]byte(`[1]`))
	f.Add([]byte(`{"serverInfo":{"name":3,"version":null}}`))
	f.Fuzz(func(t *testing.T, result []byte) {
		if !json.Valid(result) {
			return // the tap only sees results of messages that decoded
		}
		raw := append(append([]byte(`{"jsonrpc":"2.0","id":1,"result":`), result...), '}')
		out := initStub([]byte("1"), result, raw)
		if !json.Valid(out) {
			t.Fatalf("initStub made invalid JSON: %q", out)
		}
		info, instr := describedSelf(result)
		var obj map[string]json.RawMessage
		if json.Unmarshal(info, &obj) != nil || obj == nil {
			t.Fatalf("serverInfo is not an object: %q", info)
		}
		if instr != nil {
			var s string
			if json.Unmarshal(instr, &s) != nil {
				t.Fatalf("instructions is not a string: %q", instr)
			}
		}
		// What the page is shown is text: the server's bytes, with any
		// that are not UTF-8 as U+FFFD (a text frame carries nothing else).
		if !utf8.Valid(info) || !utf8.Valid(instr) {
			t.Fatalf("not UTF-8 for the page: serverInfo %q, instructions %q", info, instr)
		}
		shown := bytes.ToValidUTF8(result, []byte("\uFFFD"))
		if string(info) != `{"name":"","version":""}` && !bytes.Contains(shown, info) {
			t.Fatalf("serverInfo %q is not the server's bytes", info)
		}
		if instr != nil && !bytes.Contains(shown, instr) {
			t.Fatalf("instructions %q are not the server's bytes", instr)
		}
	})
}

// FuzzListStub: whatever a server's tools/list page holds, the stub go-sdk
// decodes is valid JSON that decodes as a tools/list result, keeps the
// page's cursor, and names only tools whose name the page gave as a string.
func FuzzListStub(f *testing.F) {
	f.Add([]byte(`{"tools":[{"name":"a","inputSchema":{"type":"object","properties":{"r":{"type":"string","x-mcp-header":"R"}}},"icons":[{"src":1}]}],"nextCursor":"c"}`))
	f.Add([]byte(`{"tools":[{"name":1,"inputSchema":{}},{"name":"b","inputSchema":[]}]}`))
	f.Add([]byte(`{"tools":null}`))
	f.Fuzz(func(t *testing.T, result []byte) {
		if !json.Valid(result) {
			return // the tap only sees results of messages that decoded
		}
		out := listStub(result)
		var got struct {
			Tools []struct {
				Name        string          `json:"name"`
				InputSchema json.RawMessage `json:"inputSchema"`
			} `json:"tools"`
			NextCursor *string `json:"nextCursor"`
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("listStub made %q: %v", out, err)
		}
		var page struct {
			NextCursor *string `json:"nextCursor"`
		}
		if json.Unmarshal(result, &page) == nil && (page.NextCursor == nil) != (got.NextCursor == nil) {
			t.Fatalf("the cursor was not kept: %q -> %q", result, out)
		}
		for _, tool := range got.Tools {
			if !bytes.Contains(result, tool.InputSchema) {
				t.Fatalf("inputSchema %q is not the server's bytes", tool.InputSchema)
			}
		}
	})
}

// FuzzInputRequired: any tools/call result either passes (nil) or fails
// the call with one line of valid UTF-8 for the person.
func FuzzInputRequired(f *testing.F) {
	f.Add([]byte(`{"resultType":"input_required","inputRequests":{"a":{"method":"elicitation/create","params":{"message":"Size?\nnm"}}}}`))
	f.Add([]byte(`{"content":[{"type":"text","text":"input_required"}]}`))
	f.Fuzz(func(t *testing.T, result []byte) {
		e := inputRequired("srv", "tool", result)
		if e == nil {
			return
		}
		if strings.ContainsAny(e.Message, "\r\n") || !utf8.ValidString(e.Message) {
			t.Fatalf("message %q is not one line of UTF-8", e.Message)
		}
	})
}

var literalIsErrorTrue = regexp.MustCompile(`"isError"[ \t\r\n]*:[ \t\r\n]*true`)

// FuzzIsToolError: a server's result counts as a tool error exactly when
// a page decoding it finds isError true at its top level (written as the
// plain key), and never for anything else: no panic, no false positive.
func FuzzIsToolError(f *testing.F) {
	for _, s := range []string{
		`{"content":[],"isError":true}`, `{"isError":false}`, `{"ISERROR":true}`, `{"isError":true,"isError":false}`,
		`{"structuredContent":{"isError":true}}`, `{"isError":"true"}`, `[{"isError":true}]`, `{"isError":true`, `{"is\u0045rror":true}`, `{"isError" :` + "\n" + ` true}`, `{"a":{"isError":false},"isError":true}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got := isToolError(raw)
		var m map[string]any
		want := false
		if json.Unmarshal(raw, &m) == nil {
			v, ok := m["isError"].(bool)
			want = ok && v
		}
		if got && !want {
			t.Fatalf("%q counted as a tool error; a page reads isError %v", raw, m["isError"])
		}
		if want && !got && literalIsErrorTrue.Match(raw) {
			t.Fatalf("%q not counted as a tool error; a page reads isError true", raw)
		}
	})
}

// FuzzRareMarker: each marker's index is where bytes.Index finds it.
func FuzzRareMarker(f *testing.F) {
	f.Add([]byte(`{"method":"notifications/progress","params":{}}`))
	f.Add([]byte(`{"result":{"resultType":"input_required","x":"_required\""}}`))
	f.Add([]byte(`"is"isError"Error" "isError":true`))
	f.Add([]byte(`/progress" "notifications/progress`))
	f.Fuzz(func(t *testing.T, s []byte) {
		for _, m := range []rareMarker{markProgress, markInputRequired, markIsError} {
			if m.pat[m.anchor] == m.pat[0] {
				t.Fatalf("%s: the anchor is the first byte", m.pat)
			}
			if got, want := m.index(s), bytes.Index(s, []byte(m.pat)); got != want {
				t.Fatalf("%s.index(%q) = %d, bytes.Index says %d", m.pat, s, got, want)
			}
		}
	})
}

// FuzzPageSessionFrames: tools:hello and tools:ack are decoded from what a
// page sends, in any order and shape. Every reply is one JSON object; a
// page session is granted at most once per socket and only when asked for,
// with a token of the documented form; an ack never frees what was not
// sent; and the tab never panics.
func FuzzPageSessionFrames(f *testing.F) {
	for _, s := range []string{
		"{\"type\":\"tools:hello\",\"id\":1,\"features\":[\"resume\",\"binary\"]}\n{\"type\":\"tools:ack\",\"n\":0}",
		"{\"type\":\"tools:ack\",\"n\":3}\n{\"type\":\"tools:hello\",\"id\":1,\"features\":[\"resume\"]}",
		"{\"type\":\"tools:hello\",\"id\":1,\"features\":[\"resume\"],\"resume\":{\"token\":\"ps_x\",\"n\":0}}",
		"{\"type\":\"tools:hello\",\"id\":1,\"features\":\"resume\"}\n{\"type\":\"tools:hello\",\"id\":2,\"features\":[]}",
		"{\"type\":\"tools:ack\"}\n{\"type\":\"tools:ack\",\"n\":-1}\n{\"type\":\"tools:ack\",\"n\":1e99}",
		"{\"type\":\"tools:hello\",\"id\":1,\"features\":[\"resume\"]}\n{\"type\":\"tools:hello\",\"id\":2,\"features\":[\"resume\"]}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		b := New(Options{Catalog: StaticCatalog{}, Gate: nil})
		defer b.Close()
		tb := newTab(b, nil, Admission{User: "alice"}, "")
		re := newReassembler(1<<20, 4, time.Minute)
		defer re.closeAll()
		for _, frame := range bytes.Split(data, []byte("\n")) {
			tb.handleFrame(re, frame)
		}
		grants := 0
		for _, m := range tb.queue {
			whole := bytes.Join(m.parts, nil)
			var reply struct {
				Type     string
				OK       *bool
				Features []string
				Session  *struct{ Token string }
			}
			if err := json.Unmarshal(whole, &reply); err != nil {
				t.Fatalf("a reply that is not JSON: %q", whole)
			}
			if reply.Type == typeHello && reply.OK != nil && *reply.OK {
				grants++
				for _, f := range reply.Features {
					if f != featureResume && f != featureBinary {
						t.Fatalf("granted an unknown feature %q", f)
					}
				}
				if reply.Session != nil && (!strings.HasPrefix(reply.Session.Token, "ps_") || len(reply.Session.Token) != 46) {
					t.Fatalf("a token not of the documented form: %q", reply.Session.Token)
				}
			}
		}
		if grants > 1 {
			t.Fatalf("tools:hello granted %d times on one socket", grants)
		}
		if tb.seq.Load() != 0 || len(tb.held) != 0 {
			t.Fatalf("nothing was sent, yet seq %d and %d held", tb.seq.Load(), len(tb.held))
		}
		b.forgetSession(tb)
	})
}
