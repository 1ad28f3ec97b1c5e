// Package bridge owns the page protocol (PROTOCOL.md): the per-tab
// WebSocket, chunking of large messages, the MCP sessions shared by every tab
// (one per configured server and fingerprint), progress routing,
// cancellation and limits.
//
// It never starts a process itself (the stdio package runs stdio tool
// servers, on top of the child package's supervision), never authenticates
// anyone (a Gate decides who may open a socket), never
// reads Jupyter configuration (a Catalog supplies the servers), and never
// forwards a JSON-RPC method other than initialize, tools/list, tools/call and
// notifications/cancelled to a tool server.
package bridge
