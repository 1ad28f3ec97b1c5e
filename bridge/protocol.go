package bridge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
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
	CodeSessionUnknown       = "session-unknown"
	CodeSessionInUse         = "session-in-use"
	CodeDropped              = "dropped"
)

// ErrorCodes lists every error code the bridge may send, in documentation order.
var ErrorCodes = []string{
	CodeBadRequest, CodeUnknownType, CodeUnknownServer, CodeConfirmationRequired,
	CodeFingerprintChanged, CodeNotConnected, CodeUnknownTool, CodeTooLargeErr,
	CodeTimeout, CodeCancelled, CodeBusy, CodeServerFailed, CodeForbidden,
	CodeSessionUnknown, CodeSessionInUse, CodeDropped,
}

// WebSocket close codes, documented in PROTOCOL.md.
const (
	CloseNormal        = 1000
	CloseGoingAway     = 1001
	CloseTooBig        = 1009
	CloseTryLater      = 1013 // the inbound memory of all tabs is full (Options.InboundMemory)
	CloseBinary        = 4400
	CloseNoCredentials = 4401
	CloseForbidden     = 4403
	CloseSlowReader    = 4408
	CloseUnavailable   = 4503
)

// CloseCodes lists every close code the bridge may send.
var CloseCodes = []int{CloseNormal, CloseGoingAway, CloseTooBig, CloseTryLater, CloseBinary,
	CloseNoCredentials, CloseForbidden, CloseSlowReader, CloseUnavailable}

// protoError is a failed reply's error object. Extra fields are merged in.
type protoError struct {
	Code    string          `json:"code"`
	Message string          `json:"message"`
	Server  *serverView     `json:"server,omitempty"`
	Limit   int64           `json:"limit,omitempty"`
	Size    int64           `json:"size,omitempty"`
	Detail  json.RawMessage `json:"detail,omitempty"`
	// Stderr is the server's latest stderr lines when its start failed
	// (session.stderrTail).
	Stderr []string `json:"stderr,omitempty"`
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
	idNotText := false // an id a reply cannot echo, since a reply must be text
	if len(env.ID) > 0 {
		switch env.ID[0] {
		case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			if utf8.Valid(env.ID) {
				msg.ID = env.ID
			} else {
				idNotText = true
			}
		}
	}
	if len(env.Type) == 0 || env.Type[0] != '"' {
		return msg, errorf(CodeBadRequest, "the message has no \"type\" string")
	}
	if err := json.Unmarshal(env.Type, &msg.Type); err != nil {
		return msg, errorf(CodeBadRequest, "\"type\" is not a string")
	}
	if msg.ID == nil && !idNotText {
		if len(env.ID) == 0 || string(env.ID) == "null" {
			return msg, errorf(CodeBadRequest, "the message has no \"id\" (a string or a number the page chooses)")
		}
		return msg, errorf(CodeBadRequest, "\"id\" must be a string or a number")
	}
	if at, what := notText(frame); at >= 0 {
		where := ""
		if field := topField(frame, at); field != "" {
			where = " (in " + strconv.Quote(field) + ")"
		}
		return msg, errorf(CodeBadRequest, "byte %d of the message%s is %s: JSON text must be Unicode in UTF-8, and the bridge neither passes on nor replaces what is not", at, where, what)
	}
	return msg, nil
}

// invalidUTF8At returns the offset of the first byte of b that does not
// begin a UTF-8 sequence, or -1 if b is UTF-8. A server's raw text (a
// result, a tool) goes to the page in a text frame, which must be UTF-8:
// browsers drop a socket that sends anything else.
func invalidUTF8At(b []byte) int {
	if utf8.Valid(b) {
		return -1
	}
	for i := 0; i < len(b); {
		if b[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return -1
}

// validText returns raw JSON text with every byte that is not UTF-8
// replaced by U+FFFD (such bytes can only stand inside strings, so the
// JSON stays valid): what the bridge does with a server's description of
// itself, which is shown, never passed on.
func validText(raw []byte) []byte {
	if raw == nil || utf8.Valid(raw) {
		return raw
	}
	return bytes.ToValidUTF8(raw, []byte("\uFFFD"))
}

// notText returns the offset in frame, a JSON text, of the first thing that
// is not Unicode text, and what it is; or -1. That is a byte sequence that is
// not UTF-8, or a \u escape of a UTF-16 surrogate that is not half of a
// pair (JSON lets one be written; it is no character). Either would reach a
// tool server changed, since JSON decoders (Go's among them) turn both into
// U+FFFD, so such a message is refused rather than altered.
func notText(frame []byte) (int, string) {
	if !utf8.Valid(frame) {
		for i := 0; i < len(frame); {
			r, n := utf8.DecodeRune(frame[i:])
			if r == utf8.RuneError && n == 1 {
				return i, fmt.Sprintf("0x%02x, not UTF-8", frame[i])
			}
			i += n
		}
	}
	for i := 0; ; {
		k := bytes.Index(frame[i:], []byte(`\u`))
		if k < 0 {
			return -1, ""
		}
		k += i
		// An escape only if the backslash is not itself escaped: an odd
		// run of backslashes ends at k. (Outside strings a valid JSON text
		// has no backslash.)
		run := 0
		for j := k; j >= 0 && frame[j] == '\\'; j-- {
			run++
		}
		i = k + 2
		if run%2 == 0 {
			continue
		}
		hi, ok := hex4(frame, k+2)
		if !ok || hi < 0xD800 || hi > 0xDFFF {
			continue
		}
		if hi < 0xDC00 && k+12 <= len(frame) && frame[k+6] == '\\' && frame[k+7] == 'u' {
			if lo, ok := hex4(frame, k+8); ok && lo >= 0xDC00 && lo <= 0xDFFF {
				i = k + 12
				continue
			}
		}
		return k, "an escaped lone UTF-16 surrogate (" + string(frame[k:k+6]) + "), not a character"
	}
}

// hex4 reads the four hex digits at frame[at:].
func hex4(frame []byte, at int) (uint64, bool) {
	if at+4 > len(frame) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(frame[at:at+4]), 16, 16)
	return v, err == nil
}

// topField names the member of frame's top-level object whose value holds
// offset at, or "" when none does.
func topField(frame []byte, at int) string {
	dec := json.NewDecoder(bytes.NewReader(frame))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return ""
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return ""
		}
		if int(dec.InputOffset()) > at {
			return key
		}
	}
	return ""
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
