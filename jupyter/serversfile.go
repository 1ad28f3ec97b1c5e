package jupyter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
)

// LoadServersFile reads a plain {"mcpServers": {...}} JSON file (serve's
// --servers FILE) with the same entry validation, substitution and
// fingerprints as Load, and the default admin settings. No default server
// is added, except that an entry named megane-builder-tools whose value
// is {} stands for the built-in default. The error is non-nil when the
// file cannot be read or is not such a JSON object; problems with single
// entries are in Config.Problems.
func LoadServersFile(path string, opts Options) (*Config, error) {
	e := opts.resolve()
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read servers file: %w", err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil || top == nil {
		msg := "it must hold one JSON object"
		if err != nil {
			msg = "not valid JSON: " + describeJSONError(data, err)
		}
		return nil, fmt.Errorf("%s: %s", path, msg)
	}
	for k := range top {
		if k != "mcpServers" {
			return nil, fmt.Errorf("%s: unknown key %q: the file holds only {\"mcpServers\": {...}}", path, k)
		}
	}
	cfg := &Config{Admin: DefaultAdmin(), watched: []string{path}}
	// The admin's policy file applies here as under Jupyter (limits,
	// strip_env, metrics, audit), read from the same env and system config
	// directories (without a Python: {sys.prefix}/etc/jupyter only when
	// Options.SysPrefix names it). Its [mcp_servers] are not added and
	// allow_user_servers does not apply: the servers file is the whole list.
	cfg.Dirs = configPath(e, factsFrom(e, nil, opts.SysPrefix))
	for _, d := range cfg.Dirs {
		cfg.ConfigPath = append(cfg.ConfigPath, d.Path)
	}
	cfg.Admin = mergeAdmin(cfg.readAdmins())
	sf := settingsFile(path, LevelFile, e.root)
	cfg.Files = []bridge.SettingsFile{sf}
	cfg.UserFile = sf
	raw, ok := top["mcpServers"]
	if !ok {
		return nil, fmt.Errorf("%s: no mcpServers object: write {\"mcpServers\": {\"name\": {\"command\": ...}}}", path)
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil || members == nil {
		return nil, fmt.Errorf("%s: mcpServers must be an object mapping server names to entries, found %s", path, jsonKind(raw))
	}
	sc := substCtx{root: e.root, home: e.home, vars: e.vars, strip: cfg.Admin.Strips}
	for _, name := range sortedKeys(members) {
		m := bytes.TrimSpace(members[name])
		if bytes.Equal(m, []byte("null")) {
			continue
		}
		if name == DefaultServerName && bytes.Equal(bytes.Join(bytes.Fields(m), nil), []byte("{}")) {
			cfg.Servers = append(cfg.Servers, defaultEntry(e))
			continue
		}
		ent, probs := decodeEntry(name, m, source{file: path, level: LevelFile}, e, sc)
		cfg.Problems = append(cfg.Problems, probs...)
		if len(probs) == 0 {
			cfg.Servers = append(cfg.Servers, ent)
		}
	}
	return cfg, nil
}
