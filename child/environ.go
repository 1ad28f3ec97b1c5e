package child

import (
	"slices"
	"strings"
)

// Environ is a tool server's environment: base (KEY=VALUE; the bridge's own
// as a rule) without the variables strip names, without those extra sets,
// then extra in name order. A "*" in a strip entry stands for any run of
// characters (none included): "NAME_*" names every variable that starts
// with NAME_, "JUPYTER*TOKEN*" every one that starts with JUPYTER and has
// TOKEN after that. The keeper's marker is
// always removed. The one rule for what a tool server inherits: the bridge
// and doctor both build the environment here.
func Environ(base, strip []string, extra map[string]string) []string {
	env := make([]string, 0, len(base)+len(extra))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if overridden(extra, k) || Strips(strip, k) || strings.HasPrefix(EnvKey(k), keeperEnvName) {
			continue
		}
		env = append(env, kv)
	}
	names := make([]string, 0, len(extra))
	for k := range extra {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		env = append(env, k+"="+extra[k])
	}
	return env
}

// Strips reports whether strip names the variable name (see Environ).
// Names compare as the system compares them (EnvKey).
func Strips(strip []string, name string) bool {
	name = EnvKey(name)
	for _, p := range strip {
		if globMatch(EnvKey(p), name) {
			return true
		}
	}
	return false
}

// globMatch reports whether name matches pattern, in which "*" matches any
// run of characters and every other character itself. Greedy with one
// backtrack point, so linear in practice and never exponential.
func globMatch(pattern, name string) bool {
	p, n := 0, 0
	star, mark := -1, 0
	for n < len(name) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, n
			p++
		case p < len(pattern) && pattern[p] == name[n]:
			p++
			n++
		case star >= 0:
			mark++
			p, n = star+1, mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// Getenv is the value of key in env (KEY=VALUE), the last one when it is
// there more than once, as a started process sees it; keys compare as the
// system compares them (EnvKey: "Path" is PATH on Windows).
func Getenv(env []string, key string) string {
	key = EnvKey(key)
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && EnvKey(k) == key {
			return v
		}
	}
	return ""
}

func overridden(extra map[string]string, k string) bool {
	for e := range extra {
		if EnvKey(e) == EnvKey(k) {
			return true
		}
	}
	return false
}

// keeperEnvName marks a keeper process (RunKeeperIfRequested); no tool
// server may inherit it.
const keeperEnvName = "MEGANE_BRIDGE_KEEPER"
