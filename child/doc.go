// Package child runs the processes the bridge starts and guarantees how they
// end: tool servers for the whole life of a session, and short-lived helpers
// (Python probes, doctor's probes, test servers).
//
// It owns, for every supported system:
//
//   - the PATH search that finds a configured command (LookPath);
//   - a group for each tool server: a process group under a keeper on Linux
//     and macOS (see RunKeeperIfRequested), a Job Object on Windows, so that
//     the server and everything it starts are stopped together;
//   - the stop ladder (Process.Stop): the caller closes stdin, then after a
//     grace the group is asked to stop (SIGTERM; CTRL_BREAK on Windows), then
//     killed (SIGKILL; the job is terminated on Windows);
//   - the promise that a tool server and its descendants die with the bridge,
//     even when the bridge is killed without warning (the keeper's lifeline;
//     a kill-on-close job on Windows);
//   - watching the bridge's own parent (WatchParent).
//
// Operating-system differences live in this package's per-OS files
// (_linux.go, _darwin.go, _unix.go, _windows.go) and nowhere else; the rest
// of the bridge has none. The package never reads or writes a child's
// standard streams (callers pass the pipes), never runs a shell, and never
// decides what to run: the command comes from the caller, as configured.
package child
