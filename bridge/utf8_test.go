package bridge_test

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
)

// TestArgumentsNotText: what a person sent reaches the tool server exactly
// as sent, or not at all. A message that is not Unicode text (bytes that
// are not UTF-8, or an escaped lone UTF-16 surrogate, both of which JSON
// decoders turn into U+FFFD) is refused with bad-request naming where,
// whether it came whole or in chunks; everything else, escapes and surrogate
// pairs included, is passed on byte for byte (the echo tool answers the
// arguments it received, raw, as structuredContent.echo).
func TestArgumentsNotText(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	j := journal(t)
	spec := fakeServer(t, "fake", bridgetest.Mode{Journal: j})
	h := newHarness(t, bridge.Options{}, spec)
	p := h.page(ctx)
	connect(t, ctx, p, 1, spec)
	call := func(id int, args string) string {
		return `{"type":"tools:call","id":` + strconv.Itoa(id) + `,"server":"fake","tool":"echo","arguments":` + args + `}`
	}
	chunk := func(id int, data string) string {
		return `{"type":"tools:chunk","id":"c` + strconv.Itoa(id) + `","seq":0,"count":1,"size":` + strconv.Itoa(len(data)) + `,"data":"` + data + `"}`
	}
	cases := []struct {
		name   string
		frame  string // sent as one frame
		args   string // for a call that must pass: the arguments, byte for byte
		errHas string // for a refusal: in the message
		noID   bool   // the refusal cannot echo the id
	}{
		{name: "UTF-8", args: `{"s":"é, 日本, 😀"}`},
		{name: "escapes", args: `{"s":"\u00e9\n\"\\"}`},
		{name: "escaped surrogate pair", args: `{"s":"\ud83d\ude00"}`},
		{name: "escaped backslash before udc00", args: `{"s":"\\udc00"}`},
		{name: "byte 0xff", frame: call(0, "{\"s\":\"a\xffb\"}"), errHas: `of the message (in "arguments") is 0xff, not UTF-8`},
		{name: "UTF-8-encoded surrogate", frame: call(0, "{\"s\":\"\xed\xa0\x80\"}"), errHas: `(in "arguments") is 0xed, not UTF-8`},
		{name: "truncated sequence", frame: call(0, "{\"s\":\"\xe6\x97\"}"), errHas: `(in "arguments") is 0xe6, not UTF-8`},
		{name: "escaped lone low surrogate", frame: call(0, `{"s":"\udc00"}`), errHas: `(in "arguments") is an escaped lone UTF-16 surrogate (\udc00)`},
		{name: "escaped lone high surrogate", frame: call(0, `{"s":"\ud83dx"}`), errHas: `an escaped lone UTF-16 surrogate (\ud83d)`},
		{name: "high surrogate ending a string", frame: call(0, `{"s":"\ud83d"}`), errHas: `an escaped lone UTF-16 surrogate (\ud83d)`},
		{name: "two high surrogates", frame: call(0, `{"s":"\ud83d\ud83d\ude00"}`), errHas: `an escaped lone UTF-16 surrogate (\ud83d)`},
		{name: "escaped backslash, then a lone surrogate", frame: call(0, `{"s":"\\\udc00"}`), errHas: `lone UTF-16 surrogate (\udc00)`},
		{name: "in a key", frame: call(0, "{\"k\xff\":1}"), errHas: `(in "arguments") is 0xff`},
		{name: "in the tool name", frame: "{\"type\":\"tools:call\",\"id\":0,\"server\":\"fake\",\"tool\":\"ech\xff\"}", errHas: `(in "tool") is 0xff`},
		{name: "in the id", frame: "{\"type\":\"tools:call\",\"id\":\"a\xff\",\"server\":\"fake\",\"tool\":\"echo\"}", errHas: `(in "id") is 0xff`, noID: true},
		{name: "in a chunk's data", frame: chunk(0, "{\\\"type\\\":\\\"tools:call\\\",\\\"id\\\":1,\\\"server\\\":\\\"fake\\\",\\\"tool\\\":\\\"echo\\\",\\\"arguments\\\":{\\\"s\\\":\\\"\xff\\\"}}"), errHas: `(in "data") is 0xff`},
		{name: "lone surrogate in a chunk's data", frame: chunk(0, `{\"type\":\"tools:call\",\"id\":1,\"server\":\"fake\",\"tool\":\"echo\",\"arguments\":{\"s\":\"\udc00\"}}`), errHas: `(in "data") is an escaped lone UTF-16 surrogate (\udc00)`},
	}
	passed := 0
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := 100 + i
			frame := tc.frame
			if tc.args != "" {
				frame = call(id, tc.args)
			} else {
				frame = strings.Replace(frame, `"id":0`, `"id":`+strconv.Itoa(id), 1)
				frame = strings.Replace(frame, `"c0"`, `"c`+strconv.Itoa(id)+`"`, 1)
			}
			if err := p.SendFrame([]byte(frame)); err != nil {
				t.Fatal(err)
			}
			m, err := p.Wait(ctx, func(m *bridgetest.Msg) bool { return m.OK != nil })
			if err != nil {
				t.Fatal(err)
			}
			if tc.args != "" {
				mustOK(t, m)
				passed++
				if want := []byte(`"structuredContent":{"echo":` + tc.args + `}`); !bytes.Contains(m.Raw, want) {
					t.Fatalf("the tool server did not receive the arguments as sent: want %q in\n%q", want, m.Raw)
				}
				return
			}
			mustErr(t, m, bridge.CodeBadRequest)
			if !strings.Contains(m.Error.Message, tc.errHas) {
				t.Fatalf("message %q does not say %q", m.Error.Message, tc.errHas)
			}
			want := strconv.Itoa(id)
			if echoed := string(m.ID) == want || string(m.ID) == `"c`+want+`"`; echoed == tc.noID {
				t.Fatalf("reply id %q (want it echoed: %v)", m.ID, !tc.noID)
			}
		})
	}
	// Only the calls that passed reached the tool server.
	waitFor(t, 5*time.Second, "the tool server's journal", func() bool {
		return countOf(journalMethods(t, j), "tools/call") >= passed
	})
	if n := countOf(journalMethods(t, j), "tools/call"); n != passed {
		t.Fatalf("the tool server received %d calls, want %d: a refused message reached it", n, passed)
	}
	checkJournal(t, j)
}
