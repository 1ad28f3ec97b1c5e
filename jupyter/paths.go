package jupyter

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Configuration levels, from the person's own files to the machine's.
const (
	LevelDefault = "default" // built into the bridge (the reference server)
	LevelUser    = "user"    // JUPYTER_CONFIG_DIR, ~/.local/etc/jupyter, JUPYTER_CONFIG_PATH entries inside the home directory
	LevelEnv     = "env"     // {sys.prefix}/etc/jupyter, JUPYTER_CONFIG_PATH entries outside the home directory
	LevelSystem  = "system"  // /usr/local/etc/jupyter, /etc/jupyter
	LevelAdmin   = "admin"   // [mcp_servers] tables of megane_jupyter_bridge.toml
	LevelFile    = "file"    // a --servers file
)

// ConfigDir is one directory of the config search path.
type ConfigDir struct {
	Path  string `json:"path"`
	Level string `json:"level"` // LevelUser, LevelEnv or LevelSystem
}

// pathFacts are the inputs jupyter_core takes from its Python.
type pathFacts struct {
	prefix         string // "" when unknown: the env level is left out
	enableUserSite bool
	userBase       string
	jupyterCore5   bool // jupyter_core ≥ 5
	envAuto        bool // jupyter_core ≥ 5 would prefer env over user here
}

func factsFrom(e env, py *Python, sysPrefix string) pathFacts {
	f := pathFacts{prefix: sysPrefix, enableUserSite: true}
	if py != nil {
		if f.prefix == "" {
			f.prefix = py.Prefix
		}
		f.enableUserSite = py.EnableUserSite
		f.userBase = py.UserBase
		major, _, _ := strings.Cut(py.JupyterCore, ".")
		n, _ := strconv.Atoi(major)
		f.jupyterCore5 = n >= 5
		f.envAuto = f.jupyterCore5 && py.EnvAuto
	}
	if f.userBase == "" && f.enableUserSite {
		if v := e.vars["PYTHONUSERBASE"]; v != "" {
			f.userBase = v
		} else if e.home != "" {
			f.userBase = filepath.Join(e.home, ".local")
		}
	}
	return f
}

// realHome is jupyter_core's get_home_dir: the home directory with
// symbolic links resolved.
func (e env) realHome() string {
	return resolvePath(e.home)
}

// resolvePath resolves symbolic links as far as the path exists, like
// Python's Path.resolve(strict=False).
func resolvePath(p string) string {
	if p == "" {
		return p
	}
	p = filepath.Clean(p)
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	dir, base := filepath.Split(p)
	if dir == "" || dir == p {
		return p
	}
	return filepath.Join(resolvePath(filepath.Clean(dir)), base)
}

// userConfigDir is jupyter_core's jupyter_config_dir (without the
// JUPYTER_NO_CONFIG case).
func (e env) userConfigDir() string {
	if v := e.vars["JUPYTER_CONFIG_DIR"]; v != "" {
		return v
	}
	return filepath.Join(e.realHome(), ".jupyter")
}

// configPath is jupyter_core's jupyter_config_path, highest priority first,
// followed by JupyterApp.config_file_paths (the config dir first when it is
// missing). It is nil when JUPYTER_NO_CONFIG is set (Jupyter then reads
// only an empty temporary directory).
func configPath(e env, f pathFacts) []ConfigDir {
	if e.vars["JUPYTER_NO_CONFIG"] != "" {
		return nil
	}
	home := e.realHome()
	var dirs []ConfigDir
	if v := e.vars["JUPYTER_CONFIG_PATH"]; v != "" {
		for _, p := range strings.Split(v, string(os.PathListSeparator)) {
			p = strings.TrimRight(p, "/")
			level := LevelEnv
			if within(home, p) || within(e.home, p) {
				level = LevelUser
			}
			dirs = append(dirs, ConfigDir{p, level})
		}
	}
	user := []ConfigDir{{e.userConfigDir(), LevelUser}}
	if f.enableUserSite && f.userBase != "" {
		if ud := filepath.Join(f.userBase, "etc", "jupyter"); ud != user[0].Path {
			user = append(user, ConfigDir{ud, LevelUser})
		}
	}
	var envLevel []ConfigDir
	if f.prefix != "" {
		p := filepath.Join(f.prefix, "etc", "jupyter")
		if !slices.Contains(systemConfigPath(e.vars), p) {
			envLevel = append(envLevel, ConfigDir{p, LevelEnv})
		}
	}
	preferEnv := f.envAuto
	if _, ok := e.vars["JUPYTER_PREFER_ENV_PATH"]; ok {
		preferEnv = envTrue(e.vars, "JUPYTER_PREFER_ENV_PATH")
	}
	if preferEnv {
		dirs = append(dirs, envLevel...)
		dirs = append(dirs, user...)
	} else {
		dirs = append(dirs, user...)
		dirs = append(dirs, envLevel...)
	}
	for _, p := range systemConfigPath(e.vars) {
		dirs = append(dirs, ConfigDir{p, LevelSystem})
	}
	return dirs
}

// within reports whether p lies inside (or is) dir.
func within(dir, p string) bool {
	if dir == "" || p == "" {
		return false
	}
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../") && filepath.IsAbs(p) == filepath.IsAbs(dir)
}

// ConfigDirFor returns the user-level Jupyter config directory
// (JUPYTER_CONFIG_DIR, else ~/.jupyter) for opts.
func ConfigDirFor(opts Options) string {
	return opts.resolve().userConfigDir()
}

// RuntimeDir returns Jupyter's runtime directory for opts (runtimeDir).
func RuntimeDir(opts Options) string {
	e := opts.resolve()
	return runtimeDir(func(k string) string { return e.vars[k] }, e.realHome())
}

// dataDir is Jupyter's data directory as jupyter_core computes it:
// JUPYTER_DATA_DIR, else the system's (platformDataDir: on Linux
// ${XDG_DATA_HOME:-~/.local/share}/jupyter, on macOS ~/Library/Jupyter, on
// Windows %APPDATA%\jupyter). getenv reads the environment in question;
// home is the home directory. The one definition: the bridge's own files
// (receipt key, standalone token) and the runtime directory follow it.
func dataDir(getenv func(string) string, home string) string {
	if d := getenv("JUPYTER_DATA_DIR"); d != "" {
		return d
	}
	return platformDataDir(getenv, home)
}

// runtimeDir is Jupyter's runtime directory: JUPYTER_RUNTIME_DIR, else
// {data dir}/runtime.
func runtimeDir(getenv func(string) string, home string) string {
	if d := getenv("JUPYTER_RUNTIME_DIR"); d != "" {
		return d
	}
	return filepath.Join(dataDir(getenv, home), "runtime")
}

// unixHome is HOME of the environment getenv reads, else the bridge's own.
func unixHome(getenv func(string) string) (string, error) {
	if h := getenv("HOME"); h != "" {
		return h, nil
	}
	return os.UserHomeDir()
}
