package main

// The tool's own outputSchema (§5): resolved once with the JSON Schema
// implementation go-sdk uses, and each result's structuredContent
// validated against it.

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// resolveSchema resolves a JSON Schema (JSON), such as a tool's
// outputSchema; local $refs only, as a remote one would be fetched.
func resolveSchema(raw json.RawMessage) (*jsonschema.Resolved, error) {
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
		return schemaError(err)
	}
	return ""
}

// ratNumber matches the numbers jsonschema-go writes as fractions
// ("-1/1") or with six decimals ("0.000000").
var ratNumber = regexp.MustCompile(`\b(\d+)(?:/1\b|\.000000\b)`)

// schemaError is a validation error on one line, whole numbers plain.
func schemaError(err error) string {
	return ratNumber.ReplaceAllString(strings.Join(strings.Fields(err.Error()), " "), "$1")
}
