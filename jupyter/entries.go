package jupyter

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/child"
)

// source says where an entry comes from, for messages and for bridge.ServerSpec.
type source struct {
	file  string // "" for the built-in default
	level string
	line  func(key string) int
}

func (s source) display() string {
	if s.file == "" {
		return "the built-in default"
	}
	return s.file
}

// entryFields are the keys an entry may have.
var entryFields = []string{"type", "command", "args", "env", "cwd", "url", "headers"}

// substitution context for ${...} variables.
type substCtx struct {
	root  string
	home  string
	vars  map[string]string
	strip func(string) bool // variables that ${env:NAME} may not read
}

// decodeEntry validates one entry (raw is its JSON value, not null) and
// returns it ready to use, or the problems that stop it.
func decodeEntry(name string, raw json.RawMessage, src source, e env, sc substCtx) (bridge.ServerSpec, []bridge.Problem) {
	var probs []bridge.Problem
	bad := func(key, format string, a ...any) {
		msg := fmt.Sprintf(format, a...)
		loc := src.display()
		if src.line != nil {
			if l := src.line(key); l > 0 {
				loc = fmt.Sprintf("%s:%d", loc, l)
			}
		}
		probs = append(probs, bridge.Problem{File: src.file, Server: name, Key: key,
			Message: fmt.Sprintf("%s: server %q: %s", loc, name, msg)})
	}
	if msg := checkName(name); msg != "" {
		bad("", "%s", msg)
		return bridge.ServerSpec{}, probs
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		bad("", "the entry must be an object with command (stdio) or url (http), found %s", jsonKind(raw))
		return bridge.ServerSpec{}, probs
	}
	for _, k := range sortedKeys(obj) {
		if !contains(entryFields, k) {
			hint := "allowed keys are " + strings.Join(entryFields, ", ")
			if name == "mcpServers" {
				hint = "MeganeBuilderTools.mcp_servers holds the entries themselves: remove the mcpServers wrapper"
			}
			bad(k, "unknown key %q: remove it (%s)", k, hint)
		}
	}
	str := func(k string) (string, bool) {
		v, ok := obj[k]
		if !ok {
			return "", false
		}
		var s string
		if jsonKind(v) != "a string" || json.Unmarshal(v, &s) != nil {
			bad(k, "%s must be a string, found %s", k, jsonKind(v))
			return "", false
		}
		return s, true
	}
	strList := func(k string) []string {
		v, ok := obj[k]
		if !ok {
			return nil
		}
		var l []string
		if json.Unmarshal(v, &l) != nil || l == nil {
			bad(k, "%s must be an array of strings, found %s", k, jsonKind(v))
			return nil
		}
		return l
	}
	strMap := func(k string) map[string]string {
		v, ok := obj[k]
		if !ok {
			return nil
		}
		var m map[string]string
		if json.Unmarshal(v, &m) != nil || m == nil {
			bad(k, "%s must be an object of strings, found %s", k, jsonKind(v))
			return nil
		}
		return m
	}
	typ, hasType := str("type")
	command, hasCommand := str("command")
	urlStr, hasURL := str("url")
	args := strList("args")
	envMap := strMap("env")
	cwd, hasCwd := str("cwd")
	headers := strMap("headers")

	transport := ""
	switch {
	case hasType && typ != bridge.TransportStdio && typ != bridge.TransportHTTP:
		bad("type", "type must be \"stdio\" or \"http\", found %q", typ)
	case hasCommand && hasURL:
		bad("", "an entry has either command (stdio) or url (http), not both")
	case hasCommand:
		transport = bridge.TransportStdio
	case hasURL:
		transport = bridge.TransportHTTP
	case len(probs) == 0:
		bad("", "the entry needs command (a stdio server) or url (a Streamable HTTP server)")
	}
	if hasType && transport != "" && typ != transport {
		bad("type", "type is %q but the entry has %s", typ, map[string]string{bridge.TransportStdio: "command", bridge.TransportHTTP: "url"}[transport])
	}
	if transport == bridge.TransportStdio {
		for _, k := range []string{"headers"} {
			if _, ok := obj[k]; ok {
				bad(k, "%s applies to http entries only; remove it", k)
			}
		}
	}
	if transport == bridge.TransportHTTP {
		for _, k := range []string{"args", "env", "cwd"} {
			if _, ok := obj[k]; ok {
				bad(k, "%s applies to stdio entries only; remove it", k)
			}
		}
	}
	if len(probs) > 0 {
		return bridge.ServerSpec{}, probs
	}

	sub := func(key, s string) string {
		out, err := substitute(s, sc)
		if err != nil {
			bad(key, "%v", err)
		}
		return out
	}
	ent := bridge.ServerSpec{Name: name, Transport: transport, Source: src.file, Level: src.level}
	if src.file == "" {
		ent.Source = LevelDefault
	}
	switch transport {
	case bridge.TransportStdio:
		command = sub("command", command)
		for i, a := range args {
			args[i] = sub(fmt.Sprintf("args[%d]", i), a)
			if strings.ContainsRune(args[i], 0) {
				bad("args", "args[%d] contains a NUL character", i)
			}
		}
		for _, k := range sortedKeys(envMap) {
			if k == "" || strings.ContainsAny(k, "=\x00") {
				bad("env", "env name %q is not a valid variable name", k)
				continue
			}
			envMap[k] = sub("env."+k, envMap[k])
			if strings.ContainsRune(envMap[k], 0) {
				bad("env", "env %s contains a NUL character", k)
			}
		}
		if hasCwd {
			cwd = sub("cwd", cwd)
			if cwd == "" {
				bad("cwd", "cwd is empty: remove it or name a directory")
			} else if !filepath.IsAbs(cwd) {
				cwd = filepath.Join(sc.root, cwd)
			}
		}
		if strings.TrimSpace(command) == "" {
			bad("command", "command is empty")
		} else if strings.ContainsRune(command, 0) {
			bad("command", "command contains a NUL character")
		}
		if len(probs) > 0 {
			return bridge.ServerSpec{}, probs
		}
		ent.Command, ent.Args, ent.Env, ent.Cwd = command, args, envMap, filepath.Clean(cwd)
		if cwd == "" {
			ent.Cwd = ""
		}
		resolveCommand(&ent, e, src)
		if ent.Cwd != "" {
			if fi, err := os.Stat(ent.Cwd); err != nil || !fi.IsDir() {
				ent.Warnings = append(ent.Warnings, fmt.Sprintf("%s: server %q: cwd %s is not a directory; create it or fix cwd", src.display(), name, ent.Cwd))
			}
		}
	case bridge.TransportHTTP:
		urlStr = sub("url", urlStr)
		for _, k := range sortedKeys(headers) {
			if !validHeaderName(k) {
				bad("headers", "header name %q is not a valid HTTP header name", k)
				continue
			}
			headers[k] = sub("headers."+k, headers[k])
			if strings.ContainsAny(headers[k], "\r\n\x00") {
				bad("headers", "header %s contains a line break or NUL", k)
			}
		}
		if len(probs) > 0 {
			return bridge.ServerSpec{}, probs
		}
		if msg := checkURL(urlStr); msg != "" {
			bad("url", "%s", msg)
			return bridge.ServerSpec{}, probs
		}
		ent.URL, ent.Headers = urlStr, headers
	}
	ent.Fingerprint = Fingerprint(ent)
	return ent, nil
}

// resolveCommand makes ent.Command absolute: a bare name is looked up on
// PATH, a relative path is taken relative to cwd (or the server root).
// When that fails the command is kept as written with a warning.
func resolveCommand(ent *bridge.ServerSpec, e env, src source) {
	c := ent.Command
	switch {
	case filepath.IsAbs(c):
		if !child.IsExecutable(c) {
			ent.Warnings = append(ent.Warnings, fmt.Sprintf("%s: server %q: command %s does not exist or is not executable; install it or fix command", src.display(), ent.Name, c))
		}
	case child.IsPathName(c):
		base := ent.Cwd
		if base == "" {
			base = e.root
		}
		abs := filepath.Join(base, c)
		ent.Command = abs
		if !child.IsExecutable(abs) {
			ent.Warnings = append(ent.Warnings, fmt.Sprintf("%s: server %q: command %s (%s) does not exist or is not executable; install it or fix command", src.display(), ent.Name, c, abs))
		}
	case c == SelfCommand && e.self != "":
		ent.Command = e.self
	default:
		if p, ok := e.lookPath(c); ok {
			ent.Command = p
		} else {
			ent.Warnings = append(ent.Warnings, fmt.Sprintf("%s: server %q: command %q was not found on PATH; install it or give its absolute path", src.display(), ent.Name, c))
		}
	}
}

// SelfCommand is the command name that runs the bridge's own binary
// (Options.Self).
const SelfCommand = "megane-jupyter-bridge"

// checkName returns why name cannot name a server, or "".
func checkName(name string) string {
	switch {
	case name == "":
		return "the server name is empty"
	case utf8.RuneCountInString(name) > 128:
		return "the server name is longer than 128 characters"
	case !utf8.ValidString(name):
		return "the server name is not valid UTF-8"
	}
	for _, r := range name {
		if unicode.IsControl(r) {
			return "the server name contains a control character"
		}
	}
	return ""
}

// checkURL returns why u may not be used, or "".
func checkURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return fmt.Sprintf("url %q is not a URL (%v)", u, err)
	}
	switch p.Scheme {
	case "https":
	case "http":
		if !bridge.LoopbackHost(p.Hostname()) {
			return fmt.Sprintf("url must use https unless the host is loopback (found %s)", p.Host)
		}
	default:
		return fmt.Sprintf("url must start with https:// (or http:// on a loopback host), found %q", u)
	}
	if p.Host == "" || p.Hostname() == "" {
		return fmt.Sprintf("url %q has no host", u)
	}
	if p.User != nil {
		return "url must not contain a user name or password: send credentials in headers"
	}
	if p.Fragment != "" {
		return "url must not contain a #fragment"
	}
	return ""
}

func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("\"(),/:;<=>?@[\\]{}", c) >= 0 {
			return false
		}
	}
	return true
}

// substitute replaces ${workspaceFolder}, ${userHome} and ${env:NAME} in s.
// Any other ${...} is an error, and so is an unterminated one; a $ not
// followed by { is kept.
func substitute(s string, sc substCtx) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		b.WriteString(s[:i])
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			return "", fmt.Errorf("unterminated variable in %q: close it with }", s)
		}
		name := s[i+2 : i+j]
		s = s[i+j+1:]
		switch {
		case name == "workspaceFolder":
			b.WriteString(sc.root)
		case name == "userHome":
			b.WriteString(sc.home)
		case strings.HasPrefix(name, "env:"):
			v := name[len("env:"):]
			if v == "" || strings.ContainsAny(v, "=\x00") {
				return "", fmt.Errorf("${%s} does not name an environment variable", name)
			}
			if sc.strip != nil && sc.strip(v) {
				return "", fmt.Errorf("${env:%s} names a variable the bridge removes from tool servers (a credential); it cannot be passed on", v)
			}
			b.WriteString(sc.vars[v])
		default:
			return "", fmt.Errorf("unknown variable ${%s}: use ${workspaceFolder}, ${userHome} or ${env:NAME}", name)
		}
	}
}

// Fingerprint returns "sha256:" and the lowercase hex SHA-256 of the
// entry's canonical encoding (CONFIG.md, "Fingerprints"): a sequence of
// netstrings ("<decimal length>:<bytes>,"), starting with
// "megane-fingerprint-1" and the transport; for stdio then the command,
// the number of args in decimal, each arg, the number of env variables,
// each name and value in byte order of the names, and the cwd; for http
// the URL, the number of headers, and each header name (lowercased) and
// value in byte order of the lowercased names.
func Fingerprint(ent bridge.ServerSpec) string {
	var b bytes.Buffer
	ns := func(s string) {
		b.WriteString(strconv.Itoa(len(s)))
		b.WriteByte(':')
		b.WriteString(s)
		b.WriteByte(',')
	}
	ns("megane-fingerprint-1")
	ns(ent.Transport)
	if ent.Transport == bridge.TransportHTTP {
		ns(ent.URL)
		h := make(map[string]string, len(ent.Headers))
		for k, v := range ent.Headers {
			h[strings.ToLower(k)] = v
		}
		ns(strconv.Itoa(len(h)))
		for _, k := range sortedKeys(h) {
			ns(k)
			ns(h[k])
		}
	} else {
		ns(ent.Command)
		ns(strconv.Itoa(len(ent.Args)))
		for _, a := range ent.Args {
			ns(a)
		}
		ns(strconv.Itoa(len(ent.Env)))
		for _, k := range sortedKeys(ent.Env) {
			ns(k)
			ns(ent.Env[k])
		}
		ns(ent.Cwd)
	}
	sum := sha256.Sum256(b.Bytes())
	return "sha256:" + hex.EncodeToString(sum[:])
}

func jsonKind(raw json.RawMessage) string {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return "nothing"
	}
	switch t[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
