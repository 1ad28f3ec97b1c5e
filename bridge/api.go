package bridge

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"sort"
	"time"
)

// Transport names used in ServerSpec.Transport.
const (
	TransportStdio = "stdio"
	TransportHTTP  = "http"
)

// ServerSpec is one usable tool server, after configuration has been read,
// validated and its variables substituted: the one type for a tool server
// that the jupyter package produces, the bridge serves and the CLI prints.
// The bridge treats it as immutable. Whoever builds a ServerSpec (the jupyter
// package, or a test) fills every field that applies to its transport and
// computes Fingerprint (jupyter.Fingerprint).
type ServerSpec struct {
	Name      string // the key of the mcpServers entry
	Transport string // TransportStdio or TransportHTTP

	// stdio
	Command string            // resolved absolute path when it could be resolved
	Args    []string          //
	Env     map[string]string // the entry's env, added to the bridge's environment
	Cwd     string            // empty means the bridge's working directory

	// http
	URL     string
	Headers map[string]string // sent on every request to URL; values are never shown to pages

	Source      string // "default" or the file that defined the entry
	Level       string // where Source sits in Jupyter's precedence: "default", "user", "env", "system", "admin" or "file" (the jupyter package's Level* names); "" when not from configuration
	Fingerprint string // stable hash over (command, args, env, cwd) or (url, headers)

	// Problems that do not stop the entry from being offered (for example
	// "uvx not found"); shown by tools:servers beside the entry.
	Warnings []string
}

// ServerDescription is a server as people see it, in tools:servers and in
// the CLI: what runs or is reached, where it is configured, and its
// fingerprint. Env and header values are never included, only their names.
type ServerDescription struct {
	Name        string   `json:"name"`
	Transport   string   `json:"transport"`
	Command     string   `json:"command,omitempty"`
	Args        []string `json:"args,omitempty"`
	CommandLine string   `json:"commandLine,omitempty"` // the command and args quoted for a POSIX shell
	Cwd         string   `json:"cwd,omitempty"`
	URL         string   `json:"url,omitempty"`
	Env         []string `json:"env"`     // names, sorted
	Headers     []string `json:"headers"` // names, sorted
	Source      string   `json:"source"`
	Fingerprint string   `json:"fingerprint"`
	Warnings    []string `json:"warnings,omitempty"`
}

// Describe returns the description of s.
func (s ServerSpec) Describe() ServerDescription {
	d := ServerDescription{
		Name: s.Name, Transport: s.Transport, Source: s.Source,
		Fingerprint: s.Fingerprint, Warnings: s.Warnings,
		Env: sortedKeys(s.Env), Headers: sortedKeys(s.Headers),
	}
	if s.Transport == TransportStdio {
		d.Command, d.Args, d.Cwd = s.Command, s.Args, s.Cwd
		if d.Args == nil {
			d.Args = []string{}
		}
		d.CommandLine = s.CommandLine()
	} else {
		d.URL = s.URL
	}
	return d
}

// MarshalJSON encodes s as its Describe: a ServerSpec written anywhere
// (a CLI's JSON, a log, a test's output) carries the names of its env
// variables and headers, never their values, which are credentials.
// LogValue and String keep the same promise for slog and fmt.
func (s ServerSpec) MarshalJSON() ([]byte, error) { return json.Marshal(s.Describe()) }

// LogValue is s as slog records it: its Describe.
func (s ServerSpec) LogValue() slog.Value { return slog.AnyValue(s.Describe()) }

// String is the name, the transport, and what runs or is reached.
func (s ServerSpec) String() string {
	if s.Transport == TransportHTTP {
		return s.Name + " (" + s.Transport + "): " + s.URL
	}
	return s.Name + " (" + s.Transport + "): " + s.CommandLine()
}

// CommandLine is the command and args quoted for a POSIX shell (ShellQuote):
// what a person would type to run a stdio server by hand.
func (s ServerSpec) CommandLine() string {
	return ShellQuote(append([]string{s.Command}, s.Args...))
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Problem is a configuration problem a page or an admin can act on: an
// entry that is not offered, a file that could not be read, a setting that
// is ignored. Message is one line a person can act on; it names the file and
// the entry.
type Problem struct {
	File    string `json:"file,omitempty"`
	Server  string `json:"server,omitempty"`
	Key     string `json:"key,omitempty"`
	Message string `json:"message"`
}

func (p Problem) String() string { return p.Message }

// SettingsFile describes one configuration file for tools:openSettings.
type SettingsFile struct {
	Path     string `json:"path"`
	Exists   bool   `json:"exists"`
	Relative string `json:"relative,omitempty"` // relative to the server root when inside it
	Level    string `json:"level,omitempty"`    // "user", "env", "system", "admin", "file"
}

// Settings answers tools:openSettings.
type Settings struct {
	Files    []SettingsFile `json:"files"`    // the files that define the servers now
	UserFile *SettingsFile  `json:"userFile"` // the file a person would edit; nil when none applies
}

// Catalog is the bridge's view of the configuration. The bridge calls it on
// every tools:servers and tools:connect, and for tools:call at most once per
// Options.ConfigRecheck, so an implementation re-reads (or caches with a
// freshness check) and never blocks for long.
type Catalog interface {
	Snapshot(ctx context.Context) Snapshot
}

// Snapshot is the configuration as read at one moment.
type Snapshot struct {
	Servers  []ServerSpec
	Problems []Problem
	Settings Settings
	// Forbidden maps names the configuration defines but the admin's
	// settings exclude to a one-line reason: a connect to one is answered
	// forbidden rather than unknown-server.
	Forbidden map[string]string
}

// StaticCatalog is a Catalog that never changes, for tests and --servers files
// read once.
type StaticCatalog Snapshot

// Snapshot implements Catalog.
func (c StaticCatalog) Snapshot(context.Context) Snapshot { return Snapshot(c) }

// CatalogFunc adapts a function to Catalog.
type CatalogFunc func(ctx context.Context) Snapshot

// Snapshot implements Catalog.
func (f CatalogFunc) Snapshot(ctx context.Context) Snapshot { return f(ctx) }

// Admission is a Gate's decision to let a socket open.
type Admission struct {
	// User names the person, for logs and confirmation receipts. Never a token.
	User string
	// Recheck, if non-nil, is called periodically while the socket is open
	// (every RecheckInterval). A non-nil *Refusal closes the socket with its code.
	Recheck func(ctx context.Context) *Refusal
	// RecheckInterval; if zero and Recheck is set, 60s.
	RecheckInterval time.Duration
}

// Refusal says why a socket may not open (or must close).
type Refusal struct {
	// HTTPStatus, if non-zero, refuses the upgrade with this plain HTTP status
	// (used for Origin/Host failures on a direct connection). Otherwise the
	// upgrade is accepted and the socket is closed at once with CloseCode, so
	// that the reason survives jupyter-server-proxy (which turns an HTTP
	// refusal into a bare 1006 drop).
	HTTPStatus int
	CloseCode  int    // 4401, 4403, 4503, ... see PROTOCOL.md
	Reason     string // one line a person can act on; never contains a credential
}

func (r *Refusal) Error() string { return r.Reason }

// Gate decides whether an upgrade request may open a socket. The auth
// package implements it; the bridge never inspects credentials itself.
type Gate interface {
	Admit(ctx context.Context, r *http.Request) (Admission, *Refusal)
}

// Approvals issues and checks confirmation receipts (see PROTOCOL.md,
// "Confirmation"). The auth package implements it.
type Approvals interface {
	// Issue returns a signed receipt bound to user, server and fingerprint.
	Issue(user, server, fingerprint string) (string, error)
	// Check returns nil only if receipt is valid for exactly this user,
	// server and fingerprint.
	Check(receipt, user, server, fingerprint string) error
}
