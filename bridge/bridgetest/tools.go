package bridgetest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"time"
)

// toolDef is a built-in tool: its compacted definition and its handler.
type toolDef struct {
	name string
	def  []byte
	run  func(s *server, c *callCtx)
}

// callCtx is one tools/call on its goroutine.
type callCtx struct {
	ctx       context.Context // cancelled by notifications/cancelled or by Serve ending
	serveCtx  context.Context // cancelled only by Serve ending
	id        json.RawMessage
	name      string
	args      json.RawMessage // exactly as received; nil when absent
	progress  json.RawMessage // progressToken, or nil
	cancelled func() bool     // reports whether notifications/cancelled arrived
}

// addedTool is the definition listchanged adds.
const addedTool = `{"name":"added","description":"Added by listchanged; answers like echo.","inputSchema":{"type":"object"}}`

func builtinTools() ([]toolDef, error) {
	defs := []struct {
		name, def string
		run       func(s *server, c *callCtx)
	}{
		{"echo", `{"name":"echo","description":"Return the arguments exactly as received.","inputSchema":{"type":"object"}}`, (*server).echo},
		{"slow", `{"name":"slow","description":"Send one progress notification per step, then answer.","inputSchema":{"type":"object","properties":{"steps":{"type":"integer","minimum":0,"default":5},"intervalMs":{"type":"integer","minimum":0,"default":100},"tag":{"type":"string"},"ignoreCancel":{"type":"boolean","default":false}}}}`, (*server).slow},
		{"big", `{"name":"big","description":"Answer with a response line of the given size.","inputSchema":{"type":"object","properties":{"bytes":{"type":"integer","minimum":0},"tag":{"type":"string"},"depth":{"type":"integer","minimum":0},"tail":{"type":"string","enum":["","bad-utf8","bad-json"]},"holdFile":{"type":"string"}},"required":["bytes"]}}`, (*server).big},
		{"atoms", `{"name":"atoms","title":"Random atoms","description":"Return a box of water with n atoms (O, H, H per molecule, bonds, residue names and ids), as a liquid-box tool does. For benchmarks.","inputSchema":{"type":"object","properties":{"n":{"type":"integer","minimum":0,"maximum":500000,"examples":[1000],"x-megane-unit":"count"},"seed":{"type":"integer","minimum":0,"x-megane-widget":"seed"},"tag":{"type":"string"}},"required":["n","seed"]},"_meta":{"io.github.megane-labs/builder":{"contract":1,"category":"other","apply":"new_document","document":"none","stochastic":true,"expectedSeconds":1}}}`, (*server).atoms},
		{"crash", `{"name":"crash","description":"Exit with status 3 in the middle of the call.","inputSchema":{"type":"object"}}`, (*server).crash},
		{"fail", `{"name":"fail","description":"Answer with a JSON-RPC error.","inputSchema":{"type":"object","properties":{"code":{"type":"integer"},"message":{"type":"string"}}}}`, (*server).fail},
		{"toolerror", `{"name":"toolerror","description":"Answer with a tool error (isError).","inputSchema":{"type":"object","properties":{"tag":{"type":"string"}}}}`, (*server).toolError},
		{"listchanged", `{"name":"listchanged","description":"Add the tool \"added\" and send notifications/tools/list_changed.","inputSchema":{"type":"object"}}`, (*server).listChanged},
	}
	out := make([]toolDef, 0, len(defs))
	for _, d := range defs {
		var buf bytes.Buffer
		if err := json.Compact(&buf, []byte(d.def)); err != nil {
			return nil, fmt.Errorf("built-in tool %s: %w", d.name, err)
		}
		out = append(out, toolDef{name: d.name, def: buf.Bytes(), run: d.run})
	}
	return out, nil
}

// startCall routes a tools/call to its handler on a new goroutine.
func (s *server) startCall(id json.RawMessage, name string, args, progress json.RawMessage) {
	var run func(s *server, c *callCtx)
	if result, ok := s.fixtureCalls[name]; ok {
		run = func(s *server, c *callCtx) {
			if s.mode.FixtureRequired {
				var a map[string]json.RawMessage
				c.argsInto(&a)
				for _, r := range s.required[c.name] {
					if _, ok := a[r]; !ok {
						s.reply(c.id, textResult(fmt.Sprintf("Input validation error: '%s' is a required property", r), nil, true))
						return
					}
				}
			}
			if s.fixtureWork(c) {
				s.replyRaw(c.id, result)
			}
		}
	} else if s.mode.FixtureList == "" {
		for _, t := range s.builtin {
			if t.name == name {
				run = t.run
			}
		}
	}
	if run == nil {
		s.mu.Lock()
		added := s.added
		s.mu.Unlock()
		if s.known[name] || (added && name == "added") {
			run = (*server).echo
		}
	}
	if run == nil {
		s.replyError(id, -32602, "unknown tool: "+name)
		return
	}
	key := string(id)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	if _, dup := s.inflight[key]; dup {
		s.mu.Unlock()
		s.replyError(id, -32600, "request id already in flight")
		return
	}
	ctx, cancel := context.WithCancel(s.ctx)
	s.inflight[key] = &call{cancel: cancel}
	s.calls.Add(1)
	s.mu.Unlock()
	c := &callCtx{ctx: ctx, serveCtx: s.ctx, id: id, name: name, args: args, progress: progress,
		cancelled: func() bool { return ctx.Err() != nil && s.ctx.Err() == nil }}
	go func() {
		defer s.calls.Done()
		defer func() {
			s.mu.Lock()
			delete(s.inflight, key)
			s.mu.Unlock()
			cancel()
		}()
		run(s, c)
	}()
}

// fixtureWork does Mode.FixtureWork for call c and reports whether c
// should be answered (false when it was cancelled). The worker is a
// goroutine of its own, counted in s.calls, so that with IgnoreCancel it
// outlives the call (the abandoned thread) but not Serve.
func (s *server) fixtureWork(c *callCtx) bool {
	w := s.mode.FixtureWork
	if w == nil {
		return true
	}
	var a map[string]any
	c.argsInto(&a)
	units := 1.0
	if n, ok := a[w.Arg].(float64); ok && n > 0 {
		units = n
	}
	d := time.Duration(units * float64(w.MsPerUnit) * float64(time.Millisecond))
	stop := c.serveCtx
	if !w.IgnoreCancel {
		stop = c.ctx
	}
	done := make(chan struct{})
	s.calls.Add(1)
	go func() {
		defer s.calls.Done()
		defer close(done)
		s.work.Lock()
		defer s.work.Unlock()
		spin(stop, d)
	}()
	select {
	case <-done:
		return c.ctx.Err() == nil
	case <-c.ctx.Done():
		return false
	}
}

// spin keeps one CPU busy for d of wall time, or until ctx ends.
func spin(ctx context.Context, d time.Duration) {
	end := time.Now().Add(d)
	x := 0
	for ctx.Err() == nil && time.Now().Before(end) {
		for i := range 100000 {
			x += i
		}
	}
	_ = x
}

// argsInto decodes the call's arguments into v, ignoring absent arguments.
func (c *callCtx) argsInto(v any) error {
	if len(c.args) == 0 || bytes.Equal(c.args, []byte("null")) {
		return nil
	}
	return json.Unmarshal(c.args, v)
}

func (s *server) badArgs(c *callCtx, err error) {
	s.replyError(c.id, -32602, fmt.Sprintf("invalid arguments for %s: %v", c.name, err))
}

// textResult is a result with one text item and optional structured content.
func textResult(text string, structured any, isError bool) map[string]any {
	r := map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}}
	if structured != nil {
		r["structuredContent"] = structured
	}
	if isError {
		r["isError"] = true
	}
	return r
}

func (s *server) echo(c *callCtx) {
	args := c.args
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	text, _ := json.Marshal("echo " + c.name + ": " + string(args))
	s.response(c.id, func(w *bufio.Writer) error {
		w.WriteString(`"result":{`)
		if s.mode.CompleteResults {
			head := completeResult(true, s.mode.Name, s.mode.Version, []byte(`{}`))
			w.Write(head[1 : len(head)-1])
			w.WriteByte(',')
		}
		w.WriteString(`"content":[{"type":"text","text":`)
		w.Write(text)
		w.WriteString(`}],"structuredContent":{"echo":`)
		w.Write(args)
		_, err := w.WriteString(`}}`)
		return err
	})
}

func (s *server) slow(c *callCtx) {
	a := struct {
		Steps        int    `json:"steps"`
		IntervalMs   int    `json:"intervalMs"`
		Tag          string `json:"tag"`
		IgnoreCancel bool   `json:"ignoreCancel"`
	}{Steps: 5, IntervalMs: 100}
	if err := c.argsInto(&a); err != nil {
		s.badArgs(c, err)
		return
	}
	ctx := c.ctx
	if a.IgnoreCancel {
		ctx = c.serveCtx
	}
	for i := 1; i <= a.Steps; i++ {
		if a.IntervalMs > 0 {
			t := time.NewTimer(time.Duration(a.IntervalMs) * time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
				return // cancelled: send nothing more
			case <-t.C:
			}
		} else if ctx.Err() != nil {
			return
		}
		if c.progress != nil {
			msg, _ := json.Marshal(fmt.Sprintf("%s step %d", a.Tag, i))
			s.out.message(func(w *bufio.Writer) error {
				w.WriteString(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":`)
				w.Write(c.progress)
				fmt.Fprintf(w, `,"progress":%d,"total":%d,"message":%s}}`, i, a.Steps, msg)
				return nil
			})
		}
	}
	if ctx.Err() != nil {
		return
	}
	s.reply(c.id, textResult(fmt.Sprintf("slow %s done after %d steps", a.Tag, a.Steps),
		map[string]any{"tag": a.Tag, "steps": a.Steps, "cancelIgnored": a.IgnoreCancel && c.cancelled()}, false))
}

// bigChunk is the padding written per Write.
const bigChunk = 64 * 1024

func (s *server) big(c *callCtx) {
	var a struct {
		Bytes int64  `json:"bytes"`
		Tag   string `json:"tag"`
		Depth int    `json:"depth"`
		// Tail spoils the line's last bytes: "bad-utf8" ends the padding
		// with a byte that is not UTF-8, "bad-json" closes the result with
		// a bracket that does not match.
		Tail string `json:"tail"`
		// HoldFile, if set, stops the server half-way through the line
		// (after flushing it) until that file exists.
		HoldFile string `json:"holdFile"`
	}
	if err := c.argsInto(&a); err != nil {
		s.badArgs(c, err)
		return
	}
	tag, _ := json.Marshal(a.Tag)
	var prefix bytes.Buffer
	prefix.WriteString(`"result":{"content":[{"type":"text","text":"big"}],"structuredContent":{"tag":`)
	prefix.Write(tag)
	if a.Depth > 0 {
		// A result too deep to parse: arrays nested depth times.
		prefix.WriteString(`,"nesting":`)
		prefix.Write(bytes.Repeat([]byte("["), a.Depth))
		prefix.Write(bytes.Repeat([]byte("]"), a.Depth))
	}
	prefix.WriteString(`,"padding":"`)
	suffix := `"}}`
	switch a.Tail {
	case "bad-utf8":
		suffix = "\xff" + suffix
	case "bad-json":
		suffix = `"}]`
	}
	// The line is {"jsonrpc":"2.0", the id as "id":N, (before or after the
	// result, the same length either way), prefix, padding, suffix and }.
	overhead := len(`{"jsonrpc":"2.0",`) + len(`"id":,`) + len(c.id) + prefix.Len() + len(suffix) + len(`}`)
	pad := max(a.Bytes-int64(overhead), 0)
	chunk := bytes.Repeat([]byte("x"), bigChunk)
	s.response(c.id, func(w *bufio.Writer) error {
		w.Write(prefix.Bytes())
		for n := pad; n > 0; {
			if c.ctx.Err() != nil {
				// Stop early but keep the line valid JSON, so the stream
				// stays usable.
				break
			}
			k := min(n, bigChunk)
			if _, err := w.Write(chunk[:k]); err != nil {
				return err
			}
			if a.HoldFile != "" && n > pad/2 && n-k <= pad/2 {
				if err := w.Flush(); err != nil {
					return err
				}
				for c.ctx.Err() == nil {
					if _, err := os.Stat(a.HoldFile); err == nil {
						break
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
			n -= k
		}
		_, err := w.WriteString(suffix)
		return err
	})
}

func (s *server) atoms(c *callCtx) {
	var a struct {
		N    int    `json:"n"`
		Seed uint64 `json:"seed"`
		Tag  string `json:"tag"`
	}
	if err := c.argsInto(&a); err != nil {
		s.badArgs(c, err)
		return
	}
	if a.N < 0 || a.N > 500000 {
		s.reply(c.id, textResult("n must be 0 to 500000.", nil, true))
		return
	}
	// A liquid box of water, as a packmol-based Builder tool returns it:
	// atoms O, H, H per molecule (a last partial molecule keeps what
	// fits), both O-H bonds of each molecule, residue names and ids.
	rng := rand.New(rand.NewPCG(a.Seed, 0xb1d9e))
	length := math.Cbrt(float64(max(a.N, 1)) * 10) // about water's number density
	tag, _ := json.Marshal(a.Tag)
	prov, _ := json.Marshal(map[string]any{"bridgetest": Version, "seed": a.Seed})
	s.response(c.id, func(w *bufio.Writer) error {
		var num []byte
		list := func(n int, item func(i int)) {
			for i := 0; i < n; i++ {
				if i > 0 {
					w.WriteByte(',')
				}
				item(i)
			}
		}
		fmt.Fprintf(w, `"result":{"content":[{"type":"text","text":"%d atoms of water."}],"structuredContent":{"contract":1,"name":"water-%d","tag":%s,"structure":{"elements":[`, a.N, a.N, tag)
		list(a.N, func(i int) {
			if i%3 == 0 {
				w.WriteByte('8')
			} else {
				w.WriteByte('1')
			}
		})
		w.WriteString(`],"positions":[`)
		list(3*a.N, func(int) {
			num = strconv.AppendFloat(num[:0], rng.Float64()*length, 'g', -1, 64)
			w.Write(num)
		})
		w.WriteString(`],"bonds":[`)
		var bonds [][2]int
		for o := 0; o < a.N; o += 3 {
			for h := o + 1; h < min(o+3, a.N); h++ {
				bonds = append(bonds, [2]int{o, h})
			}
		}
		list(len(bonds), func(i int) {
			num = append(strconv.AppendInt(append(num[:0], '['), int64(bonds[i][0]), 10), ',')
			num = append(strconv.AppendInt(num, int64(bonds[i][1]), 10), ']')
			w.Write(num)
		})
		w.WriteString(`],"residueNames":[`)
		list(a.N, func(int) { w.WriteString(`"HOH"`) })
		w.WriteString(`],"residueIds":[`)
		list(a.N, func(i int) {
			num = strconv.AppendInt(num[:0], int64(i/3+1), 10)
			w.Write(num)
		})
		l := strconv.FormatFloat(length, 'g', -1, 64)
		fmt.Fprintf(w, `],"cell":[%s,0,0,0,%s,0,0,0,%s]},"warnings":[],"provenance":%s}}`, l, l, l, prov)
		return nil
	})
}

func (s *server) crash(c *callCtx) {
	fmt.Fprintln(s.errw, "fatal: simulated crash")
	s.triggerExit(3)
}

func (s *server) fail(c *callCtx) {
	a := struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{Code: -32000, Message: "simulated failure"}
	if err := c.argsInto(&a); err != nil {
		s.badArgs(c, err)
		return
	}
	s.replyError(c.id, a.Code, a.Message)
}

func (s *server) toolError(c *callCtx) {
	var a struct {
		Tag string `json:"tag"`
	}
	if err := c.argsInto(&a); err != nil {
		s.badArgs(c, err)
		return
	}
	s.reply(c.id, textResult("simulated tool error "+a.Tag, nil, true))
}

func (s *server) listChanged(c *callCtx) {
	s.mu.Lock()
	s.added = true
	s.mu.Unlock()
	s.out.send([]byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`))
	s.reply(c.id, textResult("listing changed", map[string]any{"added": "added"}, false))
}
