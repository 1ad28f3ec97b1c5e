package bridgetest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"sync"
)

// JournalEntry is one line of a Mode.Journal file. The first entry of each
// server process has Start set; every other entry is one message the server
// received.
type JournalEntry struct {
	Pid int `json:"pid"`

	// Start entries: the server's environment variable names (never their
	// values), working directory and arguments.
	Start bool     `json:"start,omitempty"`
	Env   []string `json:"env,omitempty"`
	Cwd   string   `json:"cwd,omitempty"`
	Args  []string `json:"args,omitempty"`

	// Method is the received method; empty for a response or a line that
	// was not JSON-RPC.
	Method string          `json:"method,omitempty"`
	ID     json.RawMessage `json:"id,omitempty"`
	// Tool and ProgressToken are set for tools/call.
	Tool          string          `json:"tool,omitempty"`
	ProgressToken json.RawMessage `json:"progressToken,omitempty"`
	// ProtocolVersion is the version an initialize asked for, and
	// Capabilities the client capabilities it advertised.
	ProtocolVersion string          `json:"protocolVersion,omitempty"`
	Capabilities    json.RawMessage `json:"capabilities,omitempty"`
	// Params are the params of an initialize or a server/discover exactly
	// as received, so a test can assert the whole handshake a client sends.
	Params json.RawMessage `json:"params,omitempty"`
	// Cancelled is the requestId of a notifications/cancelled; Matched says
	// whether a call with that id was in flight.
	Cancelled json.RawMessage `json:"cancelled,omitempty"`
	Matched   *bool           `json:"matched,omitempty"`
	// Unknown marks a method answered with -32601.
	Unknown bool `json:"unknown,omitempty"`
	// Response is the id of a response the client sent (to PingAfterInit).
	Response json.RawMessage `json:"response,omitempty"`
	// ParseError marks a line that was not a JSON object.
	ParseError bool `json:"parseError,omitempty"`
}

// journal appends entries to a file, one write per line so that several
// processes can share the file.
type journal struct {
	mu sync.Mutex // guards f
	f  *os.File   // nil when no journal was asked for
}

func openJournal(path string) (*journal, error) {
	if path == "" {
		return &journal{}, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open journal: %w", err)
	}
	return &journal{f: f}, nil
}

func (j *journal) add(e JournalEntry) {
	if j.f == nil {
		return
	}
	e.Pid = os.Getpid()
	b, err := json.Marshal(e)
	if err != nil {
		return
	}
	b = append(b, '\n')
	j.mu.Lock()
	defer j.mu.Unlock()
	_, _ = j.f.Write(b) // a journal that cannot be written fails the test reading it
}

func (j *journal) start() {
	if j.f == nil {
		return
	}
	var names []string
	for _, kv := range os.Environ() {
		for i := 0; i < len(kv); i++ {
			if kv[i] == '=' {
				names = append(names, kv[:i])
				break
			}
		}
	}
	sort.Strings(names)
	cwd, _ := os.Getwd()
	j.add(JournalEntry{Start: true, Env: names, Cwd: cwd, Args: os.Args})
}

func (j *journal) close() {
	if j.f != nil {
		j.f.Close()
	}
}

// ReadJournal reads every entry of a journal file. A missing file is an
// empty journal (the server never started).
func ReadJournal(path string) ([]JournalEntry, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []JournalEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 16<<20)
	for sc.Scan() {
		var e JournalEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return out, fmt.Errorf("journal %s: %w", path, err)
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

// Methods returns the methods of the entries, in order (responses, parse
// errors and start entries left out).
func Methods(entries []JournalEntry) []string {
	var out []string
	for _, e := range entries {
		if e.Method != "" {
			out = append(out, e.Method)
		}
	}
	return out
}
