package bridge

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// The audit record: one JSON line per event, written to Options.AuditFile
// (when set) and logged as a structured line with the message "audit",
// whatever the file's fate. A call's arguments appear only as the SHA-256
// of their JSON text, never their values; no credential appears at all.
// A write that fails is logged once (and again only after a write has
// succeeded since), and never holds up or fails a call.

// Audit events.
const (
	auditOpen    = "open"    // a page's socket admitted
	auditCall    = "call"    // a tools:call answered, refused ones included
	auditConnect = "connect" // a tools:connect answered
	auditConfirm = "confirm" // a person confirmed a server (confirmed: true without a valid approval)
	auditRefused = "refused" // a socket refused at admission, or closed by the bridge with a code
	auditResume  = "resume"  // a socket asked to resume a page session (outcome ok or refused, with the code)
)

// auditShown bounds a string from a page, a server or a configuration in a
// record (a server or tool name, a request's id): a server may list a tool
// named with 256 KiB.
const auditShown = 200

// auditRecord is one line of the audit file.
type auditRecord struct {
	Time        string  `json:"time"`
	Event       string  `json:"event"`
	User        string  `json:"user"`
	Server      string  `json:"server,omitempty"`
	Fingerprint string  `json:"fingerprint,omitempty"`
	Tool        string  `json:"tool,omitempty"`
	ArgsSHA256  string  `json:"args_sha256,omitempty"`
	Outcome     string  `json:"outcome,omitempty"`
	Code        string  `json:"code,omitempty"` // the error code the page got, or a close code / http_NNN
	DurationMs  float64 `json:"duration_ms"`
	BytesIn     int64   `json:"bytes_in"`  // arguments sent to the server
	BytesOut    int64   `json:"bytes_out"` // result received from it
	ID          string  `json:"id,omitempty"`
	Tab         string  `json:"tab,omitempty"`
	Remote      string  `json:"remote,omitempty"`
}

// auditFile appends records to a file, opened for append with mode 0600
// (openAuditFile: never through a link, never a file of someone else's),
// one whole line per write, and rotated by size: path.1 is the latest
// rotated file, up to path.N.
type auditFile struct {
	path string
	max  int64
	keep int
	log  *slog.Logger

	mu         sync.Mutex
	f          *os.File // guarded by mu; nil until the first write, and after a failure
	size       int64    // guarded by mu
	failing    bool     // guarded by mu; the last write failed (and was logged)
	warnedWide bool     // guarded by mu; the log said the file may be read by others
	closed     bool     // guarded by mu
}

func (a *auditFile) open() error {
	f, wide, err := openAuditFile(a.path)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	if wide && !a.warnedWide {
		a.warnedWide = true
		a.log.Warn("the audit file may be read by others: the bridge does not change the mode of a file it did not create (chmod 600 it)", "path", a.path)
	}
	a.f, a.size = f, st.Size()
	return nil
}

// rotate renames path to path.1 (path.1 to path.2, …, dropping path.keep)
// and opens a new path.
func (a *auditFile) rotate() error {
	if a.f != nil {
		a.f.Close()
		a.f = nil
	}
	for i := a.keep - 1; i >= 1; i-- {
		_ = os.Rename(a.path+"."+strconv.Itoa(i), a.path+"."+strconv.Itoa(i+1))
	}
	if err := os.Rename(a.path, a.path+".1"); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("rotate: %w", err)
	}
	return a.open()
}

func (a *auditFile) write(line []byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return
	}
	err := func() error {
		if a.f == nil {
			if err := a.open(); err != nil {
				return err
			}
		}
		if a.size > 0 && a.size+int64(len(line)) > a.max {
			if err := a.rotate(); err != nil {
				return err
			}
		}
		n, err := a.f.Write(line)
		if err != nil && n > 0 && n < len(line) {
			// A full disk took part of the line: take it back, so that
			// the file holds whole records only.
			if terr := a.f.Truncate(a.size); terr == nil {
				n = 0
			}
		}
		a.size += int64(n)
		return err
	}()
	if err != nil {
		if a.f != nil {
			a.f.Close()
			a.f = nil // opened again at the next record
		}
		if !a.failing {
			a.failing = true
			a.log.Warn("cannot write the audit file: calls go on, unrecorded there, until it can be written (check the directory, its permissions and free space)",
				"path", a.path, "error", err)
		}
		return
	}
	if a.failing {
		a.failing = false
		a.log.Info("the audit file can be written again", "path", a.path)
	}
}

func (a *auditFile) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
	if a.f != nil {
		a.f.Close()
		a.f = nil
	}
}

// audit records rec: a log line, and a line of the audit file.
func (b *Bridge) audit(rec auditRecord) {
	rec.Time = time.Now().UTC().Format(time.RFC3339Nano)
	b.log.LogAttrs(context.Background(), slog.LevelInfo, "audit",
		slog.String("event", rec.Event), slog.String("user", rec.User), slog.String("server", rec.Server),
		slog.String("fingerprint", rec.Fingerprint), slog.String("tool", rec.Tool), slog.String("args_sha256", rec.ArgsSHA256),
		slog.String("outcome", rec.Outcome), slog.String("code", rec.Code), slog.Float64("duration_ms", rec.DurationMs),
		slog.Int64("bytes_in", rec.BytesIn), slog.Int64("bytes_out", rec.BytesOut), slog.String("id", rec.ID),
		slog.String("tab", rec.Tab), slog.String("remote", rec.Remote))
	if b.auditFile == nil {
		return
	}
	line, err := json.Marshal(rec)
	if err != nil {
		return
	}
	b.auditFile.write(append(line, '\n'))
}

// argsDigest is the SHA-256 of a call's arguments as the page sent them.
func argsDigest(args []byte) string {
	sum := sha256.Sum256(args)
	return hex.EncodeToString(sum[:])
}

// shown bounds a page-supplied string for a record: at most auditShown
// bytes, valid UTF-8.
func shown(s string) string {
	if len(s) > auditShown {
		s = s[:auditShown]
		for len(s) > 0 && !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		s += "…"
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
