// Package bridgetest owns the tool servers the bridge's tests talk to: a
// hand-written newline-delimited JSON-RPC 2.0 MCP server over stdio (Serve)
// that misbehaves on request — junk on stdout, crashes, hangs, floods of
// stderr, ignored SIGTERM, grandchildren, huge results, verbatim fixtures —
// and a minimal Streamable HTTP MCP server (HTTPReplay) that replays the
// recorded megane-builder-tools fixtures byte for byte. Both keep a record of
// every method they received, so tests can prove what never arrived.
//
// Tests of any package use it by re-executing their own test binary with
// BRIDGETEST_SERVER set (see ServeFromEnv), or by calling Serve on pipes.
//
// It never uses the go-sdk on the server side (every byte it writes is under
// its own control), never listens on anything but the listener a test gives
// it, never reads a file other than the fixtures and journal a Mode names, and
// is never linked into the bridge binary.
package bridgetest
