package demotools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// syncBuffer is a log sink the server writes to while the test reads it.
type syncBuffer = bridgetest.Buffer

// progressLog collects progress notifications per token.
type progressLog struct {
	mu    sync.Mutex // guards byTok
	byTok map[string][]*mcp.ProgressNotificationParams
	first chan string // receives each token's first notification; buffered, never closed
}

func (p *progressLog) handle(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	tok := fmt.Sprint(req.Params.ProgressToken)
	p.mu.Lock()
	p.byTok[tok] = append(p.byTok[tok], req.Params)
	n := len(p.byTok[tok])
	p.mu.Unlock()
	if n == 1 {
		select {
		case p.first <- tok:
		default:
		}
	}
}

func (p *progressLog) get(tok string) []*mcp.ProgressNotificationParams {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.byTok[tok])
}

type harness struct {
	cs       *mcp.ClientSession
	logs     *syncBuffer
	progress *progressLog
}

// start runs Run on in-memory pipes and connects a real go-sdk client to it.
func start(t *testing.T) *harness {
	t.Helper()
	serverIn, clientOut := io.Pipe()
	clientIn, serverOut := io.Pipe()
	logs := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		err := Run(ctx, serverIn, serverOut, logs)
		serverOut.Close()
		done <- err
	}()
	pl := &progressLog{byTok: map[string][]*mcp.ProgressNotificationParams{}, first: make(chan string, 16)}
	client := mcp.NewClient(&mcp.Implementation{Name: "conformance-test", Version: "1"},
		&mcp.ClientOptions{ProgressNotificationHandler: pl.handle})
	cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
	defer ccancel()
	cs, err := client.Connect(cctx, &mcp.IOTransport{Reader: clientIn, Writer: clientOut, MaxLineLength: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		cancel()
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() {
		cs.Close()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run returned %v after the client closed", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("Run did not return within 10 s of the client closing")
		}
		cancel()
	})
	return &harness{cs: cs, logs: logs, progress: pl}
}

// rawTools returns the listing as generic JSON, as a client without the
// SDK's types would see it.
func (h *harness) rawTools(t *testing.T) []map[string]any {
	t.Helper()
	res, err := h.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var out []map[string]any
	remarshal(t, res.Tools, &out)
	return out
}

func remarshal(t *testing.T, in, out any) {
	t.Helper()
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) call(t *testing.T, ctx context.Context, name string, args any, token any) (*mcp.CallToolResult, error) {
	t.Helper()
	p := &mcp.CallToolParams{Name: name, Arguments: args}
	if token != nil {
		p.SetProgressToken(token)
	}
	return h.cs.CallTool(ctx, p)
}

// mustStructure calls a tool, requires success, validates the BuilderResult
// and returns it.
func (h *harness) mustStructure(t *testing.T, name string, args any) *builderResultShape {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := h.call(t, ctx, name, args, nil)
	if err != nil {
		t.Fatalf("%s(%v): %v", name, args, err)
	}
	if res.IsError {
		t.Fatalf("%s(%v): tool error %q", name, args, firstText(res))
	}
	if len(res.Content) == 0 || firstText(res) == "" {
		t.Errorf("%s: no text summary in content", name)
	}
	br, err := validateBuilderResult(res.StructuredContent)
	if err != nil {
		t.Fatalf("%s(%v): invalid BuilderResult: %v", name, args, err)
	}
	return br
}

func firstText(res *mcp.CallToolResult) string {
	if len(res.Content) == 0 {
		return ""
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); ok {
		return tc.Text
	}
	return ""
}

// builderResultShape is BuilderResult (§5) with the Structure fields this
// server returns.
type builderResultShape struct {
	Contract  int    `json:"contract"`
	Name      string `json:"name"`
	Structure struct {
		Elements  []int      `json:"elements"`
		Positions []float64  `json:"positions"`
		Cell      *[]float64 `json:"cell"`
		Bonds     [][]int    `json:"bonds"`
	} `json:"structure"`
	Warnings   []string       `json:"warnings"`
	Provenance map[string]any `json:"provenance"`
}

// validateBuilderResult checks the rules of §5 and §5.1 that a client
// (Builder) enforces before applying a result.
func validateBuilderResult(sc any) (*builderResultShape, error) {
	b, err := json.Marshal(sc)
	if err != nil {
		return nil, err
	}
	var keys struct {
		Structure map[string]json.RawMessage `json:"structure"`
	}
	if err := json.Unmarshal(b, &keys); err != nil {
		return nil, fmt.Errorf("not an object: %w", err)
	}
	for _, k := range []string{"elements", "positions", "cell", "bonds"} {
		if _, ok := keys.Structure[k]; !ok {
			return nil, fmt.Errorf("structure has no %q", k)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var r builderResultShape
	if err := dec.Decode(&r); err != nil {
		return nil, err
	}
	if r.Contract != 1 {
		return nil, fmt.Errorf("contract %d, want 1", r.Contract)
	}
	if strings.TrimSpace(r.Name) == "" {
		return nil, fmt.Errorf("blank name")
	}
	s := r.Structure
	n := len(s.Elements)
	if len(s.Positions) != 3*n {
		return nil, fmt.Errorf("%d positions for %d atoms, want %d", len(s.Positions), n, 3*n)
	}
	for i, z := range s.Elements {
		if z < 1 || z > 118 {
			return nil, fmt.Errorf("element %d is %d, want 1..118", i, z)
		}
	}
	if s.Cell != nil && len(*s.Cell) != 9 {
		return nil, fmt.Errorf("cell has %d numbers, want 9 or null", len(*s.Cell))
	}
	for i, p := range s.Bonds {
		if len(p) != 2 || p[0] == p[1] || p[0] < 0 || p[1] < 0 || p[0] >= n || p[1] >= n {
			return nil, fmt.Errorf("bond %d is %v: want two distinct indices in 0..%d", i, p, n-1)
		}
	}
	if r.Warnings == nil {
		return nil, fmt.Errorf("warnings missing")
	}
	for k, v := range r.Provenance {
		switch v.(type) {
		case string, float64:
		default:
			return nil, fmt.Errorf("provenance %q is %T, want a string or number", k, v)
		}
	}
	return &r, nil
}

// formProblems reports the properties of an inputSchema that Builder could
// not turn into a form (§4.1), and widget schemas that differ from §4.2.
func formProblems(schema map[string]any) []string {
	var probs []string
	if schema["type"] != "object" {
		probs = append(probs, "inputSchema is not an object schema")
	}
	props, _ := schema["properties"].(map[string]any)
	for name, p := range props {
		prop, ok := p.(map[string]any)
		if !ok {
			probs = append(probs, name+": not a schema object")
			continue
		}
		probs = append(probs, propertyProblems(name, prop, 0)...)
	}
	return probs
}

var unsupportedKeywords = []string{"oneOf", "anyOf", "allOf", "if", "then", "else", "not"}

// widgetSchemas are the normative widget schemas of §4.2 this server uses,
// with the keywords that define the accepted shape.
var widgetSchemas = map[string]map[string]any{
	"element": {"type": "integer", "minimum": 1.0, "maximum": 118.0},
	"seed":    {"type": "integer", "minimum": 0.0},
}

// shapeKeywords are the keywords that constrain values (as opposed to
// annotations such as title or examples).
var shapeKeywords = []string{"type", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
	"enum", "const", "items", "minItems", "maxItems", "properties", "required", "minLength", "maxLength", "pattern"}

func propertyProblems(name string, prop map[string]any, depth int) []string {
	var probs []string
	if w, ok := prop["x-megane-widget"].(string); ok {
		want, known := widgetSchemas[w]
		if !known {
			return []string{fmt.Sprintf("%s: widget %q is not one this test knows", name, w)}
		}
		got := map[string]any{}
		for _, k := range shapeKeywords {
			if v, ok := prop[k]; ok {
				got[k] = v
			}
		}
		if !reflect.DeepEqual(got, want) {
			probs = append(probs, fmt.Sprintf("%s: %s widget schema is %v, §4.2 says %v", name, w, got, want))
		}
		return probs
	}
	for _, k := range unsupportedKeywords {
		if _, ok := prop[k]; ok {
			probs = append(probs, fmt.Sprintf("%s: %s is not supported for form generation", name, k))
		}
	}
	if ref, ok := prop["$ref"].(string); ok && !strings.HasPrefix(ref, "#/$defs/") {
		probs = append(probs, fmt.Sprintf("%s: $ref %q is not local", name, ref))
	}
	switch prop["type"] {
	case "number", "integer", "boolean":
	case "string":
		if e, ok := prop["enum"]; ok {
			if _, ok := e.([]any); !ok {
				probs = append(probs, name+": enum is not an array")
			}
		}
	case "array":
		items, _ := prop["items"].(map[string]any)
		switch items["type"] {
		case "number", "integer":
			minI, maxI := prop["minItems"], prop["maxItems"]
			if minI == nil || minI != maxI || maxI.(float64) > 9 {
				probs = append(probs, fmt.Sprintf("%s: a vector needs minItems == maxItems <= 9 (got %v, %v)", name, minI, maxI))
			}
		case "object":
			if depth > 0 {
				probs = append(probs, name+": tables do not nest")
			}
			sub, _ := items["properties"].(map[string]any)
			for k, v := range sub {
				vm, _ := v.(map[string]any)
				probs = append(probs, propertyProblems(name+"."+k, vm, depth+1)...)
			}
		default:
			probs = append(probs, fmt.Sprintf("%s: array of %v is not supported", name, items["type"]))
		}
	case "object":
		if depth > 0 {
			probs = append(probs, name+": objects nest one level only")
		}
		sub, _ := prop["properties"].(map[string]any)
		for k, v := range sub {
			vm, _ := v.(map[string]any)
			probs = append(probs, propertyProblems(name+"."+k, vm, depth+1)...)
		}
	default:
		probs = append(probs, fmt.Sprintf("%s: type %v is not supported", name, prop["type"]))
	}
	return probs
}

// sampleArguments builds the arguments the §10 checker uses: the first
// example of every property, else its default, else a generic value.
func sampleArguments(schema map[string]any) map[string]any {
	props, _ := schema["properties"].(map[string]any)
	args := map[string]any{}
	for name, p := range props {
		prop := p.(map[string]any)
		if ex, ok := prop["examples"].([]any); ok && len(ex) > 0 {
			args[name] = ex[0]
		} else if d, ok := prop["default"]; ok {
			args[name] = d
		} else if name == "box" {
			continue // optional, and exclusive with density in meaning
		} else {
			switch prop["type"] {
			case "integer", "number":
				args[name] = 1
			case "boolean":
				args[name] = false
			case "string":
				args[name] = "x"
			}
		}
	}
	return args
}

func TestConformance(t *testing.T) {
	h := start(t)
	list := h.rawTools(t)
	var names []string
	for _, tool := range list {
		names = append(names, tool["name"].(string))
	}
	if want := []string{"crystal", "gas_box"}; !reflect.DeepEqual(slices.Sorted(slices.Values(names)), want) {
		t.Fatalf("tools %v, want %v", names, want)
	}
	wantMeta := map[string]map[string]any{
		"gas_box": {"contract": 1.0, "category": "bulk", "apply": "new_document", "document": "none", "stochastic": true, "expectedSeconds": 2.0},
		"crystal": {"contract": 1.0, "category": "bulk", "apply": "new_document", "document": "none", "stochastic": false, "expectedSeconds": 1.0},
	}
	for _, tool := range list {
		name := tool["name"].(string)
		t.Run(name, func(t *testing.T) {
			meta, _ := tool["_meta"].(map[string]any)
			marker, _ := meta[builderMetaKey].(map[string]any)
			if !reflect.DeepEqual(marker, wantMeta[name]) {
				t.Errorf("_meta[%q] = %v, want %v", builderMetaKey, marker, wantMeta[name])
			}
			if title, _ := tool["title"].(string); title == "" {
				t.Errorf("no title (the button label)")
			}
			desc, _ := tool["description"].(string)
			if first, _, ok := strings.Cut(desc, ". "); !ok || len(first) > 200 {
				t.Errorf("description has no short first sentence for the tooltip: %q", desc)
			}
			schema := tool["inputSchema"].(map[string]any)
			for _, p := range formProblems(schema) {
				t.Errorf("form generation: %s", p)
			}
			props := schema["properties"].(map[string]any)
			required, _ := schema["required"].([]any)
			for _, r := range required {
				prop := props[r.(string)].(map[string]any)
				if prop["x-megane-widget"] == "seed" {
					continue // Builder fills a fresh seed; a default would defeat it
				}
				_, hasDefault := prop["default"]
				ex, _ := prop["examples"].([]any)
				if !hasDefault && len(ex) == 0 {
					t.Errorf("required property %q has neither default nor examples", r)
				}
			}
			var seedProp string
			for pname, p := range props {
				if p.(map[string]any)["x-megane-widget"] == "seed" {
					seedProp = pname
				}
			}
			stochastic := marker["stochastic"] == true
			if stochastic && seedProp == "" {
				t.Errorf("stochastic tool without a seed property")
			}
			if stochastic && !slices.Contains(required, any(seedProp)) {
				t.Errorf("seed %q is not required", seedProp)
			}
			out, _ := tool["outputSchema"].(map[string]any)
			if out["title"] != "BuilderResult" || out["type"] != "object" {
				t.Errorf("outputSchema is not BuilderResult: %v", out["title"])
			}

			args := sampleArguments(schema)
			first := h.mustStructure(t, name, args)
			if len(first.Structure.Elements) == 0 {
				t.Errorf("sample call built no atoms")
			}
			again := h.mustStructure(t, name, args)
			if !reflect.DeepEqual(first.Structure, again.Structure) {
				t.Errorf("the same arguments gave different structures")
			}
			if stochastic {
				if first.Provenance["seed"] != args[seedProp] && first.Provenance["seed"] != float64(1) {
					t.Errorf("provenance seed %v, sent %v", first.Provenance["seed"], args[seedProp])
				}
				other := maps(args)
				other[seedProp] = 2
				diff := h.mustStructure(t, name, other)
				if reflect.DeepEqual(first.Structure.Positions, diff.Structure.Positions) {
					t.Errorf("seeds 1 and 2 gave the same positions")
				}
			}
			if v, ok := first.Provenance[ServerName]; !ok || v != DefaultVersion {
				t.Errorf("provenance %v lacks %q: %q", first.Provenance, ServerName, DefaultVersion)
			}

			// A call without the required arguments is refused.
			res, err := h.call(t, context.Background(), name, map[string]any{}, nil)
			if err == nil && !res.IsError {
				t.Errorf("a call without required arguments succeeded")
			}
			if err == nil && strings.Contains(firstText(res), "\n") {
				t.Errorf("refusal is not one line: %q", firstText(res))
			}
		})
	}
}

func maps(m map[string]any) map[string]any {
	c := make(map[string]any, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

func TestToolErrors(t *testing.T) {
	h := start(t)
	tests := []struct {
		name string
		tool string
		args map[string]any
		want string // substring of the one-line message
	}{
		{"too dense for the minimum distance", "gas_box", map[string]any{"element": 18, "count": 1000, "box": 10, "minDistance": 3, "seed": 1}, "do not fit"},
		{"too many atoms", "crystal", map[string]any{"element": 29, "a": 3.6, "lattice": "fcc", "repeats": []int{50, 50, 51}}, "fewer repeats"},
		{"element 0", "gas_box", map[string]any{"element": 0, "count": 10, "seed": 1}, "element"},
		{"element 119", "crystal", map[string]any{"element": 119, "a": 3}, "element"},
		{"unknown lattice", "crystal", map[string]any{"element": 29, "a": 3, "lattice": "hcp"}, "lattice"},
		{"vector of two", "crystal", map[string]any{"element": 29, "a": 3, "repeats": []int{2, 2}}, "repeats"},
		{"unknown property", "gas_box", map[string]any{"element": 18, "count": 10, "seed": 1, "temperature": 300}, "temperature"},
		{"negative seed", "gas_box", map[string]any{"element": 18, "count": 10, "seed": -1}, "seed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := h.call(t, context.Background(), tt.tool, tt.args, nil)
			if err != nil {
				t.Fatalf("got a protocol error %v, want a tool error", err)
			}
			msg := firstText(res)
			if !res.IsError || !strings.Contains(msg, tt.want) || strings.Contains(msg, "\n") {
				t.Errorf("isError=%v %q, want a one-line tool error mentioning %q", res.IsError, msg, tt.want)
			}
		})
	}
}

func TestGeometry(t *testing.T) {
	h := start(t)
	t.Run("gas box with a box length", func(t *testing.T) {
		r := h.mustStructure(t, "gas_box", map[string]any{"element": 18, "count": 300, "box": 20, "minDistance": 2, "seed": 7})
		if got := *r.Structure.Cell; !reflect.DeepEqual(got, []float64{20, 0, 0, 0, 20, 0, 0, 0, 20}) {
			t.Errorf("cell %v, want a 20 Å cube", got)
		}
		for i, x := range r.Structure.Positions {
			if x < 0 || x >= 20 {
				t.Fatalf("coordinate %d = %g lies outside the box", i, x)
			}
		}
		if d := minPeriodicDistance(r.Structure.Positions, 20); d < 2 {
			t.Errorf("closest pair %g Å apart, minimum distance was 2", d)
		}
		if len(r.Structure.Bonds) != 0 || r.Structure.Elements[0] != 18 || r.Name != "Ar-gas" {
			t.Errorf("bonds %v, element %d, name %q", r.Structure.Bonds, r.Structure.Elements[0], r.Name)
		}
	})
	t.Run("gas box sized by density", func(t *testing.T) {
		r := h.mustStructure(t, "gas_box", map[string]any{"element": 18, "count": 1000, "density": 0.5, "seed": 3})
		l := (*r.Structure.Cell)[0]
		density := 1000 * 39.948 / avogadro / (l * l * l * 1e-24)
		if math.Abs(density-0.5) > 1e-6 {
			t.Errorf("box %g Å gives %g g/cm³, want 0.5", l, density)
		}
	})
	t.Run("fcc crystal", func(t *testing.T) {
		r := h.mustStructure(t, "crystal", map[string]any{"element": 29, "a": 3.6, "lattice": "fcc", "repeats": []int{2, 3, 4}})
		if n := len(r.Structure.Elements); n != 4*24 {
			t.Fatalf("%d atoms, want 96", n)
		}
		if got := *r.Structure.Cell; got[0] != 7.2 || math.Abs(got[4]-10.8) > 1e-9 || got[8] != 14.4 {
			t.Errorf("cell %v, want diag(7.2, 10.8, 14.4)", got)
		}
		// Nearest neighbours of fcc are a/√2 apart; min image needs a cubic
		// box, so check the cubic case below.
	})
	t.Run("nearest neighbours", func(t *testing.T) {
		for lattice, want := range map[string]float64{"sc": 3, "bcc": 3 * math.Sqrt(3) / 2, "fcc": 3 / math.Sqrt2} {
			r := h.mustStructure(t, "crystal", map[string]any{"element": 26, "a": 3, "lattice": lattice, "repeats": []int{3, 3, 3}})
			if d := minPeriodicDistance(r.Structure.Positions, 9); math.Abs(d-want) > 1e-9 {
				t.Errorf("%s: nearest neighbours %g Å apart, want %g", lattice, d, want)
			}
		}
	})
}

// minPeriodicDistance is the smallest minimum-image distance in a cubic box.
func minPeriodicDistance(pos []float64, l float64) float64 {
	best := math.Inf(1)
	n := len(pos) / 3
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			var s float64
			for k := 0; k < 3; k++ {
				d := minImage(pos[3*i+k]-pos[3*j+k], l)
				s += d * d
			}
			best = min(best, math.Sqrt(s))
		}
	}
	return best
}

func TestProgress(t *testing.T) {
	h := start(t)
	res, err := h.call(t, context.Background(), "gas_box", map[string]any{"element": 2, "count": 1000, "seed": 5}, "tok-progress")
	if err != nil || res.IsError {
		t.Fatalf("call: %v %q", err, firstText(res))
	}
	// The last notification may arrive after the result (go-sdk delivers
	// them on another goroutine): wait for all ten.
	deadline := time.Now().Add(10 * time.Second)
	var got []*mcp.ProgressNotificationParams
	for time.Now().Before(deadline) {
		if got = h.progress.get("tok-progress"); len(got) >= progressSteps {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(got) != progressSteps {
		t.Fatalf("%d progress notifications, want %d", len(got), progressSteps)
	}
	for i, p := range got {
		done := 100 * (i + 1)
		if p.Progress != float64(done) || p.Total != 1000 || p.Message != fmt.Sprintf("placed %d of 1000 atoms", done) {
			t.Errorf("notification %d: %v/%v %q", i, p.Progress, p.Total, p.Message)
		}
	}
}

func TestCancellation(t *testing.T) {
	h := start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		// Ten minutes of delay: only cancellation can end it within the test.
		_, err := h.call(t, ctx, "gas_box", map[string]any{"element": 18, "count": 1000, "seed": 1, "delayMs": 600000}, "tok-cancel")
		errc <- err
	}()
	select {
	case <-h.progress.first:
	case <-time.After(30 * time.Second):
		t.Fatal("no progress from the long call within 30 s")
	}
	cancel()
	select {
	case err := <-errc:
		if err == nil {
			t.Fatal("the cancelled call returned a result")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled call did not return within 10 s")
	}
	// The server stops the work itself, not just the client's wait.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(h.logs.String(), "call cancelled") {
		if time.Now().After(deadline) {
			t.Fatalf("the server did not stop the cancelled call within 10 s; log:\n%s", h.logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The session carries on.
	h.mustStructure(t, "crystal", map[string]any{"element": 29, "a": 3.6})
}

func TestRunEndsWithContext(t *testing.T) {
	serverIn, clientOut := io.Pipe()
	defer clientOut.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, serverIn, io.Discard, nil) }()
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10 s of its context ending")
	}
}
