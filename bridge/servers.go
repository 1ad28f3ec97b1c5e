package bridge

import (
	"strings"
	"time"
)

// tools:servers lists the configured servers with what the bridge is doing
// with each (the pool's sessions, this tab's shares); tools:openSettings
// names the settings files.

// serverView is a server as tools:servers shows it: its description and
// what the bridge is doing with it now.
type serverView struct {
	ServerDescription
	State     string `json:"state"`
	Connected bool   `json:"connected"`
	Tabs      int    `json:"tabs"`
	Calls     int    `json:"calls"`
	// Totals are the server's call counters since the bridge started,
	// the metrics' own (Bridge.ServerCounters); only in tools:servers.
	Totals    *ServerCounters `json:"totals,omitempty"`
	LastError string          `json:"lastError,omitempty"`
	// InUse, when this tab still uses a session started from an earlier
	// definition of the entry (the admin changed it since the tab
	// connected), is that definition: state, tabs and calls are then that
	// session's, and connected is true. A connect uses the entry as listed.
	InUse  *ServerDescription `json:"inUse,omitempty"`
	Stderr []string           `json:"stderr,omitempty"` // the latest stderr lines, while starting or after a failure
	// BusyAfterCancelMs, when the server's processes have kept computing
	// since a call was cancelled (a stdio server on Linux or Windows), is
	// for how long: its next calls wait behind that work.
	BusyAfterCancelMs int64 `json:"busyAfterCancelMs,omitempty"`
}

func viewOf(spec ServerSpec) *serverView {
	return &serverView{ServerDescription: spec.Describe(), State: stateStopped}
}

// ShellQuote quotes argv as a POSIX shell would need it.
func ShellQuote(argv []string) string {
	parts := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=@%+,") == "" {
			parts[i] = a
			continue
		}
		parts[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(parts, " ")
}

func (t *tab) serversReply(m pageMessage) []byte {
	snap := t.b.snapshot(t.ctx, 0)
	t.mu.Lock()
	held := make(map[string]*session, len(t.shares))
	for k, v := range t.shares {
		held[k] = v
	}
	t.mu.Unlock()
	views := t.b.pool.views(snap.Servers)
	inUse := map[string]*session{} // by entry name: a session of an earlier definition this tab still uses
	for i, spec := range snap.Servers {
		s := held[spec.Name]
		switch {
		case s == nil:
		case s.spec.Fingerprint == spec.Fingerprint:
			views[i].Connected = true
		default:
			// The tab calls the session it connected until it connects
			// again: show that one, not the new definition's (stopped).
			old := t.b.pool.views([]ServerSpec{s.spec})[0]
			d := s.spec.Describe()
			views[i].InUse, views[i].Connected = &d, true
			views[i].State, views[i].Tabs, views[i].LastError, views[i].Stderr = old.State, old.Tabs, old.LastError, old.Stderr
			inUse[spec.Name] = s
		}
	}
	totals := t.b.ServerCounters()
	for _, v := range views {
		s := inUse[v.Name]
		if s == nil {
			s = t.b.pool.get(v.Name + "\x00" + v.Fingerprint)
		}
		if s != nil {
			v.Calls = s.callCount()
			v.BusyAfterCancelMs = s.busyAfterCancelFor().Milliseconds()
		}
		c := totals[v.Name]
		v.Totals = &c
	}
	problems := snap.Problems
	if problems == nil {
		problems = []Problem{}
	}
	return buildMessage(struct {
		replyHead
		Bridge   bridgeInfo    `json:"bridge"`
		User     string        `json:"user,omitempty"`
		Servers  []*serverView `json:"servers"`
		Problems []Problem     `json:"problems"`
	}{replyHead{Type: m.Type, ID: m.ID, OK: true},
		bridgeInfo{t.b.opts.Name, t.b.opts.Version, ProtocolVersion}, t.adm.User, views, problems})
}

type bridgeInfo struct {
	Name     string `json:"name"`
	Version  string `json:"version"`
	Protocol int    `json:"protocol"`
}

// findSpec looks name up in the configuration as read at most maxAge ago
// (read now when maxAge is not positive).
func (t *tab) findSpec(name string, maxAge time.Duration) (ServerSpec, Snapshot, bool) {
	snap := t.b.snapshot(t.ctx, maxAge)
	for _, s := range snap.Servers {
		if s.Name == name {
			return s, snap, true
		}
	}
	return ServerSpec{}, snap, false
}

// handleOpenSettings answers tools:openSettings with the settings files
// the Catalog reports.
func (t *tab) handleOpenSettings(m pageMessage) {
	snap := t.b.snapshot(t.ctx, 0)
	settings := snap.Settings
	if settings.Files == nil {
		settings.Files = []SettingsFile{}
	}
	t.push(buildMessage(struct {
		replyHead
		Settings
	}{replyHead{Type: m.Type, ID: m.ID, OK: true}, settings}))
}
