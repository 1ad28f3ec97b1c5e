package child

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"
)

// Spec says what to run. Every field is the caller's: Start neither adds to
// nor reads from the bridge's own environment for the child.
type Spec struct {
	// Name names the program in messages and in the process list.
	Name string
	// Path is the executable, as LookPath returned it.
	Path string
	// Args is the argument list, argv[0] included. If empty, {Path}.
	Args []string
	// Env is the child's complete environment (KEY=VALUE). Nil is an empty
	// environment, not the bridge's.
	Env []string
	// Dir is the working directory, an absolute path.
	Dir string
	// Stdin, Stdout and Stderr are the child's ends of its standard
	// streams. Start does not close them: the caller closes its copies once
	// Start has returned.
	Stdin, Stdout, Stderr *os.File
	// KeeperPath is the executable that runs the keeper on Linux and macOS:
	// a binary whose main calls RunKeeperIfRequested first. If empty,
	// os.Executable(). Unused on Windows, where a Job Object does the
	// keeper's work.
	KeeperPath string
}

// Exit says how a process ended.
type Exit struct {
	Code   int    // the exit status; -1 when a signal ended it
	Signal string // "SIGKILL", …; empty when none
}

// String is "exited with status 1" or "was killed by signal SIGKILL".
func (e Exit) String() string {
	if e.Signal != "" {
		return "was killed by signal " + e.Signal
	}
	return "exited with status " + strconv.Itoa(e.Code)
}

// Process is a started tool server and its group. Its methods are safe for
// concurrent use.
type Process struct {
	name string
	pid  atomic.Int64  // the server's own pid; set once it started
	done chan struct{} // closed by the per-OS wait loop once the group leader is gone and exit is set
	exit Exit          // written before done is closed
	os   osProcess     // per-OS state
}

// Pid is the server process's own id, or 0 if it never started.
func (p *Process) Pid() int { return int(p.pid.Load()) }

// Group identifies the server's group: the keeper's pid, which is the
// process group id, on Linux and macOS; the server's pid on Windows.
func (p *Process) Group() int { return p.os.group() }

// Done is closed once the server has exited and its group is gone (or
// being killed), and Exit is known.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exit says how the server ended; it is the zero Exit before Done.
func (p *Process) Exit() Exit {
	select {
	case <-p.done:
		return p.exit
	default:
		return Exit{}
	}
}

// Stop stops the server and its group in steps and returns once Done is
// closed. The caller closes the server's stdin first (the polite request);
// Stop then waits up to terminate for the server to exit, asks the group to
// stop (SIGTERM to the process group; CTRL_BREAK on Windows), waits up to
// kill, and kills the group (SIGKILL; the job is terminated on Windows).
func (p *Process) Stop(terminate, kill time.Duration) {
	stopInSteps(p.done, terminate, kill, p.os.interrupt, func() { p.os.kill(p.done) })
}

// stopInSteps is Stop's ladder, apart from the system calls: it returns as
// soon as done is closed; else, after terminate, calls interrupt; after kill
// more, calls killGroup and waits for done.
func stopInSteps(done <-chan struct{}, terminate, kill time.Duration, interrupt, killGroup func()) {
	if waitDone(done, terminate) {
		return
	}
	interrupt()
	if waitDone(done, kill) {
		return
	}
	killGroup()
	<-done
}

func waitDone(done <-chan struct{}, d time.Duration) bool {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-done:
		return true
	case <-tm.C:
		return false
	}
}

// Start runs spec in a group of its own and returns once the server process
// has started (or could not be). ctx bounds only the start, not the
// process's life. An error is one line naming what to fix.
func Start(ctx context.Context, spec Spec) (*Process, error) {
	if spec.Path == "" {
		return nil, errors.New("no executable given")
	}
	if len(spec.Args) == 0 {
		spec.Args = []string{spec.Path}
	}
	if spec.Name == "" {
		spec.Name = filepath.Base(spec.Path)
	}
	if !filepath.IsAbs(spec.Dir) {
		return nil, fmt.Errorf("working directory %q is not an absolute path", spec.Dir)
	}
	p := &Process{name: spec.Name, done: make(chan struct{})}
	if err := p.start(ctx, spec); err != nil {
		return nil, err
	}
	return p, nil
}

// pathErrText is err without the path an *os.PathError repeats.
func pathErrText(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
