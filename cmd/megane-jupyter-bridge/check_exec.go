package main

// The execution checks (§6): each call carries a progress token; the first
// call of a tool is cancelled if it runs past cancelAfter, and then the
// server's process tree must stop using CPU; the time of a complete call
// is held against expectedSeconds and the Builder's timeout.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The bounds of the execution checks.
const (
	// cancelAfter: the first call of each tool is cancelled
	// (notifications/cancelled) if it has not ended this long after it
	// started; a call that ends sooner has nothing to cancel.
	cancelAfter = time.Second
	// cancelGrace: how long the server has after the cancel to stop the
	// work and any program it started ("promptly").
	cancelGrace = time.Second
	// cancelWindow: the server's processes' CPU time is measured over this
	// window, starting cancelGrace after the cancel.
	cancelWindow = time.Second
	// cancelCPUMax: the most CPU, in CPUs, the server's processes may use
	// in that window (a loop that ignores the cancel uses about 1).
	cancelCPUMax = 0.2
	// pingBound: after the window the server must answer a ping within
	// this.
	pingBound = 5 * time.Second
	// nextCallSlack: after a cancel, the same call with sample arguments
	// may take this much longer than it did before the cancel (and
	// nextCallFactor times as long) before check says the cancelled work
	// holds the server: the next call waits behind it.
	nextCallSlack  = 3 * time.Second
	nextCallFactor = 3
	// progressAfter: a call longer than this should send progress ("a
	// couple of seconds"; Builder shows a progress bar above ~2 s).
	progressAfter = 2 * time.Second
	// expectedSlack: a call longer than this many times expectedSeconds
	// (or than progressAfter, without it) gets a warning.
	expectedSlack = 2
	// builderMinTimeout and builderMaxTimeout bound the Builder's timeout,
	// max(60 s, 5 × expectedSeconds), at most 30 minutes.
	builderMinTimeout = 60 * time.Second
	builderMaxTimeout = 30 * time.Minute
)

// errCPUNotMeasured is treeCPU's error where it cannot measure.
var errCPUNotMeasured = errors.New("CPU time is not measured on this OS")

// builderTimeout is how long Builder waits for a call of bt (§6).
func builderTimeout(bt *builderTool) time.Duration {
	exp, _ := bt.Meta["expectedSeconds"].(float64)
	d := max(builderMinTimeout, time.Duration(5*exp*float64(time.Second)))
	return min(d, builderMaxTimeout)
}

// progressCounts counts the progress notifications of each call by its
// token. Its handle is the client's ProgressNotificationHandler.
type progressCounts struct {
	mu   sync.Mutex
	next int            // guarded by mu
	n    map[string]int // guarded by mu; token → notifications
}

func newProgressCounts() *progressCounts { return &progressCounts{n: map[string]int{}} }

func (p *progressCounts) token() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next++
	t := fmt.Sprintf("check-%d", p.next)
	p.n[t] = 0
	return t
}

func (p *progressCounts) handle(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	t := fmt.Sprint(req.Params.ProgressToken)
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.n[t]; ok {
		p.n[t]++
	}
}

// done returns the count for token and forgets it.
func (p *progressCounts) done(token string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.n[token]
	delete(p.n, token)
	return n
}

// caller makes check's calls on one server.
type caller struct {
	cs          *mcp.ClientSession
	progress    *progressCounts
	tree        processTree   // nil for a Streamable HTTP server
	timeout     time.Duration // --timeout: the longest the check waits for a call
	resultLimit int64         // the largest result the bridge accepts, bytes
}

// outcome is one call as check saw it.
type outcome struct {
	res       *mcp.CallToolResult
	raw       json.RawMessage // res as JSON
	took      time.Duration
	progress  int // progress notifications received
	err       error
	cancelled bool // the check cancelled it at cancelAfter
}

// call calls a tool with a progress token and waits at most deadline; with
// cancelAt > 0 it cancels the call that long after it started.
func (c *caller) call(ctx context.Context, name string, args map[string]any, deadline, cancelAt time.Duration) outcome {
	token := c.progress.token()
	params := &mcp.CallToolParams{Name: name, Arguments: args}
	params.SetProgressToken(token)
	cctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	var ours atomic.Bool
	if cancelAt > 0 {
		t := time.AfterFunc(cancelAt, func() { ours.Store(true); cancel() })
		defer t.Stop()
	}
	start := time.Now()
	res, err := c.cs.CallTool(cctx, params)
	o := outcome{res: res, took: time.Since(start), progress: c.progress.done(token), err: err}
	o.cancelled = err != nil && ours.Load() && errors.Is(err, context.Canceled)
	if err == nil {
		o.raw, _ = json.Marshal(res)
	}
	return o
}

// firstCall is the call with sample arguments: cancelled at cancelAfter
// when it runs that long (then the cancellation is checked and the call is
// made again to completion). When it ends sooner, cancellation is
// exercised with a longer call, the sample arguments with each plain
// integer raised to its schema's maximum (longArgs), cancelled at
// cancelAfter; then the cancellation is checked, and the sample call made
// again: a server that keeps computing the cancelled call (a synchronous
// tool in a worker thread that nothing stops, behind a lock) makes it
// wait, which is what a person meets as an unexplained delay.
func (c *caller) firstCall(ctx context.Context, fs *findings, bt *builderTool, args map[string]any) outcome {
	deadline := min(builderTimeout(bt), c.timeout)
	o := c.call(ctx, bt.Name, args, deadline, cancelAfter)
	if o.cancelled {
		c.checkCancelled(ctx, fs)
		return c.call(ctx, bt.Name, args, deadline, 0)
	}
	if o.err != nil || o.res.IsError {
		return o
	}
	long, raised := longArgs(bt, args)
	if len(raised) == 0 {
		fs.add("ok", "§6", "cancellation not exercised: the call ended in %s, before the check cancels (at %s), and the schema has no integer with a maximum to ask for a longer one", o.took.Round(time.Millisecond), cancelAfter)
		return o
	}
	lo := c.call(ctx, bt.Name, long, deadline, cancelAfter)
	if !lo.cancelled {
		fs.add("ok", "§6", "cancellation not exercised: the call ended in %s, and with %s in %s, before the check cancels (at %s)", o.took.Round(time.Millisecond), strings.Join(raised, ", "), lo.took.Round(time.Millisecond), cancelAfter)
		return o
	}
	fs.add("ok", "§6", "cancellation exercised with %s (the sample call ended in %s)", strings.Join(raised, ", "), o.took.Round(time.Millisecond))
	c.checkCancelled(ctx, fs)
	again := c.call(ctx, bt.Name, args, deadline, 0)
	if again.err == nil && again.took > o.took+nextCallSlack && again.took > nextCallFactor*o.took {
		fs.add("fail", "§6", "the call after a cancel waited: the same call took %s, %s before the cancel; the cancelled work still holds the server (stop it when a call is cancelled; the Builder's next call waits behind it)",
			again.took.Round(100*time.Millisecond), o.took.Round(time.Millisecond))
	}
	return o
}

// longArgs returns args with each top-level integer property that has a
// maximum and no widget set to that maximum (a chain length, a molecule
// count: what makes a call long), and those properties as "name=value";
// none raised when the schema has no such property above args' value.
func longArgs(bt *builderTool, args map[string]any) (map[string]any, []string) {
	props, _ := bt.Input["properties"].(map[string]any)
	long := make(map[string]any, len(args))
	for k, v := range args {
		long[k] = v
	}
	var raised []string
	for _, name := range slices.Sorted(maps.Keys(props)) {
		p, _ := props[name].(map[string]any)
		if p == nil || p["type"] != "integer" || p["x-megane-widget"] != nil {
			continue
		}
		maxV, ok := p["maximum"].(float64)
		if !ok || maxV != math.Trunc(maxV) {
			continue
		}
		if cur, ok := toFloat(args[name]); ok && cur >= maxV {
			continue
		}
		long[name] = int64(maxV)
		raised = append(raised, fmt.Sprintf("%s=%d", name, int64(maxV)))
	}
	return long, raised
}

// toFloat is v as a number, when it is one.
func toFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

// checkCancelled checks that the work stopped after a cancel: after
// cancelGrace, the server's processes use at most cancelCPUMax over
// cancelWindow, and the server answers a ping.
func (c *caller) checkCancelled(ctx context.Context, fs *findings) {
	cpu, err := c.cpuAfterCancel(ctx)
	pctx, cancel := context.WithTimeout(ctx, pingBound)
	defer cancel()
	if perr := c.cs.Ping(pctx, nil); perr != nil {
		fs.add("fail", "§6", "cancelled after %s; the server did not answer a ping within %s after that: %v", cancelAfter, pingBound, perr)
		return
	}
	when := fmt.Sprintf("%s to %s after notifications/cancelled", cancelGrace, cancelGrace+cancelWindow)
	switch {
	case c.tree == nil:
		fs.add("warn", "§6", "cancelled after %s; whether the work stopped is not measured for a Streamable HTTP server (its processes are not on this machine)", cancelAfter)
	case errors.Is(err, errCPUNotMeasured):
		fs.add("warn", "§6", "cancelled after %s; whether the work stopped is not measured on this OS", cancelAfter)
	case err != nil:
		fs.add("warn", "§6", "cancelled after %s; whether the work stopped could not be measured: %v", cancelAfter, err)
	case cpu > cancelCPUMax:
		fs.add("fail", "§6", "still working after a cancel: the server's processes used %.0f%% of a CPU %s (%.1f CPU-seconds; at most %.0f%%): stop the work, and any program it started, when a call is cancelled",
			100*cpu, when, cpu*cancelWindow.Seconds(), 100*cancelCPUMax)
	default:
		fs.add("ok", "§6", "cancelled after %s: the work stopped (the server's processes used %.0f%% of a CPU %s) and the server answered a ping", cancelAfter, 100*cpu, when)
	}
}

// cpuAfterCancel waits cancelGrace and returns the CPUs the server's
// process tree used over the next cancelWindow.
func (c *caller) cpuAfterCancel(ctx context.Context) (float64, error) {
	if c.tree == nil {
		return 0, nil
	}
	if err := sleepCtx(ctx, cancelGrace); err != nil {
		return 0, err
	}
	before, err := treeCPU(c.tree)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	if err := sleepCtx(ctx, cancelWindow); err != nil {
		return 0, err
	}
	after, err := treeCPU(c.tree)
	if err != nil {
		return 0, err
	}
	return cpuUsed(before, after).Seconds() / time.Since(start).Seconds(), nil
}

// cpuUsed is the CPU time used between two samples of treeCPU; a process
// new in after counts whole, one gone from it counts nothing.
func cpuUsed(before, after map[int]time.Duration) time.Duration {
	var d time.Duration
	for pid, t := range after {
		d += max(0, t-before[pid])
	}
	return d
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// callFailed reports a call with sample arguments that did not return a
// result; false when it did.
func callFailed(fs *findings, bt *builderTool, o outcome, args map[string]any, checkTimeout time.Duration) bool {
	limit := builderTimeout(bt)
	switch {
	case errors.Is(o.err, context.DeadlineExceeded) && checkTimeout < limit:
		fs.add("warn", "§6", "the call with sample arguments did not finish within --timeout %s (the Builder waits %s): not checked further; raise --timeout", checkTimeout, limit)
	case errors.Is(o.err, context.DeadlineExceeded):
		fs.add("fail", "§6", "the call with sample arguments did not finish within the Builder's timeout of %s (max(60 s, 5 × expectedSeconds), at most 30 min)", limit)
	case o.err != nil:
		fs.add("fail", "§6", "the call with sample arguments failed: %v", o.err)
	case o.res.IsError:
		fs.add("fail", "§5", "the call with sample arguments %s returned a tool error: %s", jsonText(args), firstText(o.res))
	default:
		return false
	}
	return true
}

// timingFindings holds a complete call's time against expectedSeconds and
// the Builder's timeout, and its progress notifications (§6).
func timingFindings(fs *findings, bt *builderTool, took time.Duration, progress int) {
	exp, hasExp := bt.Meta["expectedSeconds"].(float64)
	limit := builderTimeout(bt)
	t := took.Round(time.Millisecond)
	switch {
	case took > limit:
		fs.add("fail", "§6", "the call took %s, over the Builder's timeout of %s (max(60 s, 5 × expectedSeconds), at most 30 min): Builder cancels it", t, limit)
	case hasExp && took.Seconds() > expectedSlack*exp:
		fs.add("warn", bridgeAdvice, "the call with sample arguments took %s, over %d × expectedSeconds (%v s): raise expectedSeconds, which sets the Builder's timeout (§6)", t, expectedSlack, exp)
	case !hasExp && took > progressAfter:
		fs.add("warn", "§6", "the call took %s and the tool has no expectedSeconds: Builder shows a spinner and times out after %s", t, builderMinTimeout)
	}
	if took > progressAfter && progress == 0 {
		fs.add("warn", "§6", "the call took %s and sent no progress notification: send notifications/progress for calls over a couple of seconds", t)
	}
}
