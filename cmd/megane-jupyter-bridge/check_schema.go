package main

// The tool's own outputSchema (§5): resolved once with the JSON Schema
// implementation go-sdk uses, and each result's structuredContent
// validated against it.

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// resolveOutputSchema resolves a tool's outputSchema (JSON); local $refs
// only, as a remote one would be fetched.
func resolveOutputSchema(raw json.RawMessage) (*jsonschema.Resolved, error) {
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	r, err := s.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("resolve: %w", err)
	}
	return r, nil
}

// outputProblem returns why structuredContent (JSON) does not validate
// against the resolved outputSchema, on one line, or "".
func outputProblem(schema *jsonschema.Resolved, structured json.RawMessage) string {
	var v any
	if err := json.Unmarshal(structured, &v); err != nil {
		return err.Error()
	}
	if err := schema.Validate(v); err != nil {
		return strings.Join(strings.Fields(err.Error()), " ")
	}
	return ""
}
