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

// sleepEnv makes ServeFromEnv sleep forever: the grandchildren of
// Mode.SpawnGrandchild and Mode.SpawnDetached.
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
	// junk line after every N messages, cycling through Junk (or Banner
	// when Junk is empty, or DefaultJunk() when both are), like a server
	// that logs to stdout as it works.
	Banner     []string `json:"banner,omitempty"`
	JunkEveryN int      `json:"junkEveryN,omitempty"`
	Junk       []string `json:"junk,omitempty"`

	// PidFile, when set, is a file to which the server writes its own pid
	// (decimal, newline) first thing at start, before it reads anything;
	// the file appears whole (written aside, then renamed). If empty, no
	// file is written.
	PidFile string `json:"pidFile,omitempty"`

	// At start, before reading anything, the server writes to stderr, in
	// this order: one line of StderrLongLine bytes ("eee…"), StderrFlood
	// bytes of noise lines, StderrFloodLines numbered lines ("line 0",
	// "line 1", …), then the Stderr lines. Each is skipped when zero or
	// empty.
	//
	// StderrLongLine is a line far longer than any buffer, like a progress
	// bar that never writes a newline. StderrFlood is a flood counted in
	// bytes, streamed. StderrFloodLines is a flood counted in lines whose
	// order a test can check. Stderr lines are a server's own words: a log
	// of its start, or the last words before ExitBeforeInit's or
	// ExitAfterStart's exit.
	StderrLongLine   int64    `json:"stderrLongLine,omitempty"`
	StderrFlood      int64    `json:"stderrFlood,omitempty"`
	StderrFloodLines int      `json:"stderrFloodLines,omitempty"`
	Stderr           []string `json:"stderr,omitempty"`

	// ExitBeforeInit writes "bridgetest: fatal: simulated failure before
	// initialize" to stderr and exits with status 2 before reading anything
	// (after the pid file, the stderr output and the grandchildren above).
	ExitBeforeInit bool `json:"exitBeforeInit,omitempty"`
	// ExitAfterStart exits with status 0 after the start (the pid file, the
	// stderr output, the grandchildren), without reading stdin or writing to
	// stdout: a program that is no server, or a wrapper that prints and
	// quits. ExitBeforeInit wins when both are set.
	ExitAfterStart bool `json:"exitAfterStart,omitempty"`
	// Deaf writes Banner and then never reads stdin: the server waits until
	// it is killed (or Serve's context ends), and a client writing to it
	// blocks once the pipe is full. If false, the server reads stdin until
	// end of file.
	Deaf bool `json:"deaf,omitempty"`
	// HangInit never answers initialize (other requests are answered).
	HangInit bool `json:"hangInit,omitempty"`
	// IgnoreUnknown leaves requests for unknown methods (server/discover,
	// say) unanswered instead of answering -32601, as some servers do.
	IgnoreUnknown bool `json:"ignoreUnknown,omitempty"`
	// IgnoreSIGTERM ignores SIGTERM for the whole process; meant for child
	// processes only.
	IgnoreSIGTERM bool `json:"ignoreSIGTERM,omitempty"`
	// LingerAfterEOF keeps the process alive after stdin closes (until it is
	// killed, or Serve's context ends), like a server that does not notice
	// its client went away. With IgnoreSIGTERM only SIGKILL stops it.
	LingerAfterEOF bool `json:"lingerAfterEOF,omitempty"`
	// SpawnGrandchild starts a sleeping process (this binary) as a child in
	// the server's process group and writes its pid (decimal, newline) to
	// GrandchildPidFile. It is deliberately left running when the server
	// ends: whoever stops the server's process group must stop it too.
	// Tests should kill it by pid in their cleanup.
	SpawnGrandchild   bool   `json:"spawnGrandchild,omitempty"`
	GrandchildPidFile string `json:"grandchildPidFile,omitempty"`
	// SpawnDetached starts another sleeping process (this binary) that
	// leaves the server's process group — a session of its own on Unix; on
	// Windows a new process group without a console, still in any Job
	// Object the server is in — and writes its pid to DetachedPidFile. It
	// is left running too: killing the server's process group does not
	// reach it, so whoever stops the server must find it another way (a
	// subreaper, a Job Object). Tests should kill it by pid in their
	// cleanup.
	SpawnDetached   bool   `json:"spawnDetached,omitempty"`
	DetachedPidFile string `json:"detachedPidFile,omitempty"`
	// DetachGroupOnly makes SpawnDetached's process lead a new process
	// group in the server's session instead of a session of its own (Unix):
	// out of the keeper's group, but nothing that marks it as a stranger to
	// the bridge's Reaper either; only a cgroup holds it.
	DetachGroupOnly bool `json:"detachGroupOnly,omitempty"`
	// KillParent SIGKILLs the server's parent (the bridge's keeper) once
	// the grandchildren above are started: a server that escapes its
	// supervision (issue 28.4), which no privilege is needed for. Unix
	// only; on Windows the start fails.
	KillParent bool `json:"killParent,omitempty"`
	// IDLast writes every response's id after its result or error
	// ({"jsonrpc":"2.0","result":…,"id":1}), as encoders that keep their
	// own key order do: a client must read a whole message, however large,
	// before it knows which request it answers. If false, the id comes
	// right after "jsonrpc".
	IDLast bool `json:"idLast,omitempty"`
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
	// FixtureRequired makes a fixture call that lacks a required argument
	// of its tool's inputSchema answer with a tool error, as the Python
	// SDK's FastMCP (the reference server's) does: "Input validation
	// error: 'NAME' is a required property". If false, every call returns
	// the fixture's result.
	FixtureRequired bool `json:"fixtureRequired,omitempty"`
	// FixtureWork makes fixture calls compute before they answer, as the
	// reference server's synchronous tools do; nil answers at once.
	FixtureWork *FixtureWork `json:"fixtureWork,omitempty"`
	// ListPadBytes and ListPadDepth make every tools/list result carry
	// one more member: "padding", a string of ListPadBytes bytes, and
	// "nesting", ListPadDepth arrays nested in each other; a listing too
	// large or too deep to parse. Each is left out when zero.
	ListPadBytes int64 `json:"listPadBytes,omitempty"`
	ListPadDepth int   `json:"listPadDepth,omitempty"`
	// SelfFile, when set, is a JSON file whose "serverInfo" and
	// "instructions" values, each when present, are initialize's as sent,
	// in place of ServerInfo and Instructions: text that need not be
	// UTF-8, which the environment cannot carry to the server (the
	// keeper's re-encoding makes it valid).
	SelfFile string `json:"selfFile,omitempty"`
	// Tools are extra raw tool definitions appended to the listing. A call to
	// one of them (without a FixtureCalls entry) answers like echo.
	Tools []json.RawMessage `json:"tools,omitempty"`

	// The fields below make the server behave like a release of another
	// SDK (PythonMCP1Mode, PythonMCP2Mode); their zero values are the
	// server described on Serve.

	// Modern speaks revision 2026-07-28 only: server/discover is answered
	// with a result naming only that revision (capabilities: tools, no
	// listChanged; serverInfo in _meta), initialize is refused with -32022
	// and data.supported.
	Modern bool `json:"modern,omitempty"`
	// DiscoverCode is the JSON-RPC error code answering server/discover
	// when not Modern. If zero, -32601 (method not found).
	DiscoverCode int `json:"discoverCode,omitempty"`
	// CompleteResults gives every result of ping, tools/list and
	// tools/call (fixtures, Tools and the built-in tools but big and
	// atoms, which stream theirs) resultType "complete" and
	// _meta["io.modelcontextprotocol/serverInfo"], as mcp 2.0.0's carry.
	CompleteResults bool `json:"completeResults,omitempty"`
	// EmptyVersion makes serverInfo.version "" (mcp 2.x's default).
	EmptyVersion bool `json:"emptyVersion,omitempty"`
}

// FixtureWork is the work a fixture call does before it answers, built
// like the reference server megane-builder-tools (the Python MCP SDK,
// measured): each call runs its tool synchronously in a worker thread
// (anyio.to_thread) that holds one lock for the whole server (the module
// lock of RDKit and packmol's driver), spinning a CPU for MsPerUnit
// milliseconds per unit of its integer argument Arg (1 unit when absent).
// notifications/cancelled ends the call (no answer is sent), but with
// IgnoreCancel the worker, which nothing can stop, keeps computing and
// keeps the lock: the process stays busy, and the next call waits behind
// it (polymer_chain with length 200 kept a core at 99 % for 41 s after a
// cancel, and the next call waited 38–45 s). Without IgnoreCancel the
// worker stops at the cancel.
type FixtureWork struct {
	Arg          string `json:"arg"`
	MsPerUnit    int    `json:"msPerUnit"`
	IgnoreCancel bool   `json:"ignoreCancel,omitempty"`
}

// PythonMCP1Mode is how the official Python SDK's mcp 1.29.0 (the newest
// 1.x) behaves over stdio: revisions up to 2025-11-25, -32602 for
// server/discover, and PythonWarning on stderr at every start.
func PythonMCP1Mode() Mode {
	return Mode{Name: "python-mcp-1.29.0", Version: "1.29.0", DiscoverCode: -32602, Stderr: PythonWarning()}
}

// PythonMCP2Mode is how mcp 2.0.0 (the newest 2.x release) behaves over
// stdio: revision 2026-07-28 only, an empty serverInfo.version, results
// carrying resultType "complete" and the serverInfo in _meta.
func PythonMCP2Mode() Mode {
	return Mode{Name: "python-mcp-2.0.0", Modern: true, CompleteResults: true, EmptyVersion: true}
}

// PythonWarning is a validation warning like the one mcp 1.29.0 logs at
// every start because of server/discover: 262 lines, none longer than 80
// columns (the SDK wraps its log lines there, so a line is often a
// fragment of a word), ending in "warnings.warn(".
func PythonWarning() []string {
	text := "WARNING Failed to validate request: 1 validation error for ClientRequest " +
		"root: Input tag 'server/discover' found using 'method' does not match any of the expected tags: " +
		"'ping', 'initialize', 'completion/complete', 'logging/setLevel', 'prompts/get', 'prompts/list', " +
		"'resources/list', 'resources/templates/list', 'resources/read', 'resources/subscribe', " +
		"'resources/unsubscribe', 'tools/call', 'tools/list' [type=union_tag_invalid, input_value=" +
		"{'method': 'server/discover', 'params': {'_meta': {'io.modelcontextprotocol/protocolVersion': " +
		"'2026-07-28'}}, 'jsonrpc': '2.0', 'id': 0}, input_type=dict] For further information visit " +
		"https://errors.pydantic.dev/2.11/v/union_tag_invalid Message was: method='server/discover' " +
		"params={'_meta': {'io.modelcontextprotocol/protocolVersion': '2026-07-28'}} jsonrpc='2.0' id=0"
	var out []string
	for i := 0; len(out) < 258; i++ {
		line := fmt.Sprintf("  File \"/usr/lib/python3/site-packages/mcp/shared/session.py\", line %d, in _receive_loop: %s", 300+i, text[(i*37)%len(text):])
		for len(line) > 80 {
			out = append(out, line[:80])
			line = line[80:]
		}
		out = append(out, line)
	}
	out = append(out[:258], "  warnings.warn(", "RuntimeWarning: server/discover is not a known method", "", "INFO     Processing request of type ListToolsRequest")
	return out
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
	if m.PageSize < 0 || m.JunkEveryN < 0 || m.StderrFlood < 0 || m.StderrLongLine < 0 || m.StderrFloodLines < 0 {
		return Mode{}, fmt.Errorf("bridgetest: %s: pageSize, junkEveryN, stderrLongLine, stderrFlood and stderrFloodLines must not be negative", EnvVar)
	}
	if m.SpawnGrandchild && m.GrandchildPidFile == "" {
		return Mode{}, fmt.Errorf("bridgetest: %s: spawnGrandchild needs grandchildPidFile", EnvVar)
	}
	if m.SpawnDetached && m.DetachedPidFile == "" {
		return Mode{}, fmt.Errorf("bridgetest: %s: spawnDetached needs detachedPidFile", EnvVar)
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
	if os.Getenv(sleepEnv) != "" { // a grandchild (Mode.SpawnGrandchild, Mode.SpawnDetached)
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
	// A server that only waits to be killed (Deaf, or LingerAfterEOF after
	// its stdin ended) blocks on channels alone; where pipes are not in the
	// network poller (Windows) the runtime would call that a deadlock and
	// exit with status 2. A sleeping goroutine keeps it waiting.
	go func() {
		for {
			time.Sleep(time.Hour)
		}
	}()
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
