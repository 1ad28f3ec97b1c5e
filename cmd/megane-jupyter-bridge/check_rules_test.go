package main

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest/contractkit"
)

// init serves a contractkit tool server (or burns CPU as one's external
// program) when this binary is started as one, before TestMain; never in
// the keeper, which TestMain runs.
func init() {
	if os.Getenv("MEGANE_BRIDGE_KEEPER") == "" {
		contractkit.ServeFromEnv()
	}
}

// kitResult is the valid structuredContent of contractkit's cluster tool with
// its sample arguments (count 3), after edit.
func kitResult(t *testing.T, edit func(sc, st map[string]any)) json.RawMessage {
	t.Helper()
	var sc map[string]any
	if err := json.Unmarshal([]byte(`{"contract": 1, "name": "argon-line", "warnings": [], "provenance": {"contractkit": "1", "seed": 7},
		"structure": {"elements": [18, 18, 18], "positions": [0, 0, 0, 3, 0, 0, 6, 0, 0], "cell": null, "bonds": []}}`), &sc); err != nil {
		t.Fatal(err)
	}
	edit(sc, sc["structure"].(map[string]any))
	b, _ := json.Marshal(sc)
	return b
}

// kitTool is contractkit's valid tool definition after edit.
func kitTool(t *testing.T, edit func(tool, meta, props map[string]any)) json.RawMessage {
	t.Helper()
	return mutateFrom(t, contractkit.ValidTool, edit)
}

// deterministic makes the kit's tool deterministic (no seed, no second
// call) and expects 5 s, so that a case about a long call runs it twice
// at most and is not also about expectedSeconds.
func deterministic(_, m, p map[string]any) {
	m["stochastic"] = false
	m["expectedSeconds"] = 5
	delete(p, "seed")
}

// runKitCheck runs check --json on a contractkit server serving spec.
func runKitCheck(t *testing.T, spec contractkit.Spec, flags ...string) ([]finding, error) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(contractkit.EnvVar, strings.TrimPrefix(spec.Env(), contractkit.EnvVar+"="))
	args := append(append([]string{"check", "--json"}, flags...), "--", exe, "contractkit")
	out, _, err := runCLI(t, args...)
	var got []finding
	if jerr := json.Unmarshal([]byte(out), &got); jerr != nil {
		t.Fatalf("check --json printed no JSON array (%v):\n%s", jerr, out)
	}
	return got, err
}

// TestCheckRules: for each rule check tells about, a tool server built to
// break exactly that rule gets that finding, with the contract section, and
// nothing else fails; check exits non-zero exactly when something fails.
func TestCheckRules(t *testing.T) {
	type rule struct {
		name  string
		spec  func(t *testing.T) contractkit.Spec
		flags []string
		level string // of the finding wanted
		sect  string
		want  string // in its message
	}
	tool := func(edit func(tool, meta, props map[string]any)) func(t *testing.T) contractkit.Spec {
		return func(t *testing.T) contractkit.Spec { return contractkit.Spec{Tool: kitTool(t, edit)} }
	}
	result := func(edit func(sc, st map[string]any)) func(t *testing.T) contractkit.Spec {
		return func(t *testing.T) contractkit.Spec { return contractkit.Spec{Result: kitResult(t, edit)} }
	}
	slow := func(s contractkit.Spec, edit func(tool, meta, props map[string]any)) func(t *testing.T) contractkit.Spec {
		return func(t *testing.T) contractkit.Spec {
			s.Tool = kitTool(t, func(tl, m, p map[string]any) {
				deterministic(tl, m, p)
				if edit != nil {
					edit(tl, m, p)
				}
			})
			return s
		}
	}
	fault := func(f string) func(t *testing.T) contractkit.Spec {
		return func(t *testing.T) contractkit.Spec { return contractkit.Spec{Fault: f} }
	}
	insertTool := func(tl, m, p map[string]any) {
		m["apply"], m["document"], m["category"] = "insert", "required", "solvation"
		p["document"] = map[string]any{"type": "object", "x-megane-widget": "document",
			"properties": map[string]any{"elements": map[string]any{"type": "array"}, "positions": map[string]any{"type": "array"}}}
		in := tl["inputSchema"].(map[string]any)
		in["required"] = append(in["required"].([]any), "document")
	}
	rules := []rule{
		// §3 discovery
		{name: "unsupported contract", spec: tool(func(_, m, _ map[string]any) { m["contract"] = 2 }), level: "fail", sect: "§3", want: "contract 2 is not supported"},
		{name: "unknown category", spec: tool(func(_, m, _ map[string]any) { m["category"] = "liquids" }), level: "warn", sect: "§3", want: `category is "liquids", not one of bulk, molecule, polymer, surface, solvation, other: Builder puts the button under other`},
		{name: "unknown apply mode", spec: tool(func(_, m, _ map[string]any) { m["apply"] = "replace" }), level: "fail", sect: "§3", want: `apply is "replace"`},
		{name: "expectedSeconds not a number", spec: tool(func(_, m, _ map[string]any) { m["expectedSeconds"] = "5" }), level: "fail", sect: "§3", want: `expectedSeconds is "5"`},
		{name: "no title", spec: tool(func(tl, _, _ map[string]any) { delete(tl, "title") }), level: "warn", sect: "§3", want: "no title"},
		{name: "icon by URL", spec: tool(func(tl, _, _ map[string]any) {
			tl["icons"] = []any{map[string]any{"src": "https://example.org/i.svg", "mimeType": "image/svg+xml"}}
		}), level: "warn", sect: "§3", want: "icon 0 is not a data: URI"},
		// §4 inputs
		{name: "anyOf outside a widget", spec: tool(func(_, _, p map[string]any) {
			p["spacing"] = map[string]any{"anyOf": []any{map[string]any{"type": "number"}, map[string]any{"type": "string"}}}
		}), level: "fail", sect: "§4.1", want: `Builder cannot build a form: property "spacing" uses anyOf`},
		{name: "example outside the schema", spec: tool(func(_, _, p map[string]any) { p["count"].(map[string]any)["examples"] = []any{0} }),
			level: "fail", sect: "§4.1", want: `example 0 of "count" does not validate against its schema`},
		{name: "default of a vector outside its item schema", spec: tool(func(_, _, p map[string]any) {
			p["offset"] = map[string]any{"type": "array", "items": map[string]any{"type": "number", "minimum": 0}, "minItems": 3, "maxItems": 3, "default": []any{0, -1, 0}}
		}), level: "fail", sect: "§4.1", want: `the default of "offset" does not validate against its schema`},
		{name: "seed widget of another shape", spec: tool(func(_, _, p map[string]any) { p["seed"].(map[string]any)["type"] = "string" }),
			level: "fail", sect: "§4.2", want: `"seed" has x-megane-widget "seed" but its schema is not`},
		{name: "stochastic tool without a seed", spec: tool(func(tl, _, p map[string]any) {
			tl["name"] = "bad_box"
			p["rng"] = p["seed"]
			delete(p, "seed")
			delete(p["rng"].(map[string]any), "x-megane-widget")
			tl["inputSchema"].(map[string]any)["required"] = []any{"count"}
		}), level: "fail", sect: "§4.4", want: "stochastic tool has no seed input"},
		{name: "document tool without a document property", spec: tool(func(_, m, _ map[string]any) { m["document"] = "required" }),
			level: "fail", sect: "§4.3", want: `document is "required" but the tool declares 0 properties`},
		// §5 results
		{name: "no outputSchema", spec: tool(func(tl, _, _ map[string]any) { delete(tl, "outputSchema") }), level: "fail", sect: "§5", want: "no outputSchema"},
		{name: "outputSchema that cannot be used", spec: tool(func(tl, _, _ map[string]any) {
			tl["outputSchema"] = map[string]any{"type": "object", "$ref": "https://example.org/builder-result.json"}
		}), level: "fail", sect: "§5", want: "outputSchema is not a usable JSON Schema"},
		{name: "result outside its own outputSchema", spec: tool(func(tl, _, _ map[string]any) {
			tl["outputSchema"].(map[string]any)["required"] = []any{"contract", "structure", "label"}
		}), level: "fail", sect: "§5", want: "structuredContent does not validate against the tool's own outputSchema"},
		{name: "no text summary", spec: func(t *testing.T) contractkit.Spec { return contractkit.Spec{NoSummary: true} }, level: "warn", sect: "§5", want: "no text summary"},
		{name: "result of another contract", spec: result(func(sc, _ map[string]any) { sc["contract"] = 2 }), level: "fail", sect: "§5", want: "structuredContent.contract is 2"},
		{name: "no provenance", spec: result(func(sc, _ map[string]any) { delete(sc, "provenance") }), level: "warn", sect: "§7", want: "no provenance"},
		{name: "no structure", spec: result(func(sc, _ map[string]any) { delete(sc, "structure") }), level: "fail", sect: "§5", want: "no structure object"},
		{name: "positions cut short", spec: result(func(_, st map[string]any) { st["positions"] = asSlice(st["positions"])[:8] }),
			level: "fail", sect: "§5.1", want: "positions has 8 numbers for 3 atoms"},
		{name: "element 0", spec: result(func(_, st map[string]any) { st["elements"] = []any{18, 0, 18} }), level: "fail", sect: "§5.1", want: "elements[1] is 0"},
		{name: "bond to no atom", spec: result(func(_, st map[string]any) { st["bonds"] = []any{[]any{0, 3}} }), level: "fail", sect: "§5.1", want: "bonds[0] is [0,3]"},
		{name: "bond orders not parallel", spec: result(func(_, st map[string]any) {
			st["bonds"], st["bondOrders"] = []any{[]any{0, 1}}, []any{1, 1}
		}), level: "fail", sect: "§5.1", want: "bondOrders has 2 entries for 1 bonds"},
		{name: "bond order 5", spec: result(func(_, st map[string]any) { st["bonds"], st["bondOrders"] = []any{[]any{0, 1}}, []any{5} }),
			level: "fail", sect: "§5.1", want: "bondOrders[0] is 5"},
		{name: "per-atom array of another length", spec: result(func(_, st map[string]any) { st["residueNames"] = []any{"AR", "AR"} }),
			level: "fail", sect: "§5.1", want: "residueNames has 2 entries for 3 atoms"},
		{name: "cell of 3 numbers", spec: result(func(_, st map[string]any) { st["cell"] = []any{1, 1, 1} }), level: "fail", sect: "§5.1", want: "cell has 3 numbers, not 9"},
		{name: "no bonds", spec: result(func(_, st map[string]any) { delete(st, "bonds") }), level: "fail", sect: "§5", want: "bonds is missing"},
		{name: "insert result that repeats the document", spec: func(t *testing.T) contractkit.Spec {
			return contractkit.Spec{Fault: contractkit.EchoDocument, Tool: kitTool(t, insertTool)}
		}, level: "fail", sect: "§5.2", want: "an insert result repeats the document's atoms"},
		// §6 execution
		{name: "another structure for the same seed", spec: fault(contractkit.IgnoreSeed), level: "fail", sect: "§4.4", want: "the same arguments and seed gave another structure"},
		{name: "missing arguments accepted", spec: fault(contractkit.AcceptMissing), level: "fail", sect: "§6", want: "a call without its required arguments succeeded"},
		{name: "missing arguments refused by JSON-RPC", spec: fault(contractkit.ProtocolErrorMissing), level: "warn", sect: "§6", want: "got a JSON-RPC error, not a tool error"},
		{name: "refusal of two lines", spec: fault(contractkit.MultilineMissing), level: "warn", sect: "§6", want: "is not one line"},
		{name: "stdout noise", spec: fault(contractkit.StdoutNoise), level: "fail", sect: "§6", want: `line(s) on stdout that are not MCP messages, the first "Loading RDKit..."`},
		{name: "cancel honoured", spec: slow(contractkit.Spec{WorkMs: 1500, Progress: true}, nil), level: "ok", sect: "§6", want: "cancelled after 1s: the work stopped"},
		{name: "work goes on after a cancel", spec: slow(contractkit.Spec{Fault: contractkit.BusyAfterCancel, WorkMs: 4000}, nil),
			level: "fail", sect: "§6", want: "still working after a cancel"},
		{name: "a program started goes on after a cancel", spec: slow(contractkit.Spec{Fault: contractkit.ChildAfterCancel, WorkMs: 4000}, nil),
			level: "fail", sect: "§6", want: "still working after a cancel"},
		{name: "no progress", spec: slow(contractkit.Spec{WorkMs: 2500}, nil), level: "warn", sect: "§6", want: "sent no progress notification"},
		{name: "longer than expectedSeconds", spec: slow(contractkit.Spec{WorkMs: 2500, Progress: true}, func(_, m, _ map[string]any) { m["expectedSeconds"] = 1 }),
			level: "warn", sect: bridgeAdvice, want: "over 2 × expectedSeconds (1 s)"},
		{name: "long call without expectedSeconds", spec: slow(contractkit.Spec{WorkMs: 2500, Progress: true}, func(_, m, _ map[string]any) { delete(m, "expectedSeconds") }),
			level: "warn", sect: "§6", want: "has no expectedSeconds"},
		// --timeout also bounds the server's start: 10 s leaves a loaded
		// machine room to start the (race-enabled) test server.
		{name: "call longer than --timeout", spec: slow(contractkit.Spec{WorkMs: 30000, Progress: true}, nil), flags: []string{"--timeout", "10s"},
			level: "warn", sect: "§6", want: "did not finish within --timeout 10s"},
	}
	_, cpuErr := treeCPU(selfTree{})
	for _, r := range rules {
		t.Run(r.name, func(t *testing.T) {
			if errors.Is(cpuErr, errCPUNotMeasured) && strings.Contains(r.name, "after a cancel") {
				t.Skip("CPU time is not measured on this OS: check warns instead")
			}
			got, err := runKitCheck(t, r.spec(t), r.flags...)
			found, fails := false, 0
			for _, f := range got {
				if f.Level == r.level && strings.HasPrefix(f.Section, r.sect) && strings.Contains(f.Message, r.want) {
					found = true
					t.Logf("%s", f)
				}
				if f.Level == "fail" {
					fails++
					if r.level != "fail" || !strings.HasPrefix(f.Section, r.sect) {
						t.Errorf("another rule failed: %s", f)
					}
				}
			}
			if !found {
				t.Errorf("no %s %q (%s) among:\n%s", r.level, r.want, r.sect, findingLines(got))
			}
			if (fails > 0) != (err != nil) {
				t.Errorf("%d fail(s) and exit error %v", fails, err)
			}
		})
	}
}

// TestCheckValidKitServer: the kit's server as it is keeps every rule: no
// fail, no warning, and the text report names the tool as keeping the
// contract.
func TestCheckValidKitServer(t *testing.T) {
	got, err := runKitCheck(t, contractkit.Spec{})
	for _, f := range got {
		if f.Level != "ok" {
			t.Errorf("%s", f)
		}
	}
	if err != nil {
		t.Errorf("exit error %v", err)
	}
	exe, _ := os.Executable()
	out, _, _ := runCLI(t, "check", "--", exe, "contractkit")
	if !strings.Contains(out, "ok: cluster: keeps the contract (new_document, \"bulk\")\n") {
		t.Errorf("no line for the tool:\n%s", out)
	}
}

// TestCheckFindingLine: a text line names the level, the tool, what is
// wrong and the section, as the example does.
func TestCheckFindingLine(t *testing.T) {
	exe, _ := os.Executable()
	t.Setenv(contractkit.EnvVar, strings.TrimPrefix(contractkit.Spec{Tool: kitTool(t, func(tl, _, p map[string]any) {
		tl["name"] = "bad_box"
		delete(p, "seed")
		tl["inputSchema"].(map[string]any)["required"] = []any{"count"}
	})}.Env(), contractkit.EnvVar+"="))
	out, _, err := runCLI(t, "check", "--", exe, "contractkit")
	if err == nil || !strings.Contains(out, "\nfail: bad_box: stochastic tool has no seed input (§4.4)\n") {
		t.Fatalf("exit error %v, output:\n%s", err, out)
	}
}

// TestCheckTiming: the Builder's timeout is max(60 s, 5 × expectedSeconds),
// at most 30 minutes, and a call over it fails (a server cannot be made to
// take a minute in a test, so the rule is checked on the durations).
func TestCheckTiming(t *testing.T) {
	for _, tc := range []struct {
		exp  any
		want time.Duration
	}{{nil, time.Minute}, {1.0, time.Minute}, {20.0, 100 * time.Second}, {1000.0, 30 * time.Minute}} {
		bt := &builderTool{Meta: map[string]any{}}
		if tc.exp != nil {
			bt.Meta["expectedSeconds"] = tc.exp
		}
		if got := builderTimeout(bt); got != tc.want {
			t.Errorf("expectedSeconds %v: timeout %s, want %s", tc.exp, got, tc.want)
		}
	}
	fs := &findings{server: "s", tool: "slow"}
	timingFindings(fs, &builderTool{Meta: map[string]any{"expectedSeconds": 1.0}}, 61*time.Second, 3)
	if len(fs.list) != 1 || fs.list[0].Level != "fail" || fs.list[0].Section != "§6" || !strings.Contains(fs.list[0].Message, "over the Builder's timeout of 1m0s") {
		t.Fatalf("%v", fs.list)
	}
}

func findingLines(fs []finding) string {
	var b strings.Builder
	for _, f := range fs {
		b.WriteString(f.String() + "\n")
	}
	return b.String()
}

// selfTree is this test's own process as a processTree.
type selfTree struct{}

func (selfTree) Pgid() int { return os.Getpid() }
func (selfTree) Pid() int  { return os.Getpid() }

// TestCheckReferenceResult: the reference server's recorded polymer_chain
// result keeps §5, including its tool's own outputSchema.
func TestCheckReferenceResult(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "shared", "fixtures", "megane-reference")
	var list struct{ Tools []json.RawMessage }
	var call struct {
		Name      string
		Arguments map[string]any
		Result    json.RawMessage
	}
	for file, v := range map[string]any{"tools-list.json": &list, "call-polymer_chain.json": &call} {
		data, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatalf("the reference fixtures (shared/): %v", err)
		}
		if err := json.Unmarshal(data, v); err != nil {
			t.Fatal(err)
		}
	}
	for _, raw := range list.Tools {
		bt, _ := checkToolDefinition("megane-builder-tools", raw)
		if bt == nil || bt.Name != call.Name {
			continue
		}
		if bt.Output == nil {
			t.Fatalf("the outputSchema of %s did not resolve", bt.Name)
		}
		fs := &findings{server: "megane-builder-tools", tool: bt.Name}
		if checkResult(fs, bt, call.Result, nil) == nil || len(fs.list) != 0 {
			t.Fatalf("%v", fs.list)
		}
		return
	}
	t.Fatalf("no Builder tool %s among the recorded tools", call.Name)
}

// TestCheckHTTPServer: a Streamable HTTP server is checked the same way; a
// cancelled call's CPU cannot be measured there, which check says as a
// warning, and stdout is not a question.
func TestCheckHTTPServer(t *testing.T) {
	spec := contractkit.Spec{WorkMs: 1500, Progress: true, Tool: kitTool(t, deterministic)}
	srv, err := contractkit.NewServer(spec, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	ts := httptest.NewServer(h)
	defer ts.Close()
	out, _, err := runCLI(t, "check", ts.URL)
	if err != nil || !strings.Contains(out, "warn: cluster: cancelled after 1s; whether the work stopped is not measured for a Streamable HTTP server") ||
		strings.Contains(out, "stdout") || !strings.Contains(out, "ok: cluster: keeps the contract") {
		t.Fatalf("exit error %v, output:\n%s", err, out)
	}
}

// TestCheckReportsEveryFault (issue 26.7): a tool whose definition fails
// (no outputSchema, stochastic without a seed) is still called, so that
// one run also names what is wrong with its result (6 positions for 3
// atoms, a bond to an atom that is not there), as megane-builder-conformance
// does. Before, check stopped at the definition and the result's faults
// waited for the next run.
func TestCheckReportsEveryFault(t *testing.T) {
	spec := contractkit.Spec{
		Tool: kitTool(t, func(tl, _, p map[string]any) {
			delete(tl, "outputSchema")
			delete(p, "seed")
			in := tl["inputSchema"].(map[string]any)
			in["required"] = []any{"count"}
		}),
		Result: kitResult(t, func(_, st map[string]any) {
			st["positions"] = []any{0, 0, 0, 3, 0, 0}
			st["bonds"] = []any{[]any{0, 5, 1}}
		}),
	}
	got, err := runKitCheck(t, spec)
	if err == nil {
		t.Error("check exited 0 on a failing tool")
	}
	for _, want := range []struct{ sect, msg string }{
		{"§5", "no outputSchema"},
		{"§4.4", "stochastic tool has no seed input"},
		{"§5", "positions"},
		{"§5", "bond"},
	} {
		found := false
		for _, f := range got {
			if f.Level == "fail" && strings.HasPrefix(f.Section, want.sect) && strings.Contains(f.Message, want.msg) {
				found = true
			}
		}
		if !found {
			t.Errorf("no fail %q (%s) among:\n%s", want.msg, want.sect, findingLines(got))
		}
	}
}

// TestExamplesInTables: §4.1's advice that every required property
// without a default carry examples is judged, for a table (an array of
// objects), on the rows' own required properties, as the contract's own
// example does: the reference server's liquid_box puts its example on a
// component's count, and check passes it (before, it warned that
// components had neither a default nor examples, so doctor --strict failed
// on the default server); a row property without one is named by its path.
func TestExamplesInTables(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "shared", "fixtures", "megane-reference", "tools-list.json"))
	if err != nil {
		t.Fatalf("the reference fixtures (shared/): %v", err)
	}
	var l struct{ Tools []json.RawMessage }
	if err := json.Unmarshal(data, &l); err != nil {
		t.Fatal(err)
	}
	seen := false
	for _, raw := range l.Tools {
		bt, fs := checkToolDefinition("megane-builder-tools", raw)
		if bt == nil || bt.Name != "liquid_box" {
			continue
		}
		seen = true
		for _, f := range fs {
			if strings.Contains(f.Message, "neither a default nor examples") {
				t.Errorf("the reference liquid_box: %s", f)
			}
		}
		// Without the count's example, the row's count is named.
		var tool map[string]any
		json.Unmarshal(raw, &tool)
		defs := tool["inputSchema"].(map[string]any)["$defs"].(map[string]any)
		delete(defs["Component"].(map[string]any)["properties"].(map[string]any)["count"].(map[string]any), "examples")
		b, _ := json.Marshal(tool)
		_, fs = checkToolDefinition("megane-builder-tools", b)
		var warned []string
		for _, f := range fs {
			if strings.Contains(f.Message, "neither a default nor examples") {
				warned = append(warned, f.Message)
			}
		}
		if len(warned) != 1 || !strings.Contains(warned[0], `"components[].count"`) {
			t.Errorf("liquid_box without the count's example: %q, want one warning naming components[].count", warned)
		}
	}
	if !seen {
		t.Fatal("no liquid_box among the recorded tools")
	}
}
