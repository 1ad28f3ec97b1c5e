package jupyter

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/child"
)

// AdminFileName is the admin settings file looked for in the env- and
// system-level Jupyter config directories.
const AdminFileName = "megane_jupyter_bridge.toml"

// DefaultStripEnv returns the variables removed from every tool server's
// environment unless strip_env says otherwise: the credentials of the
// Jupyter server and of JupyterHub that a single-user server (and so the
// bridge) inherits, and the secrets of a Hub process in case the bridge
// runs beside one. A "*" stands for any run of characters (child.Environ).
// Besides the names Jupyter and JupyterHub are known to set, a rule strips
// any JUPYTER*/JPY_* variable whose name holds TOKEN, SECRET, KEY or
// PASSWORD (JUPYTERHUB_OAUTH_ACCESS_TOKEN, JUPYTER_SERVER_TOKEN, a future
// Hub secret), so a credential need not be listed to be kept from tools.
// Names that identify without granting access
// (JUPYTERHUB_USER, JUPYTERHUB_API_URL, JUPYTERHUB_CLIENT_ID,
// JUPYTERHUB_SERVICE_PREFIX, ...) are kept: tools may use them. Each call
// returns a new slice, so no caller can change the list for the others.
func DefaultStripEnv() []string {
	return []string{
		"JUPYTERHUB_API_TOKEN",           // the single-user server's Hub API token
		"JPY_API_TOKEN",                  // its older name, still set by JupyterHub
		"JUPYTER_TOKEN",                  // the Jupyter server's own login token
		"JPY_COOKIE_SECRET",              // the Hub's cookie secret
		"JUPYTERHUB_CRYPT_KEY",           // the Hub's auth-state encryption key
		"CONFIGPROXY_AUTH_TOKEN",         // configurable-http-proxy's API token
		"MEGANE_JUPYTER_BRIDGE_*",        // the bridge's own settings and tokens
		"MEGANE_BRIDGE_TOKEN",            // the standalone bridge's token
		"JUPYTER_PASSWORD",               // a login password
		"JUPYTERHUB_OAUTH_CLIENT_SECRET", // the server's OAuth client secret
		"JUPYTERHUB_CLIENT_SECRET",       // likewise, older name
		"JUPYTERHUB_COOKIE_SECRET",       // the Hub's cookie secret
		"JUPYTERHUB_SSL_KEYFILE",         // path of the internal-TLS private key
		// The rule: any Jupyter or Hub variable named like a credential.
		"JUPYTER*TOKEN*", "JUPYTER*SECRET*", "JUPYTER*KEY*", "JUPYTER*PASSWORD*",
		"JPY_*TOKEN*", "JPY_*SECRET*", "JPY_*KEY*", "JPY_*PASSWORD*",
	}
}

// AdminSettings are the admin's settings from megane_jupyter_bridge.toml.
// A zero number means "the bridge's default" (see bridge/PROTOCOL.md).
type AdminSettings struct {
	FrameLimit   int64 // [limits] frame_limit: largest frame sent to a page, bytes
	InboundLimit int64 // [limits] inbound_limit: largest page message, bytes
	ResultLimit  int64 // [limits] result_limit: largest tools/call result, bytes
	MemoryLimit  int64 // [limits] memory_limit: the bridge's memory ceiling, bytes

	CallTimeoutMax time.Duration // [limits] call_timeout_max: longest a tools/call may run
	// [limits] restart_busy_after_cancel: end the session of a stdio server
	// still computing this long after a cancel; 0 (the default): only report it
	RestartBusyAfterCancel time.Duration
	InitTimeout            time.Duration // [limits] init_timeout: longest a server may take to initialize
	// [limits] resume_grace: how long a page session outlives its dropped
	// socket (bridge.Options.ResumeGrace); "off" gives -1: not offered
	ResumeGrace time.Duration

	MaxCallsPerTab    int // [limits] max_calls_per_tab: calls in flight per tab
	MaxCallsPerServer int // [limits] max_calls_per_server: calls in flight per server

	// The bounds against abuse (bridge.Options of the same names).
	OutboundBytes      int64 // [limits] outbound_bytes: bytes queued for one tab
	OutboundTotal      int64 // [limits] outbound_total: bytes queued for all tabs
	ChunkMemory        int64 // [limits] chunk_memory: incomplete inbound chunk sequences, all tabs
	InboundMemory      int64 // [limits] inbound_memory: frames pages are still sending, all tabs
	ResultMemory       int64 // [limits] result_memory: tool servers' answers read over Streamable HTTP and held for their calls, all servers
	MaxPendingConnects int   // [limits] max_pending_connects: connects waiting for a start, per tab
	MaxAway            int   // [limits] max_away: page sessions away (socket dropped, within their grace), all users
	MaxAwayPerUser     int   // [limits] max_away_per_user: likewise, per user
	AwayMemory         int64 // [limits] away_memory: bytes held for pages away

	// MetricsPublicOnLoopback: [metrics] public_on_loopback: serve the
	// metrics without a credential to a request made directly from this
	// machine (bridge.Options of the same name). Default false.
	MetricsPublicOnLoopback bool

	// The audit record (bridge.Options of the same names).
	AuditFile     string // [audit] file: absolute path of the audit file; empty: the record is only logged
	AuditMaxBytes int64  // [audit] max_bytes: rotate before the file passes this size
	AuditKeep     int    // [audit] keep: rotated files kept

	// StripEnv are the variable names (or patterns, "*" standing for any
	// run of characters: NAME_*, JUPYTER*TOKEN*) removed from
	// the environment of every stdio server. Load sets DefaultStripEnv()
	// unless strip_env replaces it; strip_env_extra adds to it.
	StripEnv []string

	// AllowUserServers: whether mcp_servers from user-level files count.
	// Default true.
	AllowUserServers bool

	// DefaultServer: whether the reference server is offered without
	// configuration. Default true.
	DefaultServer bool

	// Files are the admin files that were read, highest priority first.
	Files []string
}

// DefaultAdmin returns the settings that apply without any admin file.
func DefaultAdmin() AdminSettings {
	return AdminSettings{
		StripEnv:         DefaultStripEnv(),
		AllowUserServers: true,
		DefaultServer:    true,
	}
}

// Strips reports whether the variable name is removed from tool servers
// (child.Strips).
func (a AdminSettings) Strips(name string) bool { return child.Strips(a.StripEnv, name) }

// adminFile is what one TOML file sets.
type adminFile struct {
	path    string
	set     map[string]bool // keys that were set, e.g. "limits.frame_limit"
	a       AdminSettings
	extra   []string
	servers map[string]json.RawMessage
	text    string
}

// adminKeys are the keys a file may set (tables hold the rest).
var adminTop = []string{"allow_user_servers", "default_server", "strip_env", "strip_env_extra", "limits", "metrics", "audit", "mcp_servers"}
var adminMetrics = []string{"public_on_loopback"}
var adminAudit = []string{"file", "max_bytes", "keep"}
var adminLimits = []string{"frame_limit", "inbound_limit", "result_limit", "memory_limit", "call_timeout_max", "init_timeout", "max_calls_per_tab", "max_calls_per_server",
	"outbound_bytes", "outbound_total", "chunk_memory", "inbound_memory", "result_memory", "max_pending_connects", "restart_busy_after_cancel",
	"resume_grace", "max_away", "max_away_per_user", "away_memory"}

// readAdminFile decodes one admin file strictly. A syntax error makes the
// whole file unusable; any other problem drops only its key (or server).
func readAdminFile(path string) (*adminFile, []bridge.Problem, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	af, probs := parseAdmin(path, string(data))
	return af, probs, nil
}

func parseAdmin(path, text string) (*adminFile, []bridge.Problem) {
	af := &adminFile{path: path, set: map[string]bool{}, text: text, servers: map[string]json.RawMessage{}}
	var probs []bridge.Problem
	var m map[string]any
	if _, err := toml.Decode(text, &m); err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			line := pe.Position.Line
			if st := pe.Position.Start; st >= 0 && st < len(text) {
				// The line holding the offending byte, even when that byte is
				// the newline ending it (toml counts that as the next line).
				line = 1 + strings.Count(text[:st], "\n")
			}
			return nil, []bridge.Problem{{File: path, Message: fmt.Sprintf("%s:%d: %s; the whole file is ignored until it is fixed", path, line, pe.Message)}}
		}
		return nil, []bridge.Problem{{File: path, Message: fmt.Sprintf("%s: %v; the whole file is ignored until it is fixed", path, err)}}
	}
	bad := func(key []string, format string, a ...any) {
		loc := path
		if l := tomlKeyLine(text, key); l > 0 {
			loc = fmt.Sprintf("%s:%d", path, l)
		}
		probs = append(probs, bridge.Problem{File: path, Key: strings.Join(key, "."), Message: loc + ": " + fmt.Sprintf(format, a...)})
	}
	for _, k := range sortedKeys(m) {
		v := m[k]
		key := []string{k}
		switch k {
		case "allow_user_servers", "default_server":
			b, ok := v.(bool)
			if !ok {
				bad(key, "%s must be true or false", k)
				continue
			}
			if k == "allow_user_servers" {
				af.a.AllowUserServers = b
			} else {
				af.a.DefaultServer = b
			}
			af.set[k] = true
		case "strip_env", "strip_env_extra":
			l, ok := tomlStrings(v)
			if !ok {
				bad(key, "%s must be an array of variable names", k)
				continue
			}
			for _, n := range l {
				if strings.Trim(n, "*") == "" || strings.ContainsAny(n, "= \x00") {
					bad(key, "%s: %q is not a variable name or pattern (NAME_*, JUPYTER*TOKEN*)", k, n)
				}
			}
			if k == "strip_env" {
				af.a.StripEnv = l
			} else {
				af.extra = l
			}
			af.set[k] = true
		case "limits":
			lm, ok := v.(map[string]any)
			if !ok {
				bad(key, "limits must be a table ([limits])")
				continue
			}
			for _, lk := range sortedKeys(lm) {
				lkey := []string{"limits", lk}
				if err := af.setLimit(lk, lm[lk]); err != nil {
					bad(lkey, "limits.%s: %v", lk, err)
					continue
				}
				af.set["limits."+lk] = true
			}
		case "metrics", "audit":
			tm, ok := v.(map[string]any)
			if !ok {
				bad(key, "%s must be a table ([%s])", k, k)
				continue
			}
			for _, tk := range sortedKeys(tm) {
				if err := af.setPolicy(k, tk, tm[tk]); err != nil {
					bad([]string{k, tk}, "%s.%s: %v", k, tk, err)
					continue
				}
				af.set[k+"."+tk] = true
			}
		case "mcp_servers":
			sm, ok := v.(map[string]any)
			if !ok {
				bad(key, "mcp_servers must be a table of [mcp_servers.NAME] tables")
				continue
			}
			for _, name := range sortedKeys(sm) {
				raw, err := json.Marshal(sm[name])
				if err != nil {
					bad([]string{"mcp_servers", name}, "server %q cannot be read: %v", name, err)
					continue
				}
				af.servers[name] = raw
			}
		default:
			bad(key, "unknown key %q: remove it (allowed: %s)", k, strings.Join(adminTop, ", "))
		}
	}
	return af, probs
}

func (af *adminFile) setLimit(k string, v any) error {
	switch k {
	case "memory_limit":
		n, err := tomlSize(v)
		if err != nil {
			return err
		}
		if n < 64<<20 {
			return fmt.Errorf("at least 64 MiB")
		}
		af.a.MemoryLimit = n
	case "resume_grace":
		if v == "off" {
			af.a.ResumeGrace = -1
			return nil
		}
		d, err := tomlDuration(v)
		if err != nil {
			return fmt.Errorf("%v, or \"off\"", err)
		}
		if d < 10*time.Second || d > 24*time.Hour {
			return fmt.Errorf("from 10s to 24h, or \"off\"")
		}
		af.a.ResumeGrace = d
	case "frame_limit", "inbound_limit", "result_limit", "outbound_bytes", "outbound_total", "chunk_memory", "inbound_memory", "result_memory", "away_memory":
		n, err := tomlSize(v)
		if err != nil {
			return err
		}
		if k == "frame_limit" && n > 10<<20 {
			return fmt.Errorf("at most 10 MiB: jupyter-server-proxy refuses larger WebSocket messages")
		}
		if n < 64<<10 {
			return fmt.Errorf("at least 64 KiB")
		}
		switch k {
		case "frame_limit":
			af.a.FrameLimit = n
		case "inbound_limit":
			af.a.InboundLimit = n
		case "outbound_bytes":
			af.a.OutboundBytes = n
		case "outbound_total":
			af.a.OutboundTotal = n
		case "chunk_memory":
			af.a.ChunkMemory = n
		case "inbound_memory":
			af.a.InboundMemory = n
		case "result_memory":
			af.a.ResultMemory = n
		case "away_memory":
			af.a.AwayMemory = n
		default:
			af.a.ResultLimit = n
		}
	case "call_timeout_max", "init_timeout", "restart_busy_after_cancel":
		d, err := tomlDuration(v)
		if err != nil {
			return err
		}
		if k == "restart_busy_after_cancel" {
			if d < 5*time.Second {
				return fmt.Errorf("at least 5s: the bridge measures a server's processes from 1 s after a cancel, one second at a time")
			}
			af.a.RestartBusyAfterCancel = d
		} else if k == "call_timeout_max" {
			af.a.CallTimeoutMax = d
		} else {
			af.a.InitTimeout = d
		}
	case "max_calls_per_tab", "max_calls_per_server", "max_pending_connects", "max_away", "max_away_per_user":
		n, ok := v.(int64)
		if !ok || n < 1 || n > 1<<20 {
			return fmt.Errorf("must be a whole number from 1 to 1048576")
		}
		switch k {
		case "max_calls_per_tab":
			af.a.MaxCallsPerTab = int(n)
		case "max_calls_per_server":
			af.a.MaxCallsPerServer = int(n)
		case "max_away":
			af.a.MaxAway = int(n)
		case "max_away_per_user":
			af.a.MaxAwayPerUser = int(n)
		default:
			af.a.MaxPendingConnects = int(n)
		}
	default:
		return fmt.Errorf("unknown key: remove it (allowed: %s)", strings.Join(adminLimits, ", "))
	}
	return nil
}

// setPolicy sets one key of the [metrics] or [audit] table.
func (af *adminFile) setPolicy(table, k string, v any) error {
	switch table + "." + k {
	case "metrics.public_on_loopback":
		b, ok := v.(bool)
		if !ok {
			return fmt.Errorf("must be true or false")
		}
		af.a.MetricsPublicOnLoopback = b
	case "audit.file":
		p, ok := v.(string)
		if !ok || !filepath.IsAbs(p) {
			return fmt.Errorf("must be an absolute path (the file the audit record is appended to)")
		}
		af.a.AuditFile = filepath.Clean(p)
	case "audit.max_bytes":
		n, err := tomlSize(v)
		if err != nil {
			return err
		}
		if n < 64<<10 {
			return fmt.Errorf("at least 64 KiB")
		}
		af.a.AuditMaxBytes = n
	case "audit.keep":
		n, ok := v.(int64)
		if !ok || n < 1 || n > 1000 {
			return fmt.Errorf("must be a whole number from 1 to 1000")
		}
		af.a.AuditKeep = int(n)
	default:
		allowed := adminMetrics
		if table == "audit" {
			allowed = adminAudit
		}
		return fmt.Errorf("unknown key: remove it (allowed: %s)", strings.Join(allowed, ", "))
	}
	return nil
}

// tomlSize reads a byte count: an integer, or a string like "8MiB",
// "512KiB", "1GiB" or "1048576".
func tomlSize(v any) (int64, error) {
	switch x := v.(type) {
	case int64:
		if x <= 0 || x > 1<<40 {
			return 0, fmt.Errorf("must be from 1 byte to 1 TiB")
		}
		return x, nil
	case string:
		s := strings.TrimSpace(x)
		mult := int64(1)
		for _, u := range []struct {
			suffix string
			m      int64
		}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}} {
			if t, ok := strings.CutSuffix(s, u.suffix); ok {
				s, mult = strings.TrimSpace(t), u.m
				break
			}
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err == nil && n > (1<<40)/mult {
			return 0, fmt.Errorf("%q is more than 1 TiB", x)
		}
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("%q is not a size: write bytes as a number, or a number with KiB, MiB or GiB", x)
		}
		return n * mult, nil
	}
	return 0, fmt.Errorf("must be a size (a number of bytes, or a string like \"8MiB\")")
}

// tomlDuration reads a duration: a string like "90s" or "10m", or an
// integer number of seconds.
func tomlDuration(v any) (time.Duration, error) {
	switch x := v.(type) {
	case int64:
		if x <= 0 || x > 7*24*3600 {
			return 0, fmt.Errorf("must be from 1 to 604800 seconds")
		}
		return time.Duration(x) * time.Second, nil
	case string:
		d, err := time.ParseDuration(x)
		if err != nil || d <= 0 || d > 7*24*time.Hour {
			return 0, fmt.Errorf("%q is not a duration: write e.g. \"90s\" or \"10m\"", x)
		}
		return d, nil
	}
	return 0, fmt.Errorf("must be a duration (a string like \"90s\", or seconds)")
}

func tomlStrings(v any) ([]string, bool) {
	l, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(l))
	for _, x := range l {
		s, ok := x.(string)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

// mergeAdmin applies files from lowest to highest priority.
func mergeAdmin(files []*adminFile) AdminSettings {
	a := DefaultAdmin()
	for _, f := range files {
		s := f.set
		if s["allow_user_servers"] {
			a.AllowUserServers = f.a.AllowUserServers
		}
		if s["default_server"] {
			a.DefaultServer = f.a.DefaultServer
		}
		if s["strip_env"] {
			a.StripEnv = append([]string(nil), f.a.StripEnv...)
		}
		if s["strip_env_extra"] {
			a.StripEnv = append(a.StripEnv, f.extra...)
		}
		if s["limits.frame_limit"] {
			a.FrameLimit = f.a.FrameLimit
		}
		if s["limits.inbound_limit"] {
			a.InboundLimit = f.a.InboundLimit
		}
		if s["limits.result_limit"] {
			a.ResultLimit = f.a.ResultLimit
		}
		if s["limits.memory_limit"] {
			a.MemoryLimit = f.a.MemoryLimit
		}
		if s["limits.call_timeout_max"] {
			a.CallTimeoutMax = f.a.CallTimeoutMax
		}
		if s["limits.init_timeout"] {
			a.InitTimeout = f.a.InitTimeout
		}
		if s["limits.restart_busy_after_cancel"] {
			a.RestartBusyAfterCancel = f.a.RestartBusyAfterCancel
		}
		if s["limits.max_calls_per_tab"] {
			a.MaxCallsPerTab = f.a.MaxCallsPerTab
		}
		if s["limits.max_calls_per_server"] {
			a.MaxCallsPerServer = f.a.MaxCallsPerServer
		}
		if s["limits.outbound_bytes"] {
			a.OutboundBytes = f.a.OutboundBytes
		}
		if s["limits.outbound_total"] {
			a.OutboundTotal = f.a.OutboundTotal
		}
		if s["limits.chunk_memory"] {
			a.ChunkMemory = f.a.ChunkMemory
		}
		if s["limits.inbound_memory"] {
			a.InboundMemory = f.a.InboundMemory
		}
		if s["limits.result_memory"] {
			a.ResultMemory = f.a.ResultMemory
		}
		if s["limits.max_pending_connects"] {
			a.MaxPendingConnects = f.a.MaxPendingConnects
		}
		if s["limits.resume_grace"] {
			a.ResumeGrace = f.a.ResumeGrace
		}
		if s["limits.max_away"] {
			a.MaxAway = f.a.MaxAway
		}
		if s["limits.max_away_per_user"] {
			a.MaxAwayPerUser = f.a.MaxAwayPerUser
		}
		if s["limits.away_memory"] {
			a.AwayMemory = f.a.AwayMemory
		}
		if s["metrics.public_on_loopback"] {
			a.MetricsPublicOnLoopback = f.a.MetricsPublicOnLoopback
		}
		if s["audit.file"] {
			a.AuditFile = f.a.AuditFile
		}
		if s["audit.max_bytes"] {
			a.AuditMaxBytes = f.a.AuditMaxBytes
		}
		if s["audit.keep"] {
			a.AuditKeep = f.a.AuditKeep
		}
		a.Files = append([]string{f.path}, a.Files...)
	}
	return a
}

// tomlKeyLine returns the 1-based line where key (a table path, or a
// table path and a key) is defined in text, or 0. It understands table
// headers, dotted and quoted keys, which is enough to point at the line of
// a problem; it is not a TOML parser.
func tomlKeyLine(text string, key []string) int {
	want := strings.Join(key, "\x00")
	var table []string
	for i, line := range strings.Split(text, "\n") {
		t := strings.TrimSpace(line)
		if t == "" || t[0] == '#' {
			continue
		}
		if strings.HasPrefix(t, "[") {
			h := strings.Trim(strings.SplitN(t, "#", 2)[0], " \t")
			h = strings.TrimSpace(strings.Trim(h, "[]"))
			table = splitTOMLKey(h)
			if strings.Join(table, "\x00") == want {
				return i + 1
			}
			continue
		}
		k, _, ok := strings.Cut(t, "=")
		if !ok {
			continue
		}
		full := append(append([]string(nil), table...), splitTOMLKey(strings.TrimSpace(k))...)
		fj := strings.Join(full, "\x00")
		if fj == want || strings.HasPrefix(fj, want+"\x00") {
			return i + 1
		}
	}
	return 0
}

func splitTOMLKey(k string) []string {
	var parts []string
	var cur strings.Builder
	quote := byte(0)
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '.':
			parts = append(parts, strings.TrimSpace(cur.String()))
			cur.Reset()
		default:
			cur.WriteByte(c)
		}
	}
	return append(parts, strings.TrimSpace(cur.String()))
}
