package stdio

import (
	"bytes"
	"io"
	"time"
)

// LineSink receives a long stdout line in pieces while it is read
// (Options.StreamLine), instead of the line being held whole.
type LineSink interface {
	// Write takes the next piece of the line; the sink owns p from then
	// on. A non-nil error stops the pieces: the rest of the line is read
	// and discarded.
	Write(p []byte) error
	// End is called once, when the line has ended: size is its length in
	// bytes without the newline, and over reports that it passed
	// MaxMessageBytes (the pieces stopped there). It returns the message
	// to decode in the line's place, which goes through FilterIncoming
	// like a line read; nil for none.
	End(size int64, over bool) []byte
}

// PieceSource is what a LineSink may also be: it gives the buffers the
// pieces are read into (empty, of the capacity a piece may fill; one it
// had back, say), instead of a new one of PieceSize bytes for each.
type PieceSource interface {
	Piece() []byte
}

const (
	// PieceSize is the largest piece handed to a LineSink, and the
	// capacity of the buffers it is read into.
	PieceSize = 1 << 20
	// streamFlush is how long a piece may wait to fill: a server that
	// writes slowly still has its bytes passed on.
	streamFlush = 20 * time.Millisecond
)

// streamLine reads the rest of a long line, whose first bytes are
// buf[pos:end], into pieces handed to sink, and returns what sink.End
// gives in its place. The peak is one piece being filled, whatever the
// line's size.
func (m *msgReader) streamLine(sink LineSink) ([]byte, *oversize, error) {
	total := int64(m.end - m.pos)
	over := total > m.max
	stopped := over || sink.Write(bytes.Clone(m.buf[m.pos:m.end])) != nil
	m.pos, m.end = 0, 0
	var piece []byte
	var since time.Time
	src, _ := sink.(PieceSource)
	newPiece := func() []byte {
		if src != nil {
			if p := src.Piece(); cap(p) > 0 {
				return p[:0]
			}
		}
		return make([]byte, 0, PieceSize)
	}
	hand := func() {
		if len(piece) > 0 && !stopped && sink.Write(piece) != nil {
			stopped = true
		}
		piece = nil
	}
	for {
		var dst []byte
		if stopped {
			dst = m.buf[:readChunk]
		} else {
			if piece == nil {
				piece, since = newPiece(), time.Now()
			}
			// At most readChunk bytes at a time, so that the bytes after
			// the newline fit back into the read buffer.
			dst = piece[len(piece):min(cap(piece), len(piece)+readChunk)]
		}
		n, err := m.r.Read(dst)
		got := dst[:n]
		nl := bytes.IndexByte(got, '\n')
		line := got
		if nl >= 0 {
			line = got[:nl]
		}
		total += int64(len(line))
		if !over && total > m.max {
			over, stopped = true, true
			piece = nil
		}
		if !stopped {
			piece = piece[:len(piece)+len(line)]
		}
		if err == nil && n == 0 {
			err = io.ErrNoProgress
		}
		if nl >= 0 || err != nil {
			if nl >= 0 {
				m.end = copy(m.buf, got[nl+1:]) // copy moves overlapping bytes correctly
			}
			if err != nil {
				m.err = err
			}
			hand()
			out := sink.End(total, over)
			if out == nil {
				out = []byte{}
			}
			return out, nil, nil
		}
		if !stopped && (len(piece) == cap(piece) || time.Since(since) >= streamFlush) {
			hand()
		}
	}
}
