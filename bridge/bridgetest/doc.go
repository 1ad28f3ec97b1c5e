// Package bridgetest is the project's one kit of fake tool servers for
// tests. It owns a hand-written newline-delimited JSON-RPC 2.0 MCP server
// over stdio (Serve) that misbehaves on request — junk on stdout, crashes,
// hangs, a deaf server, floods of stderr, ignored SIGTERM, grandchildren in
// and out of its process group, huge results with the id first or last,
// verbatim fixtures — and a minimal Streamable HTTP MCP server (HTTPReplay)
// that replays the recorded megane-builder-tools fixtures byte for byte.
// Both keep a record of every method they received, so tests can prove what
// never arrived. Its sub-package contractkit is the other half of the kit: a
// go-sdk Builder tool server that breaks one rule of the Builder Tool
// Contract at a time, for the tests of `check`.
//
// Tests of any package use it by re-executing their own test binary with
// BRIDGETEST_SERVER set (see ServeFromEnv), or by calling Serve on pipes.
//
// It never uses the go-sdk on the server side (every byte it writes is under
// its own control), never listens on anything but the listener a test gives
// it, never reads a file other than the fixtures and journal a Mode names,
// never writes one other than that journal and the pid files a Mode names,
// and is never linked into the bridge binary.
package bridgetest
