package jupyter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
)

// ProxyServerName is the jupyter-server-proxy server name of the bridge:
// {base_url}megane/builder-tools/ws reaches the bridge as /builder-tools/ws
// (absolute_url false) or as the whole path (absolute_url true); the
// bridge answers both, whatever its base URL.
const ProxyServerName = "megane"

// ProxyTimeout is the readiness timeout (seconds) in the registration: how
// long jupyter-server-proxy waits for the bridge to answer HTTP.
const ProxyTimeout = 30

// ProxyRegistration is the value of ServerProxy.servers.megane.
type ProxyRegistration struct {
	Command       []string      `json:"command"`
	AbsoluteURL   bool          `json:"absolute_url"`
	Timeout       int           `json:"timeout"`
	LauncherEntry LauncherEntry `json:"launcher_entry"`
}

// LauncherEntry is jupyter-server-proxy's launcher_entry option.
type LauncherEntry struct {
	Enabled bool `json:"enabled"`
}

// Registration returns the registration that runs the bridge at binary.
// jupyterURL, if not empty, is given to serve as --jupyter-url: the
// Jupyter server to ask for verdicts when the bridge cannot ask its parent
// directly (JupyterHub with internal SSL). jupyter-server-proxy fills in
// {base_url} there as in the other arguments. absoluteURL is the path mode:
// false (jupyter-server-proxy's default, what install writes unless told)
// forwards paths with {base_url}megane stripped, true forwards them whole.
func Registration(binary, jupyterURL string, absoluteURL bool) ProxyRegistration {
	cmd := []string{binary, "serve", "--port={port}", "--base-url={base_url}"}
	if jupyterURL != "" {
		cmd = append(cmd, "--jupyter-url="+jupyterURL)
	}
	return ProxyRegistration{
		Command:     cmd,
		AbsoluteURL: absoluteURL,
		Timeout:     ProxyTimeout,
	}
}

// IsBridgeRegistration reports whether raw is a registration that install
// writes, for any binary path, --jupyter-url and path mode (so an older
// install is recognised).
func IsBridgeRegistration(raw json.RawMessage) bool {
	var got ProxyRegistration
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if dec.Decode(&got) != nil || len(got.Command) == 0 {
		return false
	}
	var jupyterURL string
	if len(got.Command) == 5 {
		u, ok := strings.CutPrefix(got.Command[4], "--jupyter-url=")
		if !ok || u == "" {
			return false
		}
		jupyterURL = u
	}
	want := Registration(got.Command[0], jupyterURL, got.AbsoluteURL)
	return reflect.DeepEqual(got, want)
}

// CheckJupyterURL checks a --jupyter-url for the registration: what serve
// accepts (parseBase: http or https, no user, query or fragment), with an
// explicit host, where {base_url} may stand for the server's base URL.
func CheckJupyterURL(raw string) error {
	const example = "give an http or https URL with a host, such as https://hub.example.org{base_url}"
	const stand = "/megane-base-url/" // {base_url} while checking, put back in messages
	sample := strings.ReplaceAll(raw, "{base_url}", stand)
	if u, err := url.Parse(sample); err == nil && u.Host == "" {
		return fmt.Errorf("--jupyter-url: %s", example)
	}
	if _, err := parseBase(sample, ""); err != nil {
		return fmt.Errorf("--jupyter-url: %s; %s", strings.ReplaceAll(err.Error(), stand, "{base_url}"), example)
	}
	return nil
}

// Install levels.
const (
	InstallUser      = "user"       // JUPYTER_CONFIG_DIR, else ~/.jupyter
	InstallSysPrefix = "sys-prefix" // {sys.prefix}/etc/jupyter of the Jupyter server's Python
	InstallSystem    = "system"     // /usr/local/etc/jupyter (jupyter_core's first system directory)
)

// InstallFile returns the jupyter_server_config.json that install and
// uninstall change for level.
func InstallFile(ctx context.Context, level string, opts Options) (string, error) {
	var dir string
	switch level {
	case InstallUser:
		dir = ConfigDirFor(opts)
	case InstallSysPrefix:
		prefix := opts.SysPrefix
		if prefix == "" {
			py, err := FindPython(ctx, opts)
			if err != nil {
				return "", fmt.Errorf("--sys-prefix needs the Jupyter server's Python (give it with --python): %w", err)
			}
			prefix = py.Prefix
		}
		dir = filepath.Join(prefix, "etc", "jupyter")
	case InstallSystem:
		dirs := systemConfigPath(nil)
		if len(dirs) == 0 {
			return "", errors.New("there is no system-wide Jupyter config directory here (PROGRAMDATA is not set)")
		}
		dir = dirs[0]
	default:
		return "", fmt.Errorf("unknown install level %q", level)
	}
	return filepath.Join(dir, "jupyter_server_config.json"), nil
}

// InstallRegistration merges ServerProxy.servers.megane for binary (and
// jupyterURL and absoluteURL, see Registration) into
// the JSON config file at path, creating the file (and its directory) if
// needed. Every other key and all formatting outside the inserted text are
// kept; the file is replaced atomically with its mode kept. changed is
// false when the registration was already there. A file that is not valid
// JSON, or whose ServerProxy or servers is not an object, is refused.
func InstallRegistration(path, binary, jupyterURL string, absoluteURL bool) (changed bool, err error) {
	reg := Registration(binary, jupyterURL, absoluteURL)
	data, mode, err := readForEdit(path)
	if err != nil {
		return false, err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		out, _ := json.MarshalIndent(map[string]any{"ServerProxy": map[string]any{"servers": map[string]any{ProxyServerName: reg}}}, "", "  ")
		return true, writeConfig(path, append(out, '\n'), mode)
	}
	root, err := parseForEdit(path, data)
	if err != nil {
		return false, err
	}
	sp := root.member("ServerProxy")
	if sp == nil {
		out := insertMember(data, root, "ServerProxy", map[string]any{"servers": map[string]any{ProxyServerName: reg}})
		return true, writeConfig(path, out, mode)
	}
	if sp.val.kind != '{' {
		return false, fmt.Errorf("refusing to change %s: ServerProxy is not an object; fix it by hand", path)
	}
	servers := sp.val.member("servers")
	if servers == nil {
		out := insertMember(data, sp.val, "servers", map[string]any{ProxyServerName: reg})
		return true, writeConfig(path, out, mode)
	}
	if servers.val.kind != '{' {
		return false, fmt.Errorf("refusing to change %s: ServerProxy.servers is not an object; fix it by hand", path)
	}
	m := servers.val.member(ProxyServerName)
	if m == nil {
		out := insertMember(data, servers.val, ProxyServerName, reg)
		return true, writeConfig(path, out, mode)
	}
	var cur, want any
	_ = json.Unmarshal(data[m.val.start:m.val.end], &cur)
	wb, _ := json.Marshal(reg)
	_ = json.Unmarshal(wb, &want)
	if reflect.DeepEqual(cur, want) {
		return false, nil
	}
	out := replaceValue(data, m, reg)
	return true, writeConfig(path, out, mode)
}

// UninstallRegistration removes what InstallRegistration added:
// ServerProxy.servers.megane, then servers and ServerProxy if they are
// left empty, and the file itself if nothing else is left in it. It
// refuses to remove a megane entry that install did not write. changed is
// false when there was nothing to remove.
func UninstallRegistration(path string) (changed bool, err error) {
	data, mode, err := readForEdit(path)
	if err != nil || len(bytes.TrimSpace(data)) == 0 {
		return false, err
	}
	root, err := parseForEdit(path, data)
	if err != nil {
		return false, err
	}
	sp := root.member("ServerProxy")
	if sp == nil || sp.val.kind != '{' {
		return false, nil
	}
	servers := sp.val.member("servers")
	if servers == nil || servers.val.kind != '{' {
		return false, nil
	}
	m := servers.val.member(ProxyServerName)
	if m == nil {
		return false, nil
	}
	if !IsBridgeRegistration(data[m.val.start:m.val.end]) {
		return false, fmt.Errorf("refusing to remove ServerProxy.servers.%s from %s: it is not the registration install writes (it was edited, or belongs to something else); remove it by hand", ProxyServerName, path)
	}
	data = removeMember(data, servers.val, m)
	// Remove parents left empty, re-reading after each cut.
	for _, chain := range [][]string{{"ServerProxy", "servers"}, {"ServerProxy"}} {
		root, err = parseForEdit(path, data)
		if err != nil {
			return false, err
		}
		parent := root
		for _, k := range chain[:len(chain)-1] {
			parent = parent.member(k).val
		}
		last := parent.member(chain[len(chain)-1])
		if last != nil && last.val.kind == '{' && len(last.val.members) == 0 {
			data = removeMember(data, parent, last)
		}
	}
	if string(bytes.TrimSpace(data)) == "{}" {
		if err := os.Remove(path); err != nil {
			return true, err
		}
		removeEmptyDirs(path)
		return true, nil
	}
	return true, writeConfig(path, data, mode)
}

// removeEmptyDirs removes, after the config file at path was removed, the
// directories install may have made for it when they are left empty: its
// own (…/jupyter, ~/.jupyter) and, in a venv, the etc above it (a venv has
// none of its own). A directory that holds anything stays.
func removeEmptyDirs(path string) {
	dir := filepath.Dir(path)
	if os.Remove(dir) != nil {
		return // not empty, or not ours to remove
	}
	etc := filepath.Dir(dir)
	if filepath.Base(etc) != "etc" {
		return
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(etc), "pyvenv.cfg")); err == nil {
		os.Remove(etc)
	}
}

func readForEdit(path string) ([]byte, os.FileMode, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0o644, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read %s: %w", path, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, 0, err
	}
	return data, fi.Mode().Perm(), nil
}

func parseForEdit(path string, data []byte) (*jnode, error) {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("refusing to change %s: it is not valid JSON (%s); fix or move it, then run this again", path, describeJSONError(data, err))
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, fmt.Errorf("refusing to change %s: it does not hold a JSON object; fix or move it, then run this again", path)
	}
	p := &jparser{data: data}
	return p.value(), nil
}

// writeConfig writes a configuration file with mode, replacing it, its
// directory created if missing.
func writeConfig(path string, data []byte, mode os.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	return ReplaceFile(path, data, mode)
}

// jnode is a JSON value with its byte span; objects keep their members.
type jnode struct {
	start, end int  // data[start:end] is the value
	kind       byte // '{', '[', '"', or 'x' for numbers and literals
	members    []*jmember
}

type jmember struct {
	keyStart int // the opening quote of the key
	key      string
	val      *jnode
}

// member returns the last member named key (as Python's json keeps the
// last of duplicate keys), or nil.
func (n *jnode) member(key string) *jmember {
	if n == nil {
		return nil
	}
	for i := len(n.members) - 1; i >= 0; i-- {
		if n.members[i].key == key {
			return n.members[i]
		}
	}
	return nil
}

// jparser records spans of already validated JSON.
type jparser struct {
	data []byte
	i    int
}

func (p *jparser) ws() {
	for p.i < len(p.data) && strings.IndexByte(" \t\r\n", p.data[p.i]) >= 0 {
		p.i++
	}
}

func (p *jparser) value() *jnode {
	p.ws()
	n := &jnode{start: p.i}
	switch c := p.data[p.i]; c {
	case '{':
		n.kind = '{'
		p.i++
		p.ws()
		for p.data[p.i] != '}' {
			m := &jmember{keyStart: p.i}
			ks := p.i
			p.str()
			_ = json.Unmarshal(p.data[ks:p.i], &m.key)
			p.ws()
			p.i++ // ':'
			m.val = p.value()
			n.members = append(n.members, m)
			p.ws()
			if p.data[p.i] == ',' {
				p.i++
				p.ws()
			}
		}
		p.i++
	case '[':
		n.kind = '['
		p.i++
		p.ws()
		for p.data[p.i] != ']' {
			p.value()
			p.ws()
			if p.data[p.i] == ',' {
				p.i++
				p.ws()
			}
		}
		p.i++
	case '"':
		n.kind = '"'
		p.str()
	default:
		n.kind = 'x'
		for p.i < len(p.data) && strings.IndexByte(",}] \t\r\n", p.data[p.i]) < 0 {
			p.i++
		}
	}
	n.end = p.i
	return n
}

func (p *jparser) str() {
	p.i++ // opening quote
	for p.data[p.i] != '"' {
		if p.data[p.i] == '\\' {
			p.i++
		}
		p.i++
	}
	p.i++
}

// lineIndent is the leading whitespace of the line holding offset.
func lineIndent(data []byte, offset int) string {
	ls := bytes.LastIndexByte(data[:offset], '\n') + 1
	e := ls
	for e < len(data) && (data[e] == ' ' || data[e] == '\t') {
		e++
	}
	return string(data[ls:e])
}

// insertMember adds "key": v as the last member of obj, following the
// layout of its existing members.
func insertMember(data []byte, obj *jnode, key string, v any) []byte {
	objIndent := lineIndent(data, obj.start)
	kb, _ := json.Marshal(key)
	var text string
	var at, cut int
	if len(obj.members) == 0 {
		child := objIndent + "  "
		vb, _ := json.MarshalIndent(v, child, "  ")
		text = "\n" + child + string(kb) + ": " + string(vb) + "\n" + objIndent
		at, cut = obj.start+1, obj.end-1
	} else {
		first := obj.members[0]
		last := obj.members[len(obj.members)-1]
		if bytes.IndexByte(data[obj.start:first.keyStart], '\n') >= 0 {
			child := lineIndent(data, first.keyStart)
			unit := strings.TrimPrefix(child, objIndent)
			if unit == "" || unit == child {
				unit = "  "
			}
			vb, _ := json.MarshalIndent(v, child, unit)
			text = ",\n" + child + string(kb) + ": " + string(vb)
		} else {
			vb, _ := json.Marshal(v)
			text = ", " + string(kb) + ": " + string(vb)
		}
		at, cut = last.val.end, last.val.end
	}
	out := make([]byte, 0, len(data)+len(text))
	out = append(out, data[:at]...)
	out = append(out, text...)
	return append(out, data[cut:]...)
}

// replaceValue replaces m's value with v, indented like m.
func replaceValue(data []byte, m *jmember, v any) []byte {
	ind := lineIndent(data, m.keyStart)
	vb, _ := json.MarshalIndent(v, ind, "  ")
	out := append([]byte(nil), data[:m.val.start]...)
	out = append(out, vb...)
	return append(out, data[m.val.end:]...)
}

// removeMember cuts m out of obj: with the separator before it when it is
// not the first member, else with the separator after it; an only member
// leaves "{}".
func removeMember(data []byte, obj *jnode, m *jmember) []byte {
	idx := -1
	for i, x := range obj.members {
		if x == m {
			idx = i
		}
	}
	var from, to int
	switch {
	case len(obj.members) == 1:
		from, to = obj.start+1, obj.end-1
	case idx > 0:
		from, to = obj.members[idx-1].val.end, m.val.end
	default:
		from, to = m.keyStart, obj.members[idx+1].keyStart
	}
	out := append([]byte(nil), data[:from]...)
	return append(out, data[to:]...)
}
