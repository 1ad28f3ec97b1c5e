// Package bridge owns the page protocol (PROTOCOL.md): the per-tab
// WebSocket, chunking of large messages, the MCP sessions shared by every tab
// (one per configured server and fingerprint), progress routing,
// cancellation and limits.
//
// It never starts a process itself (the stdio package runs stdio tool
// servers, on top of the child package's supervision), never authenticates
// anyone (a Gate decides who may open a socket), never
// reads Jupyter configuration (a Catalog supplies the servers), and never
// sends a tool server anything but the handshake (server/discover,
// initialize, notifications/initialized), tools/list, tools/call,
// notifications/cancelled and ping (and, at revision 2026-07-28, the
// subscriptions/listen that carries list_changed).
//
// One file per concern:
//
//   - bridge.go: Options and their defaults; Bridge: New, a socket's
//     admission by the Gate and its upgrade, Close; the Catalog's answer,
//     read at most so often.
//   - routes.go: the HTTP paths the bridge answers (socket, metrics, page,
//     readiness).
//   - tab.go: one page's socket: what the Gate admitted, the read loop and
//     dispatch, the write loop and its bounded queue, shedding the tab
//     furthest behind, the periodic recheck, the requests in flight.
//   - protocol.go: page messages: the envelope, the error codes, replies.
//   - chunk.go: tools:chunk in both directions, and the memory of
//     incomplete sequences.
//   - inbound.go: a page's frame read in pieces, counted against the
//     memory of the frames all tabs are sending (Options.InboundMemory).
//   - servers.go: tools:servers and tools:openSettings, and finding a server
//     in the configuration.
//   - connect.go: tools:connect (confirmation, approvals, the wait for a
//     start with its stderr as progress), tools:disconnect, and the end of a
//     session a tab holds.
//   - call.go: tools:call and tools:cancel: a call's limits and timeout, its
//     one answer, and its progress, which the session that received it
//     routes among its own calls only.
//   - pool.go: the sessions tabs share, one per server definition, under a
//     lock of its own: acquire, release, the idle grace, the end, and each
//     server's last failure.
//   - session.go: one MCP session's life: start (stdio or Streamable HTTP),
//     tools/list, tools/call upstream, liveness (the pings of a silent
//     server), its end (PROTOCOL.md, "When a session ends").
//   - tap.go, httptap.go: the raw tap under go-sdk (results byte for byte,
//     progress in wire order); httptap.go is the Streamable HTTP side, and
//     the one place that decides how a call is cancelled at each revision
//     (cancelByClosing) and that one refused message is that message's
//     failure, not the session's.
//   - stream.go, jsonstream.go: a result streamed to the page while a
//     stdio server writes it (the feature "stream"): the stdio reader's
//     LineSink, each piece checked as it passes (jsonScan: JSON as
//     encoding/json judges it; utf8Stream), the pace kept with a page that
//     keeps up, the sequence's end with the call's answer.
//   - pagesession.go: tools:hello and its features, page sessions
//     (numbered messages, tools:ack, a socket's resume, the bounds of pages
//     away).
//   - discover.go: revision 2026-07-28's server/discover, bounded (the
//     stdio side; httptap.go bounds it over HTTP), the one rule that starts
//     a slow server of 2026-07-28 only again, and the revision each server
//     last agreed to.
//   - probe.go: Bridge.Probe, a session's start and tools/list outside the
//     pool, for doctor and check.
//   - metrics.go: the Prometheus registry of each Bridge and its metrics
//     (bounded label values), the /metrics route's admission (the Gate, or
//     a direct request from loopback), and Bridge.ServerCounters for the
//     status page; audit.go: the audit record, a log line and a line of
//     the audit file (owner-only, rotated by size) per call, connect,
//     confirmation and refusal.
//   - memory.go: the memory ceiling; credentials.go: an HTTP server's 401
//     and 403; api.go: what callers supply and receive (ServerSpec,
//     Catalog, Gate, Approvals).
//
// A call's route: tab.readLoop → tab.dispatch → tab.handleCall (call.go:
// the tab's share of the session, limits, session.addCall) →
// session.callTool upstream; the server's progress comes back through the
// session's tap to session.routeProgress (call.go), which finds the call
// among that session's calls and pushes it to the call's tab, at most one
// per ProgressInterval (call.progress holds the latest meanwhile); the
// result answers the call once (call.finish), after any progress held.
package bridge
