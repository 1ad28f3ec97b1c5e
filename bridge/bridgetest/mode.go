package bridgetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// EnvVar names the environment variable that makes ServeFromEnv run a
// server. Its value is a Mode as JSON.
const EnvVar = "BRIDGETEST_SERVER"

// sleepEnv makes ServeFromEnv sleep forever: the grandchild of
// Mode.SpawnGrandchild.
const sleepEnv = "BRIDGETEST_SLEEP"

// Version is the serverInfo version the servers report (unless Mode.Version
// overrides it) and the "bridgetest" entry of their provenance.
const Version = "1.0.0"

// Mode says how a stdio server behaves. The zero Mode is a well-behaved
// server named "bridgetest" offering the built-in tools (see Serve).
type Mode struct {
	// Name is serverInfo.name. If empty, "bridgetest".
	Name string `json:"name,omitempty"`
	// Version is serverInfo.version. If empty, Version.
	Version string `json:"version,omitempty"`
	// ServerInfo, when set, is initialize's serverInfo object as sent
	// (compacted), in place of {"name": Name, "version": Version}: a server
	// that describes itself with title, websiteUrl or icons.
	ServerInfo json.RawMessage `json:"serverInfo,omitempty"`
	// Instructions, when set, is initialize's instructions.
	Instructions string `json:"instructions,omitempty"`

	// Journal is a file to which every received message is appended as one
	// JSON line (see JournalEntry); several servers may share one file. If
	// empty, nothing is recorded.
	Journal string `json:"journal,omitempty"`

	// PageSize splits tools/list into pages of this many tools with
	// nextCursor. If zero, one page.
	PageSize int `json:"pageSize,omitempty"`

	// Banner lines are written to stdout before anything else, like a
	// library that prints while importing. JunkEveryN > 0 writes one more
	// junk line after every N messages, cycling through Banner (or
	// DefaultJunk() when Banner is empty).
	Banner     []string `json:"banner,omitempty"`
	JunkEveryN int      `json:"junkEveryN,omitempty"`

	// ExitBeforeInit writes "bridgetest: fatal: simulated failure before
	// initialize" to stderr and exits with status 2 before reading anything.
	ExitBeforeInit bool `json:"exitBeforeInit,omitempty"`
	// HangInit never answers initialize (other requests are answered).
	HangInit bool `json:"hangInit,omitempty"`
	// IgnoreUnknown leaves requests for unknown methods (server/discover,
	// say) unanswered instead of answering -32601, as some servers do.
	IgnoreUnknown bool `json:"ignoreUnknown,omitempty"`
	// StderrFlood writes this many bytes of noise lines to stderr at start,
	// streamed, before serving.
	StderrFlood int64 `json:"stderrFlood,omitempty"`
	// IgnoreSIGTERM ignores SIGTERM for the whole process; meant for child
	// processes only.
	IgnoreSIGTERM bool `json:"ignoreSIGTERM,omitempty"`
	// LingerAfterEOF keeps the process alive after stdin closes (until it is
	// killed, or Serve's context ends), like a server that does not notice
	// its client went away. With IgnoreSIGTERM only SIGKILL stops it.
	LingerAfterEOF bool `json:"lingerAfterEOF,omitempty"`
	// SpawnGrandchild starts a sleeping process (this binary) as a child in
	// the server's process group and writes its pid (decimal, newline) to GrandchildPidFile. It is
	// deliberately left running when the server ends: whoever stops the
	// server's process group must stop it too. Tests should kill it by pid in
	// their cleanup.
	SpawnGrandchild   bool   `json:"spawnGrandchild,omitempty"`
	GrandchildPidFile string `json:"grandchildPidFile,omitempty"`
	// PingAfterInit sends a ping request (id "bridgetest-ping") after
	// notifications/initialized; the answer is journaled with Response set.
	PingAfterInit bool `json:"pingAfterInit,omitempty"`

	// FixtureList is a JSON file with a "tools" array (such as the
	// megane-reference tools-list.json). When set, tools/list serves that
	// array instead of the built-in tools, each tool compacted with
	// json.Compact (a stdio message must be one line). A bridge is expected
	// to pass these compacted bytes through unchanged.
	FixtureList string `json:"fixtureList,omitempty"`
	// FixtureCalls maps a tool name to a call fixture file with keys name,
	// arguments and result; a call to that tool returns the file's result,
	// compacted, whatever the arguments.
	FixtureCalls map[string]string `json:"fixtureCalls,omitempty"`
	// Tools are extra raw tool definitions appended to the listing. A call to
	// one of them (without a FixtureCalls entry) answers like echo.
	Tools []json.RawMessage `json:"tools,omitempty"`
}

// DefaultJunk returns the junk lines used when Mode.Banner is empty: a
// library's chatter, JSON that is not JSON-RPC, and a blank line.
func DefaultJunk() []string {
	return []string{"Loading RDKit...", `{"not":"jsonrpc"}`, ""}
}

// Env returns the environment entry ("BRIDGETEST_SERVER=...") that makes a
// re-executed test binary serve m.
func (m Mode) Env() string {
	b, err := json.Marshal(m)
	if err != nil { // Mode holds only marshalable fields
		panic(err)
	}
	return EnvVar + "=" + string(b)
}

// ParseMode decodes a Mode from JSON, refusing unknown fields.
func ParseMode(spec string) (Mode, error) {
	var m Mode
	dec := json.NewDecoder(strings.NewReader(spec))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return Mode{}, fmt.Errorf("bridgetest: decode %s: %w", EnvVar, err)
	}
	if m.PageSize < 0 || m.JunkEveryN < 0 || m.StderrFlood < 0 {
		return Mode{}, fmt.Errorf("bridgetest: %s: pageSize, junkEveryN and stderrFlood must not be negative", EnvVar)
	}
	if m.SpawnGrandchild && m.GrandchildPidFile == "" {
		return Mode{}, fmt.Errorf("bridgetest: %s: spawnGrandchild needs grandchildPidFile", EnvVar)
	}
	return m, nil
}

// ExitError is how Serve reports a simulated process exit (a crash, or
// ExitBeforeInit) when it runs in-process; ServeFromEnv turns it into the
// process's exit status.
type ExitError struct{ Code int }

func (e *ExitError) Error() string {
	return fmt.Sprintf("bridgetest: simulated exit with status %d", e.Code)
}

// ServeFromEnv serves the Mode in BRIDGETEST_SERVER on stdin, stdout and
// stderr, if that variable is set, and reports whether it did. A simulated
// exit ends the process at once with its status; a bad spec or an I/O error
// exits with status 1 and a message on stderr; a normal end returns true and
// the caller exits:
//
//	func TestMain(m *testing.M) {
//		if bridgetest.ServeFromEnv() {
//			os.Exit(0)
//		}
//		os.Exit(m.Run())
//	}
func ServeFromEnv() bool {
	if os.Getenv(sleepEnv) != "" { // a grandchild (Mode.SpawnGrandchild)
		for {
			time.Sleep(time.Hour)
		}
	}
	spec, ok := os.LookupEnv(EnvVar)
	if !ok {
		return false
	}
	mode, err := ParseMode(spec)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	err = serve(context.Background(), os.Stdin, os.Stdout, os.Stderr, mode, os.Exit)
	var exit *ExitError
	if errors.As(err, &exit) {
		os.Exit(exit.Code)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bridgetest:", err)
		os.Exit(1)
	}
	return true
}
