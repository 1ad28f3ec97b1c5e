package main

// The Builder Tool Contract's rules for a tool definition (§3, §4) and for
// a result (§5), as pure functions over decoded JSON: check runs them on
// what a server lists and returns.

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// contractURL is the Builder Tool Contract the checks implement, at a
// pinned commit of megane-labs/megane (the newest this project's machines
// could read; the contract's own § numbers, which every finding cites, are
// the same there and in ../shared/reference/builder-tool-contract.txt).
const contractURL = "https://github.com/megane-labs/megane/blob/d302d16071eb921e766c12a72627ead09af2799e/docs/docs/dev/builder-tools.md"

// builderMeta is the _meta key that makes a tool a Builder button (§3).
const builderMeta = "io.github.megane-labs/builder"

// maxResultAtoms is the most atoms Builder accepts in one result (§5.1).
const maxResultAtoms = 500000

// finding is one line of check's report.
type finding struct {
	Level   string `json:"level"` // "ok", "warn" or "fail"
	Server  string `json:"server"`
	Tool    string `json:"tool,omitempty"`
	Section string `json:"section,omitempty"` // "§4.4"
	Message string `json:"message"`
}

// String is the finding as check prints it: one line, with whatever the
// server supplied in it escaped (termSafe).
// The sections of findings that are not the contract's: a rule of this
// bridge (its limits), or its advice. Every other finding cites the
// contract's section whose rule it checks.
const (
	bridgeRule   = "a limit of this bridge, not a rule of the contract"
	bridgeAdvice = "advice of this bridge, not a rule of the contract"
)

func (f finding) String() string {
	s := f.Level + ": "
	if f.Tool != "" {
		s += f.Tool + ": "
	}
	s += f.Message
	if f.Section != "" {
		s += " (" + f.Section + ")"
	}
	return termSafe(s)
}

// findings collects the findings about one tool.
type findings struct {
	server, tool string
	list         []finding
}

func (fs *findings) add(level, section, format string, a ...any) {
	fs.list = append(fs.list, finding{Level: level, Server: fs.server, Tool: fs.tool, Section: section, Message: fmt.Sprintf(format, a...)})
}

// builderTool is what the checks need of a Builder tool definition.
type builderTool struct {
	Name        string
	Meta        map[string]any // the _meta[builderMeta] object
	Input       map[string]any // inputSchema
	Stochastic  bool
	Apply       string
	Document    string
	Contract    float64
	HasOutput   bool
	Output      *jsonschema.Resolved // the outputSchema, when it resolves
	SeedProp    string               // the seed property, if any
	DocProp     string               // the document property, if any
	defs        map[string]any
	requiredSet map[string]bool
}

var (
	contractCategories = []string{"bulk", "molecule", "polymer", "surface", "solvation", "other"}
	contractApply      = []string{"new_document", "insert"}
	contractDocument   = []string{"none", "optional", "required"}
	iconTypes          = []string{"image/svg+xml", "image/png", "image/jpeg", "image/webp", "image/gif"}
	perAtomArrays      = []string{"molecules", "residueNames", "residueIds", "atomNames", "chainIds", "formalCharges"}
)

// checkToolDefinition checks one tool of tools/list (raw JSON) against §3
// and §4. It returns nil tool when the tool is not a Builder tool.
func checkToolDefinition(server string, raw json.RawMessage) (*builderTool, []finding) {
	var t map[string]any
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, []finding{{Level: "fail", Server: server, Message: "a tools/list entry is not a JSON object: " + err.Error()}}
	}
	name, _ := t["name"].(string)
	fs := &findings{server: server, tool: name}
	metaAll, _ := t["_meta"].(map[string]any)
	meta, ok := metaAll[builderMeta].(map[string]any)
	if !ok {
		if _, present := metaAll[builderMeta]; present {
			fs.add("fail", "§3", "_meta[%q] is not an object: Builder ignores the tool", builderMeta)
		}
		return nil, fs.list
	}
	bt := &builderTool{Name: name, Meta: meta}

	// §3 discovery.
	c, isNum := meta["contract"].(float64)
	switch {
	case !isNum || c != math.Trunc(c):
		fs.add("fail", "§3", "contract is %s, not an integer: Builder hides the tool", jsonText(meta["contract"]))
	case c != 1:
		fs.add("fail", "§3", "contract %v is not supported (this Builder supports 1): Builder hides the tool", c)
	}
	bt.Contract = c
	if c, _ := meta["category"].(string); !slices.Contains(contractCategories, c) {
		fs.add("warn", "§3", "category is %s, not one of %s: Builder puts the button under other (§11)", jsonText(meta["category"]), strings.Join(contractCategories, ", "))
	}
	bt.Apply = checkEnum(fs, meta, "apply", contractApply, "§3")
	bt.Document = checkEnum(fs, meta, "document", contractDocument, "§3")
	if v, present := meta["stochastic"]; present {
		b, ok := v.(bool)
		if !ok {
			fs.add("fail", "§3", "stochastic is %s, not a boolean", jsonText(v))
		}
		bt.Stochastic = b
	}
	if v, present := meta["expectedSeconds"]; present {
		if n, ok := v.(float64); !ok || n <= 0 {
			fs.add("fail", "§3", "expectedSeconds is %s, not a positive number", jsonText(v))
		} else if n > 1800 {
			fs.add("warn", "§6", "expectedSeconds %v is over 30 minutes, the Builder's longest timeout", n)
		}
	}
	title, _ := t["title"].(string)
	if ann, ok := t["annotations"].(map[string]any); ok && title == "" {
		title, _ = ann["title"].(string)
	}
	if strings.TrimSpace(title) == "" {
		fs.add("warn", "§3", "no title: the button is labelled with the tool name %q", name)
	}
	if d, _ := t["description"].(string); strings.TrimSpace(d) == "" {
		fs.add("warn", "§3", "no description: the button has no tooltip")
	}
	if icons, ok := t["icons"].([]any); ok {
		for i, ic := range icons {
			m, _ := ic.(map[string]any)
			src, _ := m["src"].(string)
			mime, _ := m["mimeType"].(string)
			if !strings.HasPrefix(src, "data:") {
				fs.add("warn", "§3", "icon %d is not a data: URI: Builder shows the category icon instead", i)
			} else if !slices.Contains(iconTypes, mime) && !slices.Contains(iconTypes, strings.SplitN(strings.TrimPrefix(src, "data:"), ";", 2)[0]) {
				fs.add("warn", "§3", "icon %d has type %q, not one of %s", i, mime, strings.Join(iconTypes, ", "))
			}
		}
	}
	out, hasOutput := t["outputSchema"].(map[string]any)
	bt.HasOutput = hasOutput
	if !hasOutput {
		fs.add("fail", "§5", "no outputSchema: a Builder tool declares BuilderResult as its outputSchema")
	} else if r, err := resolveSchema(json.RawMessage(jsonText(out))); err != nil {
		fs.add("fail", "§5", "outputSchema is not a usable JSON Schema (%v): clients cannot validate results against it", err)
	} else {
		bt.Output = r
	}

	// §4 inputs.
	in, ok := t["inputSchema"].(map[string]any)
	if !ok || in["type"] != "object" {
		fs.add("fail", "§4", "inputSchema is not an object schema")
		return bt, fs.list
	}
	bt.Input = in
	bt.defs, _ = in["$defs"].(map[string]any)
	bt.requiredSet = map[string]bool{}
	for _, r := range asSlice(in["required"]) {
		if s, ok := r.(string); ok {
			bt.requiredSet[s] = true
		}
	}
	props, _ := in["properties"].(map[string]any)
	var docs []string
	for _, p := range sortedKeys(props) {
		schema, _ := props[p].(map[string]any)
		widget, _ := schema["x-megane-widget"].(string)
		switch widget {
		case "document":
			docs = append(docs, p)
		case "seed":
			bt.SeedProp = p
		}
		if p == "seed" && bt.SeedProp == "" {
			bt.SeedProp = p
		}
		checkProperty(fs, bt, props, p, schema, 0)
		if bt.requiredSet[p] {
			for _, path := range unexampled(bt, p, schema, 0) {
				fs.add("warn", "§4.1", "required property %q has neither a default nor examples: the check and LLM clients must guess a value", path)
			}
		}
	}
	if bt.Stochastic && bt.SeedProp == "" {
		fs.add("fail", "§4.4", "stochastic tool has no seed input")
	}
	switch {
	case bt.Document != "" && bt.Document != "none" && len(docs) != 1:
		fs.add("fail", "§4.3", "document is %q but the tool declares %d properties with x-megane-widget \"document\" (exactly one is needed)", bt.Document, len(docs))
	case (bt.Document == "none" || bt.Document == "") && len(docs) > 0:
		fs.add("warn", "§4.3", "document is %q but %q has x-megane-widget \"document\": Builder will not fill it", bt.Document, docs[0])
	}
	if len(docs) == 1 {
		bt.DocProp = docs[0]
	}
	return bt, fs.list
}

// checkProperty checks one input property against the form subset (§4.1)
// or its widget's shape (§4.2). depth counts object and table nesting.
func checkProperty(fs *findings, bt *builderTool, siblings map[string]any, name string, schema map[string]any, depth int) {
	schema = resolve(bt, schema)
	if schema == nil {
		fs.add("fail", "§4.1", "Builder cannot build a form: property %q has a $ref that is not into $defs", name)
		return
	}
	checkValues(fs, bt, name, schema)
	if widget, ok := schema["x-megane-widget"].(string); ok {
		checkWidget(fs, bt, siblings, name, widget, schema)
		return
	}
	for _, k := range []string{"oneOf", "anyOf", "allOf", "if", "not"} {
		if _, ok := schema[k]; ok {
			fs.add("fail", "§4.1", "Builder cannot build a form: property %q uses %s", name, k)
			return
		}
	}
	switch schema["type"] {
	case "number", "integer", "boolean":
	case "string":
	case "array":
		items := resolve(bt, asMap(schema["items"]))
		switch {
		case items == nil:
			fs.add("fail", "§4.1", "Builder cannot build a form: array property %q has no item schema", name)
		case items["type"] == "number" || items["type"] == "integer":
			mi, _ := schema["minItems"].(float64)
			ma, _ := schema["maxItems"].(float64)
			if mi != ma || ma < 1 || ma > 9 {
				fs.add("fail", "§4.1", "Builder cannot build a form: array of numbers %q needs minItems == maxItems ≤ 9", name)
			}
		case items["type"] == "object":
			if depth > 0 {
				fs.add("fail", "§4.1", "Builder cannot build a form: table %q is nested (tables do not nest)", name)
				return
			}
			sub, _ := items["properties"].(map[string]any)
			for _, p := range sortedKeys(sub) {
				checkProperty(fs, bt, sub, name+"[]."+p, asMap(sub[p]), depth+1)
			}
		default:
			fs.add("fail", "§4.1", "Builder cannot build a form: array property %q has items of type %s", name, jsonText(items["type"]))
		}
	case "object":
		if depth > 0 {
			fs.add("fail", "§4.1", "Builder cannot build a form: object %q is nested more than one level", name)
			return
		}
		sub, _ := schema["properties"].(map[string]any)
		for _, p := range sortedKeys(sub) {
			checkProperty(fs, bt, sub, name+"."+p, asMap(sub[p]), depth+1)
		}
	default:
		fs.add("fail", "§4.1", "Builder cannot build a form: property %q has type %s", name, jsonText(schema["type"]))
	}
}

// checkWidget checks that a widget property's schema accepts the shape
// §4.2 gives that widget.
func checkWidget(fs *findings, bt *builderTool, siblings map[string]any, name, widget string, s map[string]any) {
	bad := func(want string) {
		fs.add("fail", "§4.2", "property %q has x-megane-widget %q but its schema is not %s", name, widget, want)
	}
	items := resolve(bt, asMap(s["items"]))
	switch widget {
	case "molecule":
		props, _ := s["properties"].(map[string]any)
		if s["type"] != "object" || props["name"] == nil || props["molblock"] == nil {
			bad(`an object with "name" and "molblock"`)
		}
	case "atom":
		if s["type"] != "integer" || s["minimum"] != float64(0) {
			bad(`{"type": "integer", "minimum": 0}`)
		}
		of, _ := s["x-megane-of"].(string)
		mol := resolve(bt, asMap(siblings[of]))
		if of == "" || mol == nil || mol["x-megane-widget"] != "molecule" {
			fs.add("fail", "§4.2", "atom property %q: x-megane-of %q does not name a molecule argument beside it", name, of)
		}
	case "element":
		mi, _ := s["minimum"].(float64)
		ma, _ := s["maximum"].(float64)
		if s["type"] != "integer" || mi < 1 || ma > 118 || ma == 0 {
			bad(`{"type": "integer", "minimum": 1, "maximum": 118}`)
		}
	case "cell":
		if s["type"] != "array" || items == nil || items["type"] != "number" || s["minItems"] != float64(9) || s["maxItems"] != float64(9) {
			bad("an array of exactly 9 numbers")
		}
	case "selection":
		if s["type"] != "array" || items == nil || items["type"] != "integer" {
			bad("an array of integers")
		}
	case "seed":
		if s["type"] != "integer" || s["minimum"] != float64(0) {
			bad(`{"type": "integer", "minimum": 0}`)
		}
	case "document":
		props, _ := s["properties"].(map[string]any)
		if s["type"] != "object" || props["elements"] == nil || props["positions"] == nil {
			bad("the Structure schema (§5.1)")
		}
	default:
		fs.add("fail", "§4.2", "property %q has the unknown x-megane-widget %q", name, widget)
	}
}

// checkResult checks a successful call's result (raw JSON of the MCP
// CallToolResult) against §5; doc is the document sent, if any.
func checkResult(fs *findings, bt *builderTool, raw json.RawMessage, doc map[string]any) (structure json.RawMessage) {
	var res struct {
		IsError           bool              `json:"isError"`
		Content           []json.RawMessage `json:"content"`
		StructuredContent json.RawMessage   `json:"structuredContent"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		fs.add("fail", "§5", "the result is not a CallToolResult: %v", err)
		return nil
	}
	summary := false
	for _, c := range res.Content {
		var tc struct{ Type, Text string }
		if json.Unmarshal(c, &tc) == nil && tc.Type == "text" && strings.TrimSpace(tc.Text) != "" {
			summary = true
		}
	}
	if !summary {
		fs.add("warn", "§5", "no text summary in content (LLM clients read it)")
	}
	var sc map[string]any
	if len(res.StructuredContent) == 0 || json.Unmarshal(res.StructuredContent, &sc) != nil || sc == nil {
		fs.add("fail", "§5", "no structuredContent object: Builder rejects the result")
		return nil
	}
	if bt.Output != nil {
		if why := outputProblem(bt.Output, res.StructuredContent); why != "" {
			fs.add("fail", "§5", "structuredContent does not validate against the tool's own outputSchema: %s", why)
		}
	}
	if c, ok := sc["contract"].(float64); !ok || c != bt.Contract {
		fs.add("fail", "§5", "structuredContent.contract is %s, not the tool's %v", jsonText(sc["contract"]), bt.Contract)
	}
	if _, ok := sc["provenance"].(map[string]any); !ok {
		fs.add("warn", "§7", "no provenance: Builder cannot record what made the structure")
	}
	st, _ := sc["structure"].(map[string]any)
	if st == nil {
		fs.add("fail", "§5.1", "no structure object")
		return nil
	}
	for _, why := range structureProblems(st) {
		fs.add("fail", "§5.1", "%s: Builder rejects the result", why)
	}
	if bt.Apply == "insert" && doc != nil {
		if jsonText(st["positions"]) == jsonText(doc["positions"]) {
			fs.add("fail", "§5.2", "an insert result repeats the document's atoms: return only the atoms added")
		}
	}
	return json.RawMessage(jsonText(st))
}

// structureProblems lists what makes st an invalid Structure (§5.1).
func structureProblems(st map[string]any) []string {
	var out []string
	elems := asSlice(st["elements"])
	n := len(elems)
	if st["elements"] == nil {
		return []string{"structure has no elements"}
	}
	if n > maxResultAtoms {
		out = append(out, fmt.Sprintf("%d atoms, over Builder's %d", n, maxResultAtoms))
	}
	for i, e := range elems {
		if z, ok := e.(float64); !ok || z != math.Trunc(z) || z < 1 || z > 118 {
			out = append(out, fmt.Sprintf("elements[%d] is %s, not an atomic number 1–118", i, jsonText(e)))
			break
		}
	}
	if pos := asSlice(st["positions"]); len(pos) != 3*n {
		out = append(out, fmt.Sprintf("positions has %d numbers for %d atoms (want %d)", len(pos), n, 3*n))
	}
	if cell, present := st["cell"]; !present {
		out = append(out, "cell is missing (null for a non-periodic structure)")
	} else if cell != nil && len(asSlice(cell)) != 9 {
		out = append(out, fmt.Sprintf("cell has %d numbers, not 9", len(asSlice(cell))))
	}
	bonds, present := st["bonds"]
	if !present {
		out = append(out, "bonds is missing ([] when the tool has no connectivity)")
	}
	for i, b := range asSlice(bonds) {
		pair := asSlice(b)
		if len(pair) != 2 {
			out = append(out, fmt.Sprintf("bonds[%d] is not a pair", i))
			break
		}
		a, okA := pair[0].(float64)
		c, okC := pair[1].(float64)
		if !okA || !okC || a == c || a < 0 || c < 0 || int(a) >= n || int(c) >= n {
			out = append(out, fmt.Sprintf("bonds[%d] is %s, not two distinct atoms of %d", i, jsonText(b), n))
			break
		}
	}
	if orders, ok := st["bondOrders"]; ok && orders != nil {
		o := asSlice(orders)
		if len(o) != len(asSlice(bonds)) {
			out = append(out, fmt.Sprintf("bondOrders has %d entries for %d bonds", len(o), len(asSlice(bonds))))
		}
		for i, v := range o {
			if x, ok := v.(float64); !ok || x < 1 || x > 4 || x != math.Trunc(x) {
				out = append(out, fmt.Sprintf("bondOrders[%d] is %s, not 1–4", i, jsonText(v)))
				break
			}
		}
	}
	for _, k := range perAtomArrays {
		if v, ok := st[k]; ok && v != nil && len(asSlice(v)) != n {
			out = append(out, fmt.Sprintf("%s has %d entries for %d atoms", k, len(asSlice(v)), n))
		}
	}
	if sc, ok := st["scalars"].(map[string]any); ok {
		for _, k := range sortedKeys(sc) {
			if len(asSlice(sc[k])) != n {
				out = append(out, fmt.Sprintf("scalars.%s has %d entries for %d atoms", k, len(asSlice(sc[k])), n))
			}
		}
	}
	return out
}

// checkValues checks that a property's default and examples validate
// against its schema (§4.1): the form pre-fills them, and check and LLM
// clients send them.
func checkValues(fs *findings, bt *builderTool, name string, schema map[string]any) {
	if v, ok := schema["default"]; ok {
		if why := valueProblem(bt, schema, v); why != "" {
			fs.add("fail", "§4.1", "the default of %q does not validate against its schema: %s", name, why)
		}
	}
	for i, ex := range asSlice(schema["examples"]) {
		if why := valueProblem(bt, schema, ex); why != "" {
			fs.add("fail", "§4.1", "example %d of %q does not validate against its schema: %s", i, name, why)
		}
	}
}

// valueProblem returns why v does not validate against the property schema
// s (with the input schema's $defs), or "": validate's plainer words for
// what it covers, then go-sdk's JSON Schema implementation for the rest
// (nested properties, $refs, anyOf) when it can resolve s.
func valueProblem(bt *builderTool, s map[string]any, v any) string {
	if why := validate(s, v); why != "" {
		return why
	}
	root := maps.Clone(s)
	if _, ok := root["$defs"]; !ok && bt.defs != nil {
		root["$defs"] = bt.defs
	}
	resolved, err := resolveSchema(json.RawMessage(jsonText(root)))
	if err != nil {
		return ""
	}
	if err := resolved.Validate(v); err != nil {
		return schemaError(err)
	}
	return ""
}

// validate is a small JSON Schema check for defaults and examples: type,
// enum, minimum/maximum and their exclusive forms, item count. It returns
// why v does not validate, or "".
func validate(s map[string]any, v any) string {
	if e := asSlice(s["enum"]); s["enum"] != nil {
		for _, x := range e {
			if jsonText(x) == jsonText(v) {
				return ""
			}
		}
		return fmt.Sprintf("%s is not one of the enum", jsonText(v))
	}
	switch s["type"] {
	case "integer", "number":
		x, ok := v.(float64)
		if !ok || (s["type"] == "integer" && x != math.Trunc(x)) {
			return fmt.Sprintf("%s is not %s", jsonText(v), s["type"])
		}
		if m, ok := s["minimum"].(float64); ok && x < m {
			return fmt.Sprintf("%v < minimum %v", x, m)
		}
		if m, ok := s["maximum"].(float64); ok && x > m {
			return fmt.Sprintf("%v > maximum %v", x, m)
		}
		if m, ok := s["exclusiveMinimum"].(float64); ok && x <= m {
			return fmt.Sprintf("%v ≤ exclusiveMinimum %v", x, m)
		}
		if m, ok := s["exclusiveMaximum"].(float64); ok && x >= m {
			return fmt.Sprintf("%v ≥ exclusiveMaximum %v", x, m)
		}
	case "string":
		if _, ok := v.(string); !ok {
			return fmt.Sprintf("%s is not a string", jsonText(v))
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return fmt.Sprintf("%s is not a boolean", jsonText(v))
		}
	case "array":
		a, ok := v.([]any)
		if !ok {
			return fmt.Sprintf("%s is not an array", jsonText(v))
		}
		if m, ok := s["minItems"].(float64); ok && float64(len(a)) < m {
			return fmt.Sprintf("%d items < minItems %v", len(a), m)
		}
		if m, ok := s["maxItems"].(float64); ok && float64(len(a)) > m {
			return fmt.Sprintf("%d items > maxItems %v", len(a), m)
		}
	case "object":
		if _, ok := v.(map[string]any); !ok {
			return fmt.Sprintf("%s is not an object", jsonText(v))
		}
	}
	return ""
}

// unexampled lists the required properties, at path or under it, that
// have neither a default nor examples nor a widget (§4.1: "every required
// property without a default should carry JSON Schema examples"). The
// rows of a table (an array of objects) and the fields of a fieldset are
// judged by their own required properties, as the contract's own example
// does (liquid_box's examples are on a component's count, not on
// components): an array or object whose parts all have values is sampled
// from them.
func unexampled(bt *builderTool, path string, schema map[string]any, depth int) []string {
	if _, ok := schema["default"]; ok || len(asSlice(schema["examples"])) > 0 {
		return nil
	}
	if _, ok := schema["x-megane-widget"].(string); ok {
		return nil
	}
	r := resolve(bt, schema)
	if r == nil || depth > 4 {
		return []string{path}
	}
	if _, ok := r["x-megane-widget"].(string); ok {
		return nil
	}
	object := r
	inner := path
	if r["type"] == "array" {
		items := resolve(bt, asMap(r["items"]))
		if items == nil || items["type"] != "object" {
			return []string{path}
		}
		object, inner = items, path+"[]"
	} else if r["type"] != "object" {
		return []string{path}
	}
	props := asMap(object["properties"])
	var out []string
	for _, req := range asSlice(object["required"]) {
		name, _ := req.(string)
		if sub := asMap(props[name]); sub != nil {
			out = append(out, unexampled(bt, inner+"."+name, sub, depth+1)...)
		}
	}
	return out
}

// resolve follows a local $ref into $defs (keeping the referring schema's
// own keywords, such as x-megane-widget); nil for any other $ref.
func resolve(bt *builderTool, s map[string]any) map[string]any {
	ref, ok := s["$ref"].(string)
	if !ok {
		return s
	}
	name, ok := strings.CutPrefix(ref, "#/$defs/")
	if !ok {
		return nil
	}
	target := asMap(bt.defs[name])
	if target == nil {
		return nil
	}
	out := map[string]any{}
	for k, v := range target {
		out[k] = v
	}
	for k, v := range s {
		if k != "$ref" {
			out[k] = v
		}
	}
	return out
}

func checkEnum(fs *findings, meta map[string]any, key string, allowed []string, section string) string {
	v, _ := meta[key].(string)
	if !slices.Contains(allowed, v) {
		fs.add("fail", section, "%s is %s, not one of %s", key, jsonText(meta[key]), strings.Join(allowed, ", "))
	}
	return v
}

func asSlice(v any) []any        { s, _ := v.([]any); return s }
func asMap(v any) map[string]any { m, _ := v.(map[string]any); return m }

func sortedKeys(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
