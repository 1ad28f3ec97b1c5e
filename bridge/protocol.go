package bridge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// ProtocolVersion is the version of the page protocol described in PROTOCOL.md.
const ProtocolVersion = 1

// Request and push types of the page protocol.
const (
	typeServers      = "tools:servers"
	typeConnect      = "tools:connect"
	typeCall         = "tools:call"
	typeCancel       = "tools:cancel"
	typeDisconnect   = "tools:disconnect"
	typeOpenSettings = "tools:openSettings"
	typeChunk        = "tools:chunk"
	typeProgress     = "tools:progress"
	typeClosed       = "tools:closed"
	typeClosing      = "tools:closing"
)

// Error codes: the closed set documented in PROTOCOL.md.
const (
	CodeBadRequest           = "bad-request"
	CodeUnknownType          = "unknown-type"
	CodeUnknownServer        = "unknown-server"
	CodeConfirmationRequired = "confirmation-required"
	CodeFingerprintChanged   = "fingerprint-changed"
	CodeNotConnected         = "not-connected"
	CodeUnknownTool          = "unknown-tool"
	CodeTooLargeErr          = "too-large"
	CodeTimeout              = "timeout"
	CodeCancelled            = "cancelled"
	CodeBusy                 = "busy"
	CodeServerFailed         = "server-failed"
	CodeForbidden            = "forbidden"
)

// ErrorCodes lists every error code the bridge may send, in documentation order.
var ErrorCodes = []string{
	CodeBadRequest, CodeUnknownType, CodeUnknownServer, CodeConfirmationRequired,
	CodeFingerprintChanged, CodeNotConnected, CodeUnknownTool, CodeTooLargeErr,
	CodeTimeout, CodeCancelled, CodeBusy, CodeServerFailed, CodeForbidden,
}

// WebSocket close codes, documented in PROTOCOL.md.
const (
	CloseNormal        = 1000
	CloseGoingAway     = 1001
	CloseTooBig        = 1009
	CloseBinary        = 4400
	CloseNoCredentials = 4401
	CloseForbidden     = 4403
	CloseSlowReader    = 4408
	CloseUnavailable   = 4503
)

// CloseCodes lists every close code the bridge may send.
var CloseCodes = []int{CloseNormal, CloseGoingAway, CloseTooBig, CloseBinary,
	CloseNoCredentials, CloseForbidden, CloseSlowReader, CloseUnavailable}

// protoError is a failed reply's error object. Extra fields are merged in.
type protoError struct {
	Code    string          `json:"code"`
	Message string          `json:"message"`
	Server  *serverView     `json:"server,omitempty"`
	Limit   int64           `json:"limit,omitempty"`
	Size    int64           `json:"size,omitempty"`
	Detail  json.RawMessage `json:"detail,omitempty"`
}

func (e *protoError) Error() string { return e.Code + ": " + e.Message }

func errorf(code, format string, args ...any) *protoError {
	return &protoError{Code: code, Message: oneLine(fmt.Sprintf(format, args...))}
}

// oneLine turns s into a single line of at most 500 bytes, as every message
// a person reads must be.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		parts := strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' })
		s = strings.Join(parts, " | ")
	}
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) > 500 {
		cut := 497
		for cut > 0 && s[cut]&0xC0 == 0x80 {
			cut--
		}
		s = s[:cut] + "..."
	}
	return s
}

// envelope is the part of every page message the bridge reads first.
type envelope struct {
	Type json.RawMessage `json:"type"`
	ID   json.RawMessage `json:"id"`
}

// pageMessage is a decoded page frame: its type, its id exactly as sent
// (validated to be a string or a number) and the whole frame for the
// type-specific decoding.
type pageMessage struct {
	Type  string
	ID    json.RawMessage // nil when absent or unusable
	Frame []byte
}

// idKey is the key under which a request id is tracked while in flight: the
// id's JSON text, so 1 and "1" are different ids.
func idKey(id json.RawMessage) string { return string(id) }

// decodeEnvelope reads type and id. A frame that is not one JSON object, or
// whose type or id is missing or of the wrong type, is a bad-request; the
// returned message carries whatever could be read so the reply can echo it.
func decodeEnvelope(frame []byte) (pageMessage, *protoError) {
	var msg pageMessage
	msg.Frame = frame
	trimmed := bytes.TrimLeft(frame, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return msg, errorf(CodeBadRequest, "each frame must be one JSON object")
	}
	var env envelope
	if err := json.Unmarshal(frame, &env); err != nil {
		return msg, errorf(CodeBadRequest, "frame is not valid JSON: %v", err)
	}
	if len(env.ID) > 0 {
		switch env.ID[0] {
		case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			msg.ID = env.ID
		}
	}
	if len(env.Type) == 0 || env.Type[0] != '"' {
		return msg, errorf(CodeBadRequest, "the message has no \"type\" string")
	}
	if err := json.Unmarshal(env.Type, &msg.Type); err != nil {
		return msg, errorf(CodeBadRequest, "\"type\" is not a string")
	}
	if msg.ID == nil {
		if len(env.ID) == 0 || string(env.ID) == "null" {
			return msg, errorf(CodeBadRequest, "the message has no \"id\" (a string or a number the page chooses)")
		}
		return msg, errorf(CodeBadRequest, "\"id\" must be a string or a number")
	}
	return msg, nil
}

// decodeFields decodes the frame into v, turning type mismatches into a
// bad-request that names the field.
func decodeFields(frame []byte, v any) *protoError {
	if err := json.Unmarshal(frame, v); err != nil {
		var te *json.UnmarshalTypeError
		if ok := asTypeError(err, &te); ok && te.Field != "" {
			return errorf(CodeBadRequest, "field %q must be %s", te.Field, jsonKind(te.Type.Kind().String()))
		}
		return errorf(CodeBadRequest, "malformed message: %v", err)
	}
	return nil
}

func asTypeError(err error, target **json.UnmarshalTypeError) bool {
	te, ok := err.(*json.UnmarshalTypeError)
	if ok {
		*target = te
	}
	return ok
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "int", "int64", "float64", "uint64":
		return "a number"
	case "map", "struct":
		return "an object"
	case "slice":
		return "an array"
	}
	return "of another type"
}

// buildMessage encodes an outgoing message: the fields of head (a struct or
// map marshalled normally) followed by raw fields spliced in byte for byte.
// Raw values must already be valid JSON.
func buildMessage(head any, raws ...rawField) []byte {
	b, err := json.Marshal(head)
	if err != nil {
		// head is always one of the bridge's own types; this cannot fail
		// except by programming error.
		panic(fmt.Sprintf("bridge: cannot encode message: %v", err))
	}
	if len(raws) == 0 {
		return b
	}
	size := len(b)
	for _, r := range raws {
		size += len(r.name) + len(r.value) + 4
	}
	out := make([]byte, 0, size)
	out = append(out, b[:len(b)-1]...)
	for i, r := range raws {
		if i > 0 || len(b) > 2 {
			out = append(out, ',')
		}
		out = append(out, '"')
		out = append(out, r.name...)
		out = append(out, '"', ':')
		out = append(out, r.value...)
	}
	return append(out, '}')
}

type rawField struct {
	name  string
	value []byte
}

// replyHead is the envelope of every reply.
type replyHead struct {
	Type  string          `json:"type,omitempty"`
	ID    json.RawMessage `json:"id,omitempty"`
	OK    bool            `json:"ok"`
	Error *protoError     `json:"error,omitempty"`
}

func errorReply(typ string, id json.RawMessage, e *protoError) []byte {
	return buildMessage(replyHead{Type: typ, ID: id, Error: e})
}
