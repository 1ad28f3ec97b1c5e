package bridgetest

import (
	"context"
	"net"
	"sync"
)

// PipeNet is an in-memory network with one listener: each Dial returns one
// end of a net.Pipe whose other end Accept returns. Everything on it blocks
// durably, so an HTTP server and its clients on it can share a
// testing/synctest bubble and be tested in virtual time. A PipeNet is a
// net.Listener; Close makes Accept and later Dials fail.
type PipeNet struct {
	conns  chan net.Conn // unbuffered: a Dial waits for an Accept
	closed chan struct{} // closed by Close
	once   sync.Once
}

// NewPipeNet returns an open PipeNet.
func NewPipeNet() *PipeNet {
	return &PipeNet{conns: make(chan net.Conn), closed: make(chan struct{})}
}

// Accept waits for a Dial.
func (n *PipeNet) Accept() (net.Conn, error) {
	select {
	case c := <-n.conns:
		return c, nil
	case <-n.closed:
		return nil, net.ErrClosed
	}
}

// Close stops the listener.
func (n *PipeNet) Close() error {
	n.once.Do(func() { close(n.closed) })
	return nil
}

// Addr is a loopback address (the network has no addresses).
func (n *PipeNet) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// Dial connects to the listener.
func (n *PipeNet) Dial(ctx context.Context) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case n.conns <- server:
		return client, nil
	case <-n.closed:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// DialContext is Dial with net.Dialer's signature (for http.Transport);
// network and addr are ignored.
func (n *PipeNet) DialContext(ctx context.Context, _, _ string) (net.Conn, error) { return n.Dial(ctx) }
