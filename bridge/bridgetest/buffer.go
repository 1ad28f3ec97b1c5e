package bridgetest

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer that one goroutine may write (a logger, a
// child's stderr) while another reads it. The zero value is ready to use.
type Buffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
