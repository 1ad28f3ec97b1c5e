// Package jupyter owns everything about Jupyter: configuration and runtime
// paths as jupyter_core computes them, reading MeganeBuilderTools.mcp_servers
// (and the admin TOML settings) from the server's configuration, the default
// reference server, fingerprints, finding the parent Jupyter server and asking
// it who a request is and whether it may execute kernels.
//
// It never speaks MCP and never touches WebSockets.
package jupyter
