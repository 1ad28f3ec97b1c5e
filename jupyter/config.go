package jupyter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
)

// The traits read from Jupyter's configuration.
const (
	sectionTools = "MeganeBuilderTools"
	traitServers = "mcp_servers"
	sectionProxy = "ServerProxy"
	traitProxy   = "servers"

	sectionServer   = "ServerApp"
	sectionNotebook = "NotebookApp"
	traitOrigin     = "allow_origin"
	traitOriginPat  = "allow_origin_pat"
)

// dictTraits are the dict-valued traits Load reads; stringTraits the
// string-valued ones (Jupyter's Origin settings).
var (
	dictTraits   = [][2]string{{sectionTools, traitServers}, {sectionProxy, traitProxy}}
	stringTraits = [][2]string{
		{sectionServer, traitOrigin}, {sectionServer, traitOriginPat},
		{sectionNotebook, traitOrigin}, {sectionNotebook, traitOriginPat},
	}
)

// isStringTrait reports whether key ("Section.trait") is one of stringTraits.
func isStringTrait(key string) bool {
	for _, st := range stringTraits {
		if st[0]+"."+st[1] == key {
			return true
		}
	}
	return false
}

// Config is the configuration as read at one moment.
type Config struct {
	Servers  []bridge.ServerSpec // the servers to offer, sorted by name
	Problems []bridge.Problem    // entries not offered, files not read, settings ignored
	// Excluded maps the names of servers that configuration defines but the
	// admin's settings exclude to the reason, so a page asking for one can
	// be told why.
	Excluded map[string]string

	Files    []bridge.SettingsFile // the files that define the servers now
	UserFile bridge.SettingsFile   // the user-level jupyter_server_config.json; zero with JUPYTER_NO_CONFIG

	Admin AdminSettings // from megane_jupyter_bridge.toml; DefaultAdmin() without one

	ConfigPath []string    // Jupyter's config search path, highest priority first
	Dirs       []ConfigDir // the same with levels

	Python      *Python // the Jupyter server's Python; nil when none was usable
	PythonError string  // why no Python was usable (or why a .py file could not be evaluated); "" otherwise

	// ServerProxy is the effective ServerProxy.servers, for doctor.
	ServerProxy ProxyServers

	// AllowOrigin and AllowOriginPat are the Jupyter server's
	// ServerApp.allow_origin and ServerApp.allow_origin_pat as its
	// configuration files set them (the highest-priority file that sets a
	// trait wins, as in traitlets); "" when no file sets them. Settings given
	// on the server's command line are not visible here. jupyter_server
	// itself ignores NotebookApp.allow_origin(_pat); notebook_shim (installed
	// with Notebook 7 and nbclassic) moves them onto ServerApp, where they
	// win over ServerApp's own. So when the server's Python can import
	// notebook_shim, a NotebookApp value replaces the ServerApp one here;
	// otherwise a NotebookApp value is reported as a bridge.Problem and ignored.
	AllowOrigin    string
	AllowOriginPat string

	watched []string // every file whose change means a re-load
}

// Snapshot is the configuration as the bridge serves it: the servers, the
// problems, the names excluded, and the settings files.
func (cfg *Config) Snapshot() bridge.Snapshot {
	snap := bridge.Snapshot{Servers: cfg.Servers, Problems: cfg.Problems, Forbidden: cfg.Excluded}
	snap.Settings.Files = cfg.Files
	if cfg.UserFile.Path != "" {
		uf := cfg.UserFile
		snap.Settings.UserFile = &uf
	}
	return snap
}

// ProxyServers is the effective value of ServerProxy.servers.
type ProxyServers struct {
	Servers map[string]json.RawMessage // nil when no file sets it
	Files   []string                   // the files that make up the value
	// Unread lists .py files that mention ServerProxy but could not be
	// evaluated, so the value may be incomplete.
	Unread []string
}

// Load reads the configuration once: the config search path, the
// MeganeBuilderTools.mcp_servers value from jupyter_config and
// jupyter_server_config .py and .json files with Jupyter's precedence, the
// admin TOML files, and the default server. It never writes; the only
// process it runs is the Jupyter server's Python (to learn sys.prefix and
// evaluate .py files). The error is non-nil only when ctx ended.
func Load(ctx context.Context, opts Options) (*Config, error) {
	return newLoader(opts).load(ctx)
}

// loader keeps what does not change between loads (the Python).
type loader struct {
	opts Options
	e    env

	mu     sync.Mutex // guards py, pyErr, pyDone
	py     *Python
	pyErr  error
	pyDone bool
}

func newLoader(opts Options) *loader { return &loader{opts: opts, e: opts.resolve()} }

func (l *loader) python(ctx context.Context) (*Python, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.pyDone {
		l.py, l.pyErr = FindPython(ctx, l.opts)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		l.pyDone = true
	}
	return l.py, l.pyErr
}

// cfgFile is one file of the load sequence.
type cfgFile struct {
	path  string
	level string
	py    bool
}

// traitValue is one file's contribution to a dict trait.
type traitValue struct {
	lazy    bool                       // .update() on the inherited value
	members map[string]json.RawMessage // the dict, or the update
	str     string                     // a string trait's value
	invalid string                     // why the value is not a dict (or string) ("" when it is)
}

func (l *loader) load(ctx context.Context) (*Config, error) {
	e := l.e
	cfg := &Config{}
	var py *Python
	var pyErr error
	if l.opts.Python != "none" && l.opts.SysPrefix == "" {
		py, pyErr = l.python(ctx)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	facts := factsFrom(e, py, l.opts.SysPrefix)
	cfg.Dirs = configPath(e, facts)
	for _, d := range cfg.Dirs {
		cfg.ConfigPath = append(cfg.ConfigPath, d.Path)
	}
	if e.vars["JUPYTER_NO_CONFIG"] == "" {
		uf := filepath.Join(e.userConfigDir(), "jupyter_server_config.json")
		cfg.UserFile = settingsFile(uf, LevelUser, e.root)
	}

	// The load sequence, lowest priority first: jupyter_config files, then
	// jupyter_server_config files; in each directory .py before .json.
	var seq []cfgFile
	for _, base := range []string{"jupyter_config", "jupyter_server_config"} {
		for i := len(cfg.Dirs) - 1; i >= 0; i-- {
			d := cfg.Dirs[i]
			seq = append(seq,
				cfgFile{filepath.Join(d.Path, base+".py"), d.Level, true},
				cfgFile{filepath.Join(d.Path, base+".json"), d.Level, false})
		}
	}
	for _, f := range seq {
		cfg.watched = append(cfg.watched, f.path)
	}

	admins := cfg.readAdmins()
	cfg.Admin = mergeAdmin(admins)

	// Read every existing file's values.
	values := make(map[string]map[string]traitValue) // file -> "Section.trait" -> value
	var pyFiles []string
	for _, f := range seq {
		data, err := os.ReadFile(f.path)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				cfg.Problems = append(cfg.Problems, bridge.Problem{File: f.path, Message: fmt.Sprintf("%s: cannot be read: %v", f.path, err)})
			}
			continue
		}
		if f.py {
			pyFiles = append(pyFiles, f.path)
			continue
		}
		v, probs := readJSONConfig(f.path, data)
		cfg.Problems = append(cfg.Problems, probs...)
		values[f.path] = v
	}
	if len(pyFiles) > 0 {
		if py == nil && pyErr == nil && l.opts.Python != "none" {
			py, pyErr = l.python(ctx)
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
		}
		var results map[string]pyResult
		var evalErr error
		if py != nil {
			results, evalErr = evalPyFiles(ctx, e, py, pyFiles, append(append([][2]string{}, dictTraits...), stringTraits...), l.opts.pythonTimeout())
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
		} else {
			evalErr = pyErr
			if evalErr == nil {
				evalErr = errors.New("Python is disabled")
			}
		}
		for _, p := range pyFiles {
			if r, ok := results[p]; ok && evalErr == nil {
				v, probs := pyValues(r)
				cfg.Problems = append(cfg.Problems, probs...)
				values[p] = v
				continue
			}
			text, _ := os.ReadFile(p)
			if bytes.Contains(text, []byte(sectionTools)) {
				cfg.PythonError = evalErr.Error()
				cfg.Problems = append(cfg.Problems, bridge.Problem{File: p, Key: sectionTools + "." + traitServers, Message: fmt.Sprintf("%s: defines %s but cannot be evaluated: %v; make the Jupyter server's Python (with traitlets) findable, e.g. with --python", p, sectionTools, evalErr)})
			}
			if bytes.Contains(text, []byte(sectionProxy)) {
				cfg.ServerProxy.Unread = append(cfg.ServerProxy.Unread, p)
			}
			if bytes.Contains(text, []byte(traitOrigin)) {
				cfg.Problems = append(cfg.Problems, bridge.Problem{File: p, Key: sectionServer + "." + traitOrigin, Message: fmt.Sprintf("%s: mentions %s but cannot be evaluated: %v; the bridge does not know Jupyter's allowed origins from it: pass --allow-origin, or make the Jupyter server's Python findable, e.g. with --python", p, traitOrigin, evalErr)})
			}
		}
	}
	cfg.Python = py
	if py == nil && pyErr != nil && cfg.PythonError == "" {
		cfg.PythonError = pyErr.Error()
	}

	// ServerProxy.servers, for doctor.
	for _, f := range seq {
		tv, ok := values[f.path][sectionProxy+"."+traitProxy]
		if !ok || tv.invalid != "" {
			continue
		}
		if !tv.lazy || cfg.ServerProxy.Servers == nil {
			cfg.ServerProxy.Servers = map[string]json.RawMessage{}
			cfg.ServerProxy.Files = nil
		}
		for k, v := range tv.members {
			cfg.ServerProxy.Servers[k] = v
		}
		cfg.ServerProxy.Files = append(cfg.ServerProxy.Files, f.path)
	}

	cfg.originSettings(seq, values, py)

	// MeganeBuilderTools.mcp_servers.
	type member struct {
		raw   json.RawMessage
		file  string
		level string
	}
	var members map[string]member
	var defFiles []string
	var defLevels = map[string]string{}
	key := sectionTools + "." + traitServers
	for _, f := range seq {
		tv, ok := values[f.path][key]
		if !ok {
			continue
		}
		if f.level == LevelUser && !cfg.Admin.AllowUserServers {
			cfg.Problems = append(cfg.Problems, bridge.Problem{File: f.path, Key: key, Message: fmt.Sprintf("%s: %s is ignored: the admin allows only servers from env and system configuration (allow_user_servers = false in %s)", f.path, key, strings.Join(cfg.Admin.Files, ", "))})
			for name := range tv.members {
				if cfg.Excluded == nil {
					cfg.Excluded = map[string]string{}
				}
				cfg.Excluded[name] = fmt.Sprintf("%s is configured in %s, but the admin allows only servers from env and system configuration", name, f.path)
			}
			continue
		}
		if tv.invalid != "" {
			cfg.Problems = append(cfg.Problems, bridge.Problem{File: f.path, Key: key, Message: fmt.Sprintf("%s: %s must be an object mapping server names to entries, found %s; no servers are read from it (and it still replaces lower-priority values)", f.path, key, tv.invalid)})
			members = map[string]member{}
			defFiles = nil
			continue
		}
		if !tv.lazy || members == nil {
			members = map[string]member{}
			defFiles = nil
		}
		for k, v := range tv.members {
			members[k] = member{v, f.path, f.level}
		}
		defFiles = append(defFiles, f.path)
		defLevels[f.path] = f.level
	}
	sc := substCtx{root: e.root, home: e.home, vars: e.vars, strip: cfg.Admin.Strips}
	byName := map[string]bridge.ServerSpec{}
	hidden := false
	for _, name := range sortedKeys(members) {
		m := members[name]
		if bytes.Equal(bytes.TrimSpace(m.raw), []byte("null")) {
			if name == DefaultServerName {
				hidden = true
			}
			continue
		}
		src := source{file: m.file, level: m.level}
		ent, probs := decodeEntry(name, m.raw, src, e, sc)
		if len(probs) > 0 {
			cfg.Problems = append(cfg.Problems, probs...)
			continue
		}
		byName[name] = ent
	}
	// Admin servers win over same-named ones from Jupyter configuration.
	adminServers := map[string]*adminFile{}
	for _, af := range admins {
		for name := range af.servers {
			adminServers[name] = af
		}
	}
	for _, name := range sortedKeys(adminServers) {
		af := adminServers[name]
		text := af.text
		src := source{file: af.path, level: LevelAdmin, line: func(k string) int {
			key := []string{"mcp_servers", name}
			if k != "" {
				key = append(key, strings.SplitN(k, ".", 2)[0])
			}
			if l := tomlKeyLine(text, key); l > 0 {
				return l
			}
			return tomlKeyLine(text, []string{"mcp_servers", name})
		}}
		ent, probs := decodeEntry(name, af.servers[name], src, e, sc)
		if len(probs) > 0 {
			cfg.Problems = append(cfg.Problems, probs...)
			continue
		}
		if old, ok := byName[name]; ok {
			cfg.Problems = append(cfg.Problems, bridge.Problem{File: old.Source, Server: name, Message: fmt.Sprintf("%s: server %q is ignored: the admin defines a server with this name in %s", old.Source, name, af.path)})
		}
		byName[name] = ent
		defFiles = append(defFiles, af.path)
		defLevels[af.path] = LevelAdmin
	}
	if _, ok := byName[DefaultServerName]; !ok && !hidden && cfg.Admin.DefaultServer {
		byName[DefaultServerName] = defaultEntry(e)
	}
	for _, name := range sortedKeys(byName) {
		cfg.Servers = append(cfg.Servers, byName[name])
	}
	seen := map[string]bool{}
	for _, f := range defFiles {
		if !seen[f] {
			seen[f] = true
			cfg.Files = append(cfg.Files, settingsFile(f, defLevels[f], e.root))
		}
	}
	sort.SliceStable(cfg.Problems, func(i, j int) bool { return cfg.Problems[i].File < cfg.Problems[j].File })
	return cfg, nil
}

func adminDirs(dirs []ConfigDir) []string {
	var out []string
	for _, d := range dirs {
		if d.Level != LevelUser {
			out = append(out, d.Path)
		}
	}
	return out
}

func settingsFile(path, level, root string) bridge.SettingsFile {
	sf := bridge.SettingsFile{Path: path, Level: level}
	if _, err := os.Stat(path); err == nil {
		sf.Exists = true
	}
	abs, err := filepath.Abs(path)
	if err == nil && within(root, abs) {
		if rel, err := filepath.Rel(root, abs); err == nil {
			sf.Relative = rel
		}
	}
	return sf
}

// originSettings sets AllowOrigin and AllowOriginPat from the files' values
// (seq is lowest priority first) and reports unusable values.
func (cfg *Config) originSettings(seq []cfgFile, values map[string]map[string]traitValue, py *Python) {
	shim := py != nil && py.NotebookShim
	effective := func(section, trait string) (val, file string, set bool) {
		key := section + "." + trait
		for _, f := range seq {
			tv, ok := values[f.path][key]
			if !ok {
				continue
			}
			if tv.invalid != "" {
				cfg.Problems = append(cfg.Problems, bridge.Problem{File: f.path, Key: key, Message: fmt.Sprintf("%s: %s must be a string, found %s; Jupyter does not start with it: fix it", f.path, key, tv.invalid)})
				continue
			}
			val, file, set = tv.str, f.path, true
		}
		return val, file, set
	}
	for _, trait := range []string{traitOrigin, traitOriginPat} {
		val, _, _ := effective(sectionServer, trait)
		if nb, file, ok := effective(sectionNotebook, trait); ok {
			if shim {
				val = nb
			} else {
				cfg.Problems = append(cfg.Problems, bridge.Problem{File: file, Key: sectionNotebook + "." + trait, Message: fmt.Sprintf("%s: %s.%s is ignored: jupyter_server reads %s.%s (only notebook_shim, which this Jupyter does not have, moves NotebookApp settings); rename it", file, sectionNotebook, trait, sectionServer, trait)})
			}
		}
		if trait == traitOrigin {
			cfg.AllowOrigin = val
		} else {
			cfg.AllowOriginPat = val
		}
	}
}

// readJSONConfig extracts the traits Load reads from a JSON config file, as
// traitlets' JSONFileConfigLoader reads it.
func readJSONConfig(path string, data []byte) (map[string]traitValue, []bridge.Problem) {
	out := map[string]traitValue{}
	if len(bytes.TrimSpace(data)) == 0 {
		// traitlets treats an empty file as an empty config.
		return out, nil
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil || top == nil {
		msg := "the file must hold one JSON object"
		if err != nil {
			msg = "not valid JSON: " + describeJSONError(data, err)
		}
		return nil, []bridge.Problem{{File: path, Message: fmt.Sprintf("%s: %s; Jupyter ignores the whole file (and jupyter_server 1.x does not start at all with a broken jupyter_server_config.json): fix it", path, msg)}}
	}
	var probs []bridge.Problem
	for _, st := range append(append([][2]string{}, dictTraits...), stringTraits...) {
		raw, ok := top[st[0]]
		if !ok {
			continue
		}
		var sec map[string]json.RawMessage
		if err := json.Unmarshal(raw, &sec); err != nil || sec == nil {
			probs = append(probs, bridge.Problem{File: path, Key: st[0], Message: fmt.Sprintf("%s: %s must be an object, found %s", path, st[0], jsonKind(raw))})
			continue
		}
		v, ok := sec[st[1]]
		if !ok {
			continue
		}
		out[st[0]+"."+st[1]] = valueOf(st[0]+"."+st[1], v)
	}
	return out, probs
}

// valueOf is the traitValue of raw for the trait key.
func valueOf(key string, raw json.RawMessage) traitValue {
	if isStringTrait(key) {
		return stringValue(raw)
	}
	return dictValue(raw)
}

func stringValue(v json.RawMessage) traitValue {
	var s *string
	if err := json.Unmarshal(v, &s); err != nil || s == nil {
		return traitValue{invalid: jsonKind(v)}
	}
	return traitValue{str: *s}
}

func dictValue(v json.RawMessage) traitValue {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(v, &m); err != nil || m == nil {
		return traitValue{invalid: jsonKind(v)}
	}
	return traitValue{members: m}
}

// pyValues turns one evaluated .py file into trait values and problems.
func pyValues(r pyResult) (map[string]traitValue, []bridge.Problem) {
	if r.Error != "" {
		loc := r.File
		if r.Line > 0 {
			loc = fmt.Sprintf("%s:%d", r.File, r.Line)
		}
		return nil, []bridge.Problem{{File: r.File, Message: fmt.Sprintf("%s: the file raised %s; Jupyter skips the whole file too: fix it", loc, r.Error)}}
	}
	out := map[string]traitValue{}
	var probs []bridge.Problem
	for key, v := range r.Values {
		switch v.Kind {
		case "value":
			out[key] = valueOf(key, v.Value)
		case "lazy":
			if isStringTrait(key) {
				if len(v.Other) > 0 || len(dictValue(v.Update).members) > 0 {
					probs = append(probs, bridge.Problem{File: r.File, Key: key, Message: fmt.Sprintf("%s: c.%s is a string: assign one", r.File, key)})
				}
				continue // only read, never set
			}
			if len(v.Other) > 0 {
				probs = append(probs, bridge.Problem{File: r.File, Key: key, Message: fmt.Sprintf("%s: c.%s uses %s, which does not apply to a dict; assign a dict or use .update()", r.File, key, strings.Join(v.Other, ", "))})
				continue
			}
			if v.Update == nil {
				continue // only read, never set
			}
			tv := dictValue(v.Update)
			tv.lazy = true
			out[key] = tv
		default:
			probs = append(probs, bridge.Problem{File: r.File, Key: key, Message: fmt.Sprintf("%s: c.%s: %s", r.File, key, v.Error)})
		}
	}
	return out, probs
}

// describeJSONError says where in data a JSON error is, as "line L,
// column C: message".
func describeJSONError(data []byte, err error) string {
	var se *json.SyntaxError
	off := int64(-1)
	if errors.As(err, &se) {
		off = se.Offset
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return "the file must hold one JSON object"
	}
	if off < 0 {
		return err.Error()
	}
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	line := 1 + bytes.Count(data[:off], []byte("\n"))
	col := off - int64(bytes.LastIndexByte(data[:off], '\n'))
	if line == 1 {
		col = off
	}
	return fmt.Sprintf("line %d, column %d: %v", line, col, err)
}

// readAdmins reads the admin files of cfg.Dirs: env and system levels only
// (one at user level is a problem), adding each path to what is watched
// and each file's problems to cfg's.
func (cfg *Config) readAdmins() []*adminFile {
	var admins []*adminFile
	for i := len(cfg.Dirs) - 1; i >= 0; i-- {
		d := cfg.Dirs[i]
		p := filepath.Join(d.Path, AdminFileName)
		cfg.watched = append(cfg.watched, p)
		if _, err := os.Stat(p); err != nil {
			continue
		}
		if d.Level == LevelUser {
			cfg.Problems = append(cfg.Problems, bridge.Problem{File: p, Message: fmt.Sprintf("%s: ignored: admin settings are read only from the env and system config directories (%s), not from user-level ones", p, strings.Join(adminDirs(cfg.Dirs), ", "))})
			continue
		}
		af, probs, err := readAdminFile(p)
		if err != nil {
			cfg.Problems = append(cfg.Problems, bridge.Problem{File: p, Message: fmt.Sprintf("%s: cannot be read: %v", p, err)})
			continue
		}
		cfg.Problems = append(cfg.Problems, probs...)
		if af != nil {
			admins = append(admins, af)
		}
	}
	return admins
}
