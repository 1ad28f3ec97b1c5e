package jupyter

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
)

//go:embed pyscripts/entrypoints.py
var entryPointsScript string

// ProxyEntryPoint is one jupyter_serverproxy_servers entry point of a
// Python environment (what the bridge's wheel installs), loaded as
// jupyter-server-proxy loads it.
type ProxyEntryPoint struct {
	Name        string `json:"name"`         // the server name ({base_url}NAME/)
	Value       string `json:"value"`        // module:function
	Dist        string `json:"dist"`         // the distribution that holds it, "" if unknown
	DistVersion string `json:"dist_version"` // its version
	// Options is what the function returned, as JSON (values JSON cannot
	// hold, such as callables, are their repr strings); nil when it
	// failed.
	Options json.RawMessage `json:"options"`
	// Error says why the entry point could not be loaded or called;
	// jupyter-server-proxy then warns and skips it.
	Error string `json:"error"`
}

// ProxyEntryPoints loads the jupyter_serverproxy_servers entry points with
// py, the Jupyter server's Python (this runs their code, as
// jupyter-server-proxy does when the server starts).
func ProxyEntryPoints(ctx context.Context, opts Options, py *Python) ([]ProxyEntryPoint, error) {
	out, err := runPython(ctx, opts.resolve(), py.Path, entryPointsScript, nil, opts.pythonTimeout())
	if err != nil {
		return nil, fmt.Errorf("list jupyter-server-proxy entry points with %s: %w", py.Path, err)
	}
	var eps []ProxyEntryPoint
	if err := json.Unmarshal(out, &eps); err != nil {
		return nil, fmt.Errorf("list jupyter-server-proxy entry points with %s: unreadable answer: %w", py.Path, err)
	}
	return eps, nil
}
