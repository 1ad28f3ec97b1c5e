package stdio

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// chunkReader returns at most n bytes per Read, like a pipe.
type chunkReader struct {
	r io.Reader
	n int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(p) > c.n {
		p = p[:c.n]
	}
	return c.r.Read(p)
}

// readAll decodes every message of input.
func readAll(t testing.TB, input string, max int64, chunk int) ([]jsonrpc.Message, string) {
	var logs syncBuffer
	r := newMsgReader(&chunkReader{strings.NewReader(input), chunk}, max, nil, slog.New(slog.NewTextHandler(&logs, nil)))
	var msgs []jsonrpc.Message
	for {
		m, err := r.next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("next: %v", err)
			}
			return msgs, logs.String()
		}
		msgs = append(msgs, m)
	}
}

// describe is a message in a short comparable form.
func describe(m jsonrpc.Message) string {
	switch m := m.(type) {
	case *jsonrpc.Request:
		return "req " + jsonString(m.ID.Raw()) + " " + m.Method
	case *jsonrpc.Response:
		if m.Error != nil {
			var we *jsonrpc.Error
			if errors.As(m.Error, &we) {
				return "err " + jsonString(m.ID.Raw()) + " " + jsonString(we.Code) + " " + we.Message + " " + string(we.Data)
			}
			return "err " + jsonString(m.ID.Raw()) + " " + m.Error.Error()
		}
		return "res " + jsonString(m.ID.Raw()) + " " + string(m.Result)
	}
	return "?"
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestStdioReader(t *testing.T) {
	big := strings.Repeat("y", 300)
	idFirst := `{"jsonrpc":"2.0","id":7,"result":"` + big + `"}`
	idLast := `{"jsonrpc":"2.0","result":{"id":99,"s":"` + big + `\"}"},"id":"call-9"}`
	deep := `{"jsonrpc":"2.0","id":"c1","result":{"x":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}}`
	_, deepErr := decodeJSONRPC([]byte(deep))
	tooLarge := func(id string, line string) string {
		return fmt.Sprintf(`err %s -32050 result of %d bytes exceeds the limit of 100 bytes {"limit":100,"size":%d}`, id, len(line), len(line))
	}
	for _, tc := range []struct {
		name  string
		input string
		max   int64
		want  []string
		log   string
	}{
		{"messages and junk",
			"banner\n\n  \r\n" + `{"jsonrpc":"2.0","id":1,"result":{}}` + "\r\n[1]\n" +
				`{"jsonrpc":"2.0","method":"notifications/progress","params":{}}` + "\nnull\n" +
				`{"jsonrpc":"2.0","id":"a","error":{"code":-1,"message":"m"}}`,
			1 << 20,
			[]string{`res 1 {}`, `req null notifications/progress`, `err "a" -1 m `},
			`line=banner`},
		{"invalid objects are skipped",
			`{"jsonrpc":"2.0"}` + "\n" + `{"id":1}` + "\n" + `{"jsonrpc":"2.0","id":[1],"result":1}` + "\n" + `{broken` + "\n" + `{"jsonrpc":"2.0","id":2,"result":2}`,
			1 << 20,
			[]string{`res 2 2`},
			`skipping an invalid JSON-RPC message`},
		{"oversized response with its id first",
			idFirst + "\n" + `{"jsonrpc":"2.0","id":8,"result":1}` + "\n",
			100,
			[]string{tooLarge("7", idFirst), `res 8 1`},
			""},
		{"oversized response with its id last and a nested id",
			idLast + "\r\n",
			100,
			[]string{tooLarge(`"call-9"`, idLast+"\r")},
			""},
		{"oversized request is dropped",
			`{"jsonrpc":"2.0","id":7,"method":"sampling/createMessage","params":"` + big + `"}` + "\n" + `{"jsonrpc":"2.0","id":8,"result":1}`,
			100,
			[]string{`res 8 1`},
			`dropping an oversized request`},
		{"oversized without an id",
			`{"jsonrpc":"2.0","result":"` + big + `"}` + "\n",
			100,
			nil,
			`whose id could not be read`},
		{"oversized junk",
			big + "\n" + `{"jsonrpc":"2.0","id":1,"result":1}`,
			100,
			[]string{`res 1 1`},
			`oversized line on the server's stdout that is not a JSON-RPC message`},
		{"a response too deep to decode fails its request",
			deep + "\n" + `{"jsonrpc":"2.0","id":8,"result":1}`,
			1 << 20,
			[]string{fmt.Sprintf(`err "c1" -32051 its response of %d bytes could not be read: %v `, len(deep), deepErr), `res 8 1`},
			`could not be decoded: failing its request`},
		{"JSON that is not a response is still skipped",
			`{"level":"info","id":3,"msg":"` + strings.Repeat("[", 10) + `"}` + "\n" + `{"id":4,"result":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}` + "\n" + `{"jsonrpc":"2.0","id":8,"result":1}`,
			1 << 20,
			[]string{`res 8 1`},
			`skipping an invalid JSON-RPC message`},
		{"fractional id is not trusted",
			`{"jsonrpc":"2.0","id":1.5,"result":"` + big + `"}`,
			100,
			nil,
			`whose id could not be read`},
		{"exactly at the limit",
			`{"jsonrpc":"2.0","id":1,"result":"` + strings.Repeat("z", 100-len(`{"jsonrpc":"2.0","id":1,"result":""}`)) + `"}` + "\n",
			100,
			[]string{`res 1 "` + strings.Repeat("z", 100-len(`{"jsonrpc":"2.0","id":1,"result":""}`)) + `"`},
			""},
	} {
		for _, chunk := range []int{1, 7, 1 << 20} {
			t.Run(tc.name+"/chunk"+jsonString(chunk), func(t *testing.T) {
				msgs, logs := readAll(t, tc.input, tc.max, chunk)
				var got []string
				for _, m := range msgs {
					got = append(got, describe(m))
				}
				if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
					t.Errorf("messages\n got %q\nwant %q", got, tc.want)
				}
				if !strings.Contains(logs, tc.log) {
					t.Errorf("log lacks %q:\n%s", tc.log, logs)
				}
			})
		}
	}
}

// TestStdioReaderLongLines crosses the read buffer's size in every way.
func TestStdioReaderLongLines(t *testing.T) {
	var in bytes.Buffer
	var want []string
	for _, n := range []int{readChunk - 40, readChunk - 39, readChunk, readChunk + 1, 3*readChunk + 5, 1 << 20, 10} {
		text := strings.Repeat("q", n)
		id := len(want) + 1
		in.WriteString(`{"jsonrpc":"2.0","id":` + jsonString(id) + `,"result":"` + text + `"}` + "\n")
		want = append(want, `res `+jsonString(id)+` "`+text+`"`)
	}
	for _, chunk := range []int{1000, readChunk, 1 << 20} {
		msgs, _ := readAll(t, in.String(), 2<<20, chunk)
		if len(msgs) != len(want) {
			t.Fatalf("chunk %d: %d messages, want %d", chunk, len(msgs), len(want))
		}
		for i, m := range msgs {
			if describe(m) != want[i] {
				t.Errorf("chunk %d: message %d differs (%d bytes)", chunk, i, len(describe(m)))
			}
		}
	}
}

// TestStdioReaderChunkedLines: lines longer than one of the chunks a long
// line is read into arrive whole, and one over the limit is reported with
// its exact size however the chunks fell.
func TestStdioReaderChunkedLines(t *testing.T) {
	text := strings.Repeat("w", 2*longLineChunk+12345)
	line := `{"jsonrpc":"2.0","id":7,"result":"` + text + `"}`
	input := line + "\n" + `{"jsonrpc":"2.0","id":8,"result":1}` + "\n"
	for _, chunk := range []int{readChunk, 1 << 20, 3 << 20} {
		msgs, _ := readAll(t, input, 16<<20, chunk)
		if len(msgs) != 2 || describe(msgs[0]) != `res 7 "`+text+`"` || describe(msgs[1]) != "res 8 1" {
			t.Fatalf("chunk %d: %d messages", chunk, len(msgs))
		}
		msgs, _ = readAll(t, input, 5<<20, chunk)
		want := fmt.Sprintf(`err 7 %d result of %d bytes exceeds the limit of %d bytes {"limit":%d,"size":%d}`, CodeTooLarge, len(line), 5<<20, 5<<20, len(line))
		if len(msgs) != 2 || describe(msgs[0]) != want || describe(msgs[1]) != "res 8 1" {
			t.Fatalf("chunk %d, over the limit: %d messages, first %.200s", chunk, len(msgs), describe(msgs[0]))
		}
	}
}

// TestStdioReaderFilterOwnsLine checks that FilterIncoming may keep the
// bytes it is given.
func TestStdioReaderFilterOwnsLine(t *testing.T) {
	var kept [][]byte
	input := `{"jsonrpc":"2.0","id":1,"result":"a"}` + "\n" + `{"jsonrpc":"2.0","id":2,"result":"b"}` + "\n"
	r := newMsgReader(strings.NewReader(input), 1<<20, func(raw []byte) []byte {
		kept = append(kept, raw)
		return []byte(`{"jsonrpc":"2.0","id":0,"result":"stub"}`)
	}, slog.New(slog.DiscardHandler))
	for range 2 {
		m, err := r.next()
		if err != nil || describe(m) != `res 0 "stub"` {
			t.Fatalf("next = %v, %v", m, err)
		}
	}
	if string(kept[0]) != `{"jsonrpc":"2.0","id":1,"result":"a"}` || string(kept[1]) != `{"jsonrpc":"2.0","id":2,"result":"b"}` {
		t.Errorf("kept %q", kept)
	}
}

func FuzzStdioLineReader(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`+"\nbanner\n"), uint16(1000), uint8(3))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"x","result":"`+strings.Repeat("a", 200)+`"}`), uint16(50), uint8(7))
	f.Add([]byte(`{"jsonrpc":"2.0","result":{"id":2},"id":3`), uint16(10), uint8(1))
	f.Add([]byte(`{"jsonrpc":"2.0","method":"x","id":null}`+"\n\n{\n"), uint16(0), uint8(0))
	f.Add([]byte("{\"id\":\"\\\"\",\"jsonrpc\":\"2.0\",\"error\":{\"code\":1,\"message\":\"\"}}"), uint16(5), uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, limit uint16, chunk uint8) {
		max := int64(limit) + 1
		r := newMsgReader(&chunkReader{bytes.NewReader(data), int(chunk) + 1}, max, nil, slog.New(slog.DiscardHandler))
		for i := 0; ; i++ {
			if i > len(data)+1 {
				t.Fatal("more messages than lines")
			}
			m, err := r.next()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					t.Fatalf("next: %v", err)
				}
				return
			}
			enc, err := jsonrpc.EncodeMessage(m)
			if err != nil {
				t.Fatalf("a returned message does not encode: %v", err)
			}
			if _, err := jsonrpc.DecodeMessage(enc); err != nil {
				t.Fatalf("a returned message is not valid JSON-RPC: %s: %v", enc, err)
			}
			if resp, ok := m.(*jsonrpc.Response); ok && !resp.ID.IsValid() {
				t.Fatalf("a response without an id: %s", enc)
			}
		}
	})
}

// bigLine is a 40 MB tools/call result line.
func bigLine(size int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"`)
	b.Write(bytes.Repeat([]byte("x"), size))
	b.WriteString(`"}]}}` + "\n")
	return b.Bytes()
}

func BenchmarkStdioReadLarge(b *testing.B) {
	line := bigLine(40 << 20)
	b.Run("line", func(b *testing.B) {
		b.SetBytes(int64(len(line)))
		b.ReportAllocs()
		for b.Loop() {
			r := newMsgReader(&chunkReader{bytes.NewReader(line), 64 << 10}, 256<<20, nil, slog.New(slog.DiscardHandler))
			if l, o, err := r.readLine(); err != nil || o != nil || len(l) != len(line)-1 {
				b.Fatal("bad line")
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(int64(len(line)))
		b.ReportAllocs()
		for b.Loop() {
			r := newMsgReader(&chunkReader{bytes.NewReader(line), 64 << 10}, 256<<20, nil, slog.New(slog.DiscardHandler))
			if _, err := r.next(); err != nil {
				b.Fatal(err)
			}
		}
	})
	// What the relay does: FilterIncoming keeps the raw line and the SDK
	// decodes a small stub.
	b.Run("filtered", func(b *testing.B) {
		b.SetBytes(int64(len(line)))
		b.ReportAllocs()
		stub := []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`)
		var kept []byte
		filter := func(raw []byte) []byte { kept = raw; return stub }
		for b.Loop() {
			r := newMsgReader(&chunkReader{bytes.NewReader(line), 64 << 10}, 256<<20, filter, slog.New(slog.DiscardHandler))
			if _, err := r.next(); err != nil || len(kept) != len(line)-1 {
				b.Fatal(err)
			}
		}
	})
	b.Run("pipe", func(b *testing.B) {
		b.SetBytes(int64(len(line)))
		b.ReportAllocs()
		for b.Loop() {
			pr, pw, err := os.Pipe()
			if err != nil {
				b.Fatal(err)
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				_, _ = pw.Write(line)
				pw.Close()
			}()
			r := newMsgReader(pr, 256<<20, nil, slog.New(slog.DiscardHandler))
			if _, err := r.next(); err != nil {
				b.Fatal(err)
			}
			<-done
			pr.Close()
		}
	})
	b.Run("oversized", func(b *testing.B) {
		b.SetBytes(int64(len(line)))
		b.ReportAllocs()
		for b.Loop() {
			r := newMsgReader(&chunkReader{bytes.NewReader(line), 64 << 10}, 1<<20, nil, slog.New(slog.DiscardHandler))
			if m, err := r.next(); err != nil || !strings.HasPrefix(describe(m), "err 1 -32050") {
				b.Fatal(err)
			}
		}
	})
}

// TestStdioReaderScannerEscapes checks that the scanner of oversized lines
// follows strings with escapes split anywhere.
func TestStdioReaderScannerEscapes(t *testing.T) {
	for _, text := range []string{`\`, `\\`, `"`, `\"`, `a\\"b`, `}{"id":5,`, `\\\"\\`, "\u2028\x00"} {
		val, _ := json.Marshal(map[string]any{"s": strings.Repeat(text, 40), "id": 1})
		line := `{"jsonrpc":"2.0","result":` + string(val) + `,"k` + strings.Repeat(`\\`, 3) + `":"` + strings.Repeat(`\\`, 5) + `","id":42}`
		for split := 1; split < len(line); split += 3 {
			var s topScanner
			s.feed([]byte(line[:split]))
			s.feed([]byte(line[split:]))
			id, ok := s.id()
			if !ok || id.Raw() != int64(42) || s.hasMethod || !s.done {
				t.Fatalf("%q split at %d: id %v %v, method %v, done %v", line, split, id.Raw(), ok, s.hasMethod, s.done)
			}
		}
	}
}

// FuzzResponseID: ResponseID reads untrusted text without decoding it; it
// never panics, and where a JSON decoder can read the message too, the id
// it finds is the message's top-level id.
func FuzzResponseID(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{}}`,
		`{"jsonrpc":"2.0","result":{"id":2},"id":"x\"y"}`,
		`{"jsonrpc":"2.0","id":3,"method":"m","result":1}`,
		`{"jsonrpc":"2.0","id":[4],"error":{}}`,
		`{"jsonrpc":"2.0","id":5,"result":[[[[`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		id, ok := ResponseID(msg)
		if !ok {
			return
		}
		var whole struct {
			ID any `json:"id"`
		}
		if json.Unmarshal(msg, &whole) != nil {
			return
		}
		var got any
		if err := json.Unmarshal(id, &got); err != nil {
			t.Fatalf("ResponseID(%q) = %q, not JSON: %v", msg, id, err)
		}
		if !reflect.DeepEqual(got, whole.ID) {
			t.Fatalf("ResponseID(%q) = %s, the decoder reads %v", msg, id, whole.ID)
		}
	})
}
