//go:build unix

package child

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The keeper is a small supervisor that runs between the bridge and a stdio
// tool server, so that the server and everything it starts die with the
// bridge, even when the bridge is SIGKILLed.
//
// Start runs the bridge's own executable with MEGANE_BRIDGE_KEEPER=1
// (and nothing else in its environment) as the leader of a new process group,
// with one end of a Unix socket pair as file descriptor 3: the lifeline.
// RunKeeperIfRequested, called first thing by main (and by TestMain), turns
// that process into the keeper. The keeper:
//
//   - on Linux, becomes a child subreaper, so that orphaned descendants (an
//     sh -c wrapper's child, uvx's python) are re-parented to it rather than
//     to init (macOS has no subreaper: an orphan that left the group is
//     found, while it lives, as a descendant of the keeper or in its group);
//   - reads the server's command (keeperSpec, one JSON line) from the lifeline
//     and starts it in the keeper's process group with stdin, stdout and
//     stderr inherited directly (the bridge's pipes; nothing is copied);
//   - answers "started <pid>" or "error <one line>" on the lifeline;
//   - catches SIGTERM, SIGINT and SIGHUP and only waits (a signal sent to the
//     group reaches the server directly; an ignored signal would be inherited);
//   - when the server exits, sends SIGTERM to the rest of its group and its
//     descendants, SIGKILLs what is left after keeperStragglerGrace, reaps
//     everything, reports "exit <code>" or "signal <number>" on the lifeline
//     and exits with the server's status (128+signal for a signal);
//   - when the lifeline reads EOF (the bridge died) or the line "kill" (the
//     bridge's last step before SIGKILL), SIGKILLs every other process of its
//     group and every descendant, reaps them, and exits. Because the keeper
//     reaps them, no zombie is left to an init that may not reap.
//
// The keeper never runs a shell and never reads its own environment for the
// command: the command arrives on the lifeline.

const (
	// keeperEnv marks a process as a keeper.
	keeperEnv = keeperEnvName
	// keeperArg is argv[1] of a keeper, so that it is recognizable in ps.
	keeperArg = "megane-bridge-keeper"
	// keeperLinkFD is the lifeline's descriptor in the keeper (ExtraFiles[0]).
	keeperLinkFD = 3
	// keeperStragglerGrace is how long the keeper waits, after the server
	// exited and the rest of its group got SIGTERM, before SIGKILL.
	keeperStragglerGrace = time.Second
	// keeperKillBound bounds how long the keeper keeps killing and reaping
	// (processes in uninterruptible sleep) before it exits anyway.
	keeperKillBound = 5 * time.Second
)

// keeperSpec is the command the transport asks the keeper to run.
type keeperSpec struct {
	Path string   `json:"path"` // absolute path of the executable
	Argv []string `json:"argv"` // argv, argv[0] included
	Env  []string `json:"env"`  // the complete environment
	Dir  string   `json:"dir"`  // absolute working directory
}

// RunKeeperIfRequested runs the keeper and exits the process if this process
// was started as one (MEGANE_BRIDGE_KEEPER is set); otherwise it returns at
// once. main, and TestMain of every package whose tests start stdio servers,
// must call it before doing anything else.
func RunKeeperIfRequested() {
	if os.Getenv(keeperEnv) == "" {
		return
	}
	os.Exit(runKeeper())
}

// keeperEvent is what the keeper's lifeline reader reports.
type keeperEvent int

const (
	keeperBridgeGone keeperEvent = iota // EOF on the lifeline
	keeperKillAll                       // the bridge asked for SIGKILL
)

func runKeeper() int {
	// Catch (never ignore) the stop signals before anything else: a signal
	// sent to the group is meant for the server, which gets its own copy.
	stopSigs := make(chan os.Signal, 8)
	signal.Notify(stopSigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	sigchld := make(chan os.Signal, 1)
	signal.Notify(sigchld, syscall.SIGCHLD)
	parent := os.Getppid()

	if err := becomeSubreaper(); err != nil {
		fmt.Fprintf(os.Stderr, "megane-bridge keeper: cannot become a child subreaper: %v\n", err)
	}
	unix.CloseOnExec(keeperLinkFD)
	link := os.NewFile(keeperLinkFD, "lifeline")
	if link == nil {
		fmt.Fprintln(os.Stderr, "megane-bridge keeper: no lifeline on descriptor 3")
		return 125
	}
	br := bufio.NewReader(link)
	line, err := br.ReadBytes('\n')
	if err != nil {
		return 125 // the bridge went away before asking for anything
	}
	var spec keeperSpec
	if err := json.Unmarshal(line, &spec); err != nil || spec.Path == "" || len(spec.Argv) == 0 {
		fmt.Fprintf(link, "error the keeper received an unreadable command\n")
		return 125
	}
	env := make([]string, 0, len(spec.Env))
	for _, kv := range spec.Env {
		if !strings.HasPrefix(kv, keeperEnv+"=") {
			env = append(env, kv)
		}
	}
	cmd := &exec.Cmd{
		Path:   spec.Path,
		Args:   spec.Argv,
		Env:    env,
		Dir:    spec.Dir,
		Stdin:  os.Stdin,
		Stdout: os.Stdout,
		Stderr: os.Stderr,
		// On Linux the server dies if the keeper dies without cleaning up
		// (for example when the OOM killer picks the keeper).
		SysProcAttr: serverSysProcAttr(),
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(link, "error %s\n", oneLineStartError(spec.Path, err))
		if errors.Is(err, os.ErrPermission) {
			return 126
		}
		return 127
	}
	child := cmd.Process.Pid
	fmt.Fprintf(link, "started %d\n", child)

	// The lifeline reader: owned by this goroutine until the keeper exits
	// (it ends with the process).
	events := make(chan keeperEvent, 2)
	go func() {
		for {
			l, err := br.ReadString('\n')
			if strings.TrimSpace(l) == "kill" {
				events <- keeperKillAll
			}
			if err != nil {
				events <- keeperBridgeGone
				return
			}
		}
	}()

	var (
		status      syscall.WaitStatus
		childDone   bool
		killing     bool      // SIGKILL everything that is left, on every tick
		bridgeGone  bool      // nobody to report to
		termSentAt  time.Time // when the stragglers got SIGTERM
		killStarted time.Time
	)
	// While the server runs, the keeper sleeps until a signal or a lifeline
	// event; once it is cleaning up, it also polls every 20 ms.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		var tickC <-chan time.Time
		if childDone || killing {
			tickC = tick.C
		}
		select {
		case <-sigchld:
		case <-tickC:
		case <-stopSigs:
			if os.Getppid() != parent { // SIGHUP is the keeper's parent-death signal
				bridgeGone, killing = true, true
			}
		case ev := <-events:
			killing = true
			if ev == keeperBridgeGone {
				bridgeGone = true
			}
		}
		if killing && killStarted.IsZero() {
			killStarted = time.Now()
		}
		// Reap everything that has exited, noting the server's status.
		noChildren := false
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if err == syscall.EINTR {
				continue
			}
			if err != nil { // ECHILD: no descendant is left
				noChildren = true
				break
			}
			if pid <= 0 {
				break
			}
			if pid == child {
				status, childDone = ws, true
			}
		}
		if childDone && termSentAt.IsZero() && !killing {
			termSentAt = time.Now()
			signalOthers(syscall.SIGTERM)
		}
		if !killing && !termSentAt.IsZero() && time.Since(termSentAt) >= keeperStragglerGrace {
			killing = true
			killStarted = time.Now()
		}
		if noChildren && (childDone || killing) {
			break
		}
		if killing {
			if time.Since(killStarted) > keeperKillBound {
				break
			}
			signalOthers(syscall.SIGKILL)
		}
	}
	var (
		code   int
		report string
	)
	switch {
	case !childDone:
		report = "signal " + strconv.Itoa(int(syscall.SIGKILL))
		code = 128 + int(syscall.SIGKILL)
	case status.Signaled():
		report = "signal " + strconv.Itoa(int(status.Signal()))
		code = 128 + int(status.Signal())
	default:
		report = "exit " + strconv.Itoa(status.ExitStatus())
		code = status.ExitStatus()
	}
	if !bridgeGone {
		fmt.Fprintln(link, report)
	}
	return code
}

// oneLineStartError describes why the keeper could not start path.
func oneLineStartError(path string, err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) && pe.Op == "fork/exec" {
		return fmt.Sprintf("%q: %v", path, pe.Err)
	}
	return strings.ReplaceAll(err.Error(), "\n", " ")
}

// signalOthers sends sig to every process in the keeper's process group and
// every descendant of the keeper (including those that moved to another group
// or session), except the keeper itself.
func signalOthers(sig syscall.Signal) {
	self := os.Getpid()
	for _, p := range Tree(unix.Getpgrp(), self) {
		if p.PID != self {
			_ = unix.Kill(p.PID, sig)
		}
	}
}
