// Package stdio is the MCP stdio transport the bridge uses for every stdio
// tool server: newline-delimited JSON-RPC over the server's stdin and
// stdout, with a bounded stderr tail for error messages.
//
// It owns the server's three pipes and their reading (junk lines on stdout
// skipped and logged, an oversized message failing only its own call,
// stderr kept as a ring of sanitized lines) and the order of a stop (stdin
// closed first). It never decides how a process is started, grouped or
// killed: child does, for every operating system. It never interprets MCP
// beyond telling a response from other messages.
package stdio
