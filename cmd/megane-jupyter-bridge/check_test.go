package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
	"github.com/megane-labs/megane-jupyter-bridge/child"
)

// validTool is a Builder tool definition that keeps the contract; each case
// of TestCheckToolDefinition breaks one rule of it.
const validTool = `{
  "name": "box", "title": "Box", "description": "Build a box. More for the model.",
  "icons": [{"src": "data:image/svg+xml;base64,PHN2Zy8+", "mimeType": "image/svg+xml"}],
  "inputSchema": {"type": "object", "$defs": {"Mol": {"type": "object", "properties": {"name": {"type": "string"}, "molblock": {"type": "string"}}, "required": ["name"]}},
    "properties": {
      "molecule": {"$ref": "#/$defs/Mol", "x-megane-widget": "molecule"},
      "head": {"type": "integer", "minimum": 0, "x-megane-widget": "atom", "x-megane-of": "molecule"},
      "count": {"type": "integer", "minimum": 1, "maximum": 1000, "examples": [10]},
      "density": {"type": "number", "exclusiveMinimum": 0, "default": 1.0},
      "size": {"type": "array", "items": {"type": "number"}, "minItems": 3, "maxItems": 3, "default": [1, 1, 1]},
      "cell": {"type": "array", "items": {"type": "number"}, "minItems": 9, "maxItems": 9, "x-megane-widget": "cell"},
      "seed": {"type": "integer", "minimum": 0, "x-megane-widget": "seed"}
    },
    "required": ["molecule", "count", "seed"]},
  "outputSchema": {"type": "object"},
  "_meta": {"io.github.megane-labs/builder": {"contract": 1, "category": "bulk", "apply": "new_document", "document": "none", "stochastic": true, "expectedSeconds": 5}}
}`

// mutate applies edit to a decoded copy of validTool.
func mutate(t *testing.T, edit func(tool, meta, props map[string]any)) json.RawMessage {
	t.Helper()
	return mutateFrom(t, validTool, edit)
}

// mutateFrom applies edit to a decoded copy of the tool definition base.
func mutateFrom(t *testing.T, base string, edit func(tool, meta, props map[string]any)) json.RawMessage {
	t.Helper()
	var tool map[string]any
	if err := json.Unmarshal([]byte(base), &tool); err != nil {
		t.Fatal(err)
	}
	meta := tool["_meta"].(map[string]any)["io.github.megane-labs/builder"].(map[string]any)
	props := tool["inputSchema"].(map[string]any)["properties"].(map[string]any)
	edit(tool, meta, props)
	b, _ := json.Marshal(tool)
	return b
}

func TestCheckToolDefinition(t *testing.T) {
	if bt, fs := checkToolDefinition("s", json.RawMessage(validTool)); bt == nil || len(fs) != 0 {
		t.Fatalf("the valid tool: %v %v", bt, fs)
	}
	for _, tc := range []struct {
		name, want, section string
		edit                func(tool, meta, props map[string]any)
	}{
		{"unsupported contract", "contract 2 is not supported", "§3", func(_, m, _ map[string]any) { m["contract"] = 2 }},
		{"unknown apply mode", `apply is "replace"`, "§3", func(_, m, _ map[string]any) { m["apply"] = "replace" }},
		{"unknown document mode", `document is "always"`, "§3", func(_, m, _ map[string]any) { m["document"] = "always" }},
		{"expectedSeconds not a number", "expectedSeconds is \"5\"", "§3", func(_, m, _ map[string]any) { m["expectedSeconds"] = "5" }},
		{"no outputSchema", "no outputSchema", "§5", func(tl, _, _ map[string]any) { delete(tl, "outputSchema") }},
		{"anyOf outside a widget", `property "mode" uses anyOf`, "§4.1", func(_, _, p map[string]any) {
			p["mode"] = map[string]any{"anyOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "integer"}}}
		}},
		{"vector too long", `array of numbers "size" needs minItems == maxItems ≤ 9`, "§4.1", func(_, _, p map[string]any) {
			p["size"].(map[string]any)["maxItems"] = 12
		}},
		{"stochastic without a seed", "stochastic tool has no seed input", "§4.4", func(tl, _, p map[string]any) {
			delete(p, "seed")
			tl["inputSchema"].(map[string]any)["required"] = []any{"molecule", "count"}
		}},
		{"atom of no molecule", `x-megane-of "monomer" does not name a molecule argument`, "§4.2", func(_, _, p map[string]any) {
			p["head"].(map[string]any)["x-megane-of"] = "monomer"
		}},
		{"cell of 3 numbers", `"cell" has x-megane-widget "cell" but its schema is not an array of exactly 9 numbers`, "§4.2", func(_, _, p map[string]any) {
			p["cell"].(map[string]any)["minItems"] = 3
			p["cell"].(map[string]any)["maxItems"] = 3
		}},
		{"document tool without a document property", `document is "required" but the tool declares 0 properties`, "§4.3", func(_, m, _ map[string]any) {
			m["document"] = "required"
		}},
		{"example outside the schema", `example 0 of "count" does not validate against its schema: 0 < minimum 1`, "§4.1", func(_, _, p map[string]any) {
			p["count"].(map[string]any)["examples"] = []any{0}
		}},
		{"example of a widget property outside its $defs schema", `example 0 of "molecule" does not validate against its schema: validating root: required: missing properties: ["name"]`, "§4.1", func(_, _, p map[string]any) {
			p["molecule"].(map[string]any)["examples"] = []any{map[string]any{"smiles": "O"}}
		}},
		{"default outside the schema", `the default of "density" does not validate against its schema: 0 ≤ exclusiveMinimum 0`, "§4.1", func(_, _, p map[string]any) {
			p["density"].(map[string]any)["default"] = 0
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, fs := checkToolDefinition("s", mutate(t, tc.edit))
			for _, f := range fs {
				if f.Level == "fail" && strings.Contains(f.Message, tc.want) && f.Section == tc.section {
					return
				}
			}
			t.Fatalf("no fail %q (%s) among %v", tc.want, tc.section, fs)
		})
	}
	t.Run("a required property without default or examples is a warning", func(t *testing.T) {
		_, fs := checkToolDefinition("s", mutate(t, func(_, _, p map[string]any) { delete(p["count"].(map[string]any), "examples") }))
		if len(fs) != 1 || fs[0].Level != "warn" || fs[0].Section != "§4.1" || !strings.Contains(fs[0].Message, `"count" has neither a default nor examples`) {
			t.Fatalf("%v", fs)
		}
	})
	t.Run("an icon by URL is a warning: Builder shows the category icon", func(t *testing.T) {
		_, fs := checkToolDefinition("s", mutate(t, func(tl, _, _ map[string]any) {
			tl["icons"] = []any{map[string]any{"src": "https://example.org/i.svg", "mimeType": "image/svg+xml"}}
		}))
		if len(fs) != 1 || fs[0].Level != "warn" || fs[0].Section != "§3" || !strings.Contains(fs[0].Message, "icon 0 is not a data: URI") {
			t.Fatalf("%v", fs)
		}
	})
	t.Run("a tool without the marker is not a Builder tool", func(t *testing.T) {
		if bt, fs := checkToolDefinition("s", mutate(t, func(tl, _, _ map[string]any) { delete(tl, "_meta") })); bt != nil || len(fs) != 0 {
			t.Fatalf("%v %v", bt, fs)
		}
	})
}

func TestStructureProblems(t *testing.T) {
	good := func() map[string]any {
		var m map[string]any
		json.Unmarshal([]byte(`{"elements":[8,1,1],"positions":[0,0,0,1,0,0,0,1,0],"cell":null,"bonds":[[0,1],[0,2]],"bondOrders":[1,1],"residueNames":["HOH","HOH","HOH"]}`), &m)
		return m
	}
	if p := structureProblems(good()); len(p) != 0 {
		t.Fatalf("a valid structure: %v", p)
	}
	for _, tc := range []struct {
		want string
		edit func(m map[string]any)
	}{
		{"positions has 8 numbers for 3 atoms", func(m map[string]any) { m["positions"] = asSlice(m["positions"])[:8] }},
		{"elements[1] is 0", func(m map[string]any) { asSlice(m["elements"])[1] = 0.0 }},
		{"bonds[1] is [0,3], not two distinct atoms of 3", func(m map[string]any) { asSlice(m["bonds"])[1] = []any{0.0, 3.0} }},
		{"bonds[0] is [1,1]", func(m map[string]any) { asSlice(m["bonds"])[0] = []any{1.0, 1.0} }},
		{"bondOrders has 1 entries for 2 bonds", func(m map[string]any) { m["bondOrders"] = []any{1.0} }},
		{"bondOrders[0] is 5", func(m map[string]any) { m["bondOrders"] = []any{5.0, 1.0} }},
		{"residueNames has 2 entries for 3 atoms", func(m map[string]any) { m["residueNames"] = []any{"A", "B"} }},
		{"cell has 3 numbers, not 9", func(m map[string]any) { m["cell"] = []any{1.0, 1.0, 1.0} }},
		{"cell is missing", func(m map[string]any) { delete(m, "cell") }},
		{"bonds is missing", func(m map[string]any) { delete(m, "bonds") }},
	} {
		t.Run(tc.want, func(t *testing.T) {
			m := good()
			tc.edit(m)
			p := structureProblems(m)
			if len(p) == 0 || !strings.Contains(strings.Join(p, "; "), tc.want) {
				t.Fatalf("want %q, got %v", tc.want, p)
			}
		})
	}
}

// TestCheckServers: the demo server passes every check; the reference
// server's recorded tools keep the definition rules (§3, §4); a server
// whose result breaks §5.1 (a recorded result with positions cut short)
// fails with the rule named, and check exits non-zero.
func TestCheckServers(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(asProgramEnv, "1")
	t.Run("demo server", func(t *testing.T) {
		out, _, err := runCLI(t, "check", "--", exe, "demo-tools")
		if err != nil || strings.Contains(out, "fail:") || !strings.Contains(out, "ok: gas_box: keeps the contract") {
			t.Fatalf("check on the demo server: %v\n%s", err, out)
		}
	})
	t.Run("a configured server, flags after its name", func(t *testing.T) {
		// The README's form: check NAME --servers FILE, with the file's
		// command "megane-jupyter-bridge" run as this very binary, found
		// on PATH or not. Before, flags after the name were taken for
		// names ("no configured server"), and the command was looked up
		// on PATH only ("not found on PATH").
		t.Setenv("PATH", t.TempDir())
		out, _, err := runCLI(t, "check", "demo-tools", "--servers", filepath.Join("..", "..", "etc", "demo-servers.json"), "--timeout", "1m")
		if err != nil || strings.Contains(out, "fail:") || !strings.Contains(out, "ok: gas_box: keeps the contract") {
			t.Fatalf("check demo-tools --servers etc/demo-servers.json: %v\n%s", err, out)
		}
	})
	t.Run("a server that gives no version", func(t *testing.T) {
		// mcp 2.x's default serverInfo.version is empty.
		t.Setenv(bridgetest.EnvVar, strings.TrimPrefix(bridgetest.PythonMCP2Mode().Env(), bridgetest.EnvVar+"="))
		out, _, _ := runCLI(t, "check", "--", exe, "-test.run=^$")
		if !strings.Contains(out, "(python-mcp-2.0.0)") || strings.Contains(out, "(python-mcp-2.0.0 )") {
			t.Fatalf("check names a server without a version as %q, want \"(python-mcp-2.0.0)\":\n%s", "(python-mcp-2.0.0 )", out)
		}
	})
	t.Run("recorded reference tools", func(t *testing.T) {
		list := filepath.Join("..", "..", "..", "shared", "fixtures", "megane-reference", "tools-list.json")
		data, err := os.ReadFile(list)
		if err != nil {
			t.Fatalf("the reference fixtures (shared/): %v", err)
		}
		var l struct{ Tools []json.RawMessage }
		json.Unmarshal(data, &l)
		builder := 0
		for _, raw := range l.Tools {
			bt, fs := checkToolDefinition("megane-builder-tools", raw)
			if bt != nil {
				builder++
			}
			for _, f := range fs {
				if f.Level == "fail" {
					t.Errorf("%s", f)
				}
			}
		}
		if builder == 0 {
			t.Fatalf("no Builder tool among %d recorded tools", len(l.Tools))
		}
	})
	// A server built like the reference one: polymer_chain computes in a
	// worker behind one lock, 40 ms per unit of length (the sample, length
	// 10, ends in 0.4 s; length 200, the schema's maximum, would take 8 s).
	// check asks for the long call to exercise cancellation; a server whose
	// worker ignores the cancel fails twice, on its CPU after the cancel
	// and on the next call's wait; one that stops passes.
	for _, tc := range []struct {
		name         string
		ignore       bool
		want, unwant []string
	}{
		{"a server that keeps computing a cancelled call", true,
			[]string{"ok: polymer_chain: cancellation exercised with length=200", "fail: polymer_chain: still working after a cancel: the server's processes used ", "fail: polymer_chain: the call after a cancel waited: the same call took "},
			nil},
		{"a server that stops a cancelled call", false,
			[]string{"ok: polymer_chain: cancellation exercised with length=200", "ok: polymer_chain: cancelled after 1s: the work stopped"},
			[]string{"polymer_chain: still working", "polymer_chain: the call after a cancel waited"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !child.CPUMeasured() {
				t.Skip("the CPU time of processes is not measured on this OS (macOS): check warns that it cannot tell")
			}
			list := mustAbs(t, filepath.Join("..", "..", "..", "shared", "fixtures", "megane-reference", "tools-list.json"))
			call := mustAbs(t, filepath.Join("..", "..", "..", "shared", "fixtures", "megane-reference", "call-polymer_chain.json"))
			mode := bridgetest.Mode{Name: "megane-builder-tools", FixtureList: list, FixtureCalls: map[string]string{"polymer_chain": call},
				FixtureWork: &bridgetest.FixtureWork{Arg: "length", MsPerUnit: 40, IgnoreCancel: tc.ignore}}
			t.Setenv(bridgetest.EnvVar, strings.TrimPrefix(mode.Env(), bridgetest.EnvVar+"="))
			out, _, _ := runCLI(t, "check", "--", exe, "-test.run=^$")
			for _, line := range strings.Split(out, "\n") {
				if strings.Contains(line, "polymer_chain: ") && strings.Contains(line, "§6") {
					t.Log(line)
				}
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("check lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tc.unwant {
				if strings.Contains(out, w) {
					t.Errorf("check says %q:\n%s", w, out)
				}
			}
		})
	}
	t.Run("a result whose arrays do not match", func(t *testing.T) {
		call := filepath.Join("..", "..", "..", "shared", "fixtures", "megane-reference", "call-polymer_chain.json")
		data, err := os.ReadFile(call)
		if err != nil {
			t.Fatal(err)
		}
		var fix map[string]any
		json.Unmarshal(data, &fix)
		st := fix["result"].(map[string]any)["structuredContent"].(map[string]any)["structure"].(map[string]any)
		st["positions"] = asSlice(st["positions"])[:len(asSlice(st["positions"]))-1]
		broken := filepath.Join(t.TempDir(), "call.json")
		b, _ := json.Marshal(fix)
		os.WriteFile(broken, b, 0o600)
		list := filepath.Join("..", "..", "..", "shared", "fixtures", "megane-reference", "tools-list.json")
		mode := bridgetest.Mode{FixtureList: mustAbs(t, list), FixtureCalls: map[string]string{"polymer_chain": broken}}
		t.Setenv(bridgetest.EnvVar, strings.TrimPrefix(mode.Env(), bridgetest.EnvVar+"="))
		out, _, err := runCLI(t, "check", "--", exe, "-test.run=^$")
		if err == nil || !strings.Contains(out, "fail: polymer_chain: positions has ") || !strings.Contains(out, "(§5.1)") {
			t.Fatalf("check on a broken result: %v\n%s", err, out)
		}
	})
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
