package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/megane-labs/megane-jupyter-bridge/bridge/bridgetest"
)

// legitPageEnv makes this test binary the mixed run's legitimate page:
// its value is a legitPageSpec; it prints a legitOutcome line per call.
const legitPageEnv = "MEGANE_TEST_LEGIT_PAGE"

type legitPageSpec struct {
	URL, Fingerprint string
	Until            int64 // Unix ns: no call starts after it
	Every            int64 // ns between calls; if zero, a second
}

type legitOutcome struct {
	At      int64 // Unix ns, when the call was sent
	Latency int64 // ns, to its answer
	Err     string
}

// legitPage is the legitimate page's process: it connects to the legit
// server, then calls echo every spec.Every until spec.Until, and prints each
// outcome as a JSON line. Exit status 1 if it could not connect.
func legitPage(specJSON string) int {
	var spec legitPageSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "legitimate page:", err)
		return 2
	}
	until := time.Unix(0, spec.Until)
	ctx, cancel := context.WithDeadline(context.Background(), until.Add(2*time.Minute))
	defer cancel()
	p, err := dialConnected(ctx, spec.URL, "legit", spec.Fingerprint)
	if err != nil {
		fmt.Fprintln(os.Stderr, "legitimate page:", err)
		return 1
	}
	defer p.Close()
	enc := json.NewEncoder(os.Stdout)
	every := time.Duration(spec.Every)
	if every <= 0 {
		every = time.Second
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for i := 0; time.Now().Before(until); i++ {
		<-tick.C
		arg := map[string]any{"n": i, "pad": strings.Repeat("x", 1024)}
		t0 := time.Now()
		cctx, ccancel := context.WithTimeout(ctx, 60*time.Second)
		r, err := p.Request(cctx, map[string]any{"type": "tools:call", "id": "legit-" + strconv.Itoa(i), "server": "legit", "tool": "echo", "arguments": arg})
		ccancel()
		o := legitOutcome{At: t0.UnixNano(), Latency: int64(time.Since(t0))}
		switch {
		case err != nil:
			o.Err = err.Error()
		case r.OK == nil || !*r.OK:
			o.Err = r.String()
		case !bytes.Contains(r.Fields["result"], []byte(`"n":`+strconv.Itoa(i)+`,`)):
			o.Err = "wrong result: " + string(r.Fields["result"])
		}
		enc.Encode(o)
	}
	return 0
}

// dialConnected opens a page on wsURL and connects it to server, confirmed
// with fingerprint; the page is closed if the connect is not answered ok.
func dialConnected(ctx context.Context, wsURL, server, fingerprint string) (*bridgetest.Page, error) {
	p, _, err := bridgetest.Dial(ctx, wsURL, nil)
	if err != nil {
		return nil, err
	}
	r, err := p.Request(ctx, map[string]any{"type": "tools:connect", "id": "c", "server": server,
		"fingerprint": fingerprint, "confirmed": true})
	if err != nil {
		p.Close()
		return nil, err
	}
	if r.OK == nil || !*r.OK {
		p.Close()
		return nil, fmt.Errorf("connect %s: %s", server, r)
	}
	return p, nil
}
