package bridge

import (
	"context"
	"encoding/json"
	"time"
)

// Probe is what starting a server taught: for doctor, which must say what
// a page's tools:connect would meet.
type Probe struct {
	ProtocolVersion string          // the revision the server and the bridge agreed on
	ServerInfo      json.RawMessage // the server's serverInfo object, raw; nil if it sent none
	Tools           int             // the tools a page would be offered
	Dropped         json.RawMessage // a JSON array of {name, reason}: tools left out; nil if none
	Initialize      time.Duration   // from the start to the end of the handshake (revision negotiation included)
	ListTools       time.Duration   // every page of tools/list
}

// Probe starts spec as a tab's tools:connect starts a session (the same
// transport, environment, headers, limits, revision negotiation and
// tools/list checks, per b's Options), then stops it. The error is the one
// line a page would be told. The probe is not one of b's sessions: no page
// sees it and no tab can use it; what it learned of the server's revision
// is remembered as a session's would be.
func (b *Bridge) Probe(ctx context.Context, spec ServerSpec) (Probe, error) {
	var p Probe
	s := newSession(b, spec)
	begin := time.Now()
	conn, err := s.start(ctx)
	if conn != nil {
		defer conn.close()
	}
	if err == nil {
		p.Initialize = time.Since(begin)
		begin = time.Now()
		err = s.refreshListing(ctx)
		p.ListTools = time.Since(begin)
	}
	if err != nil {
		return p, s.describe(err)
	}
	p.ProtocolVersion, p.ServerInfo = s.protocolVersion, s.serverInfo
	if l := s.currentListing(); l != nil {
		p.Tools, p.Dropped = len(l.tools), l.dropped
	}
	return p, nil
}
