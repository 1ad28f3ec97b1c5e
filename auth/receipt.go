package auth

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/megane-labs/megane-jupyter-bridge/bridge"
	"github.com/megane-labs/megane-jupyter-bridge/jupyter"
)

// KeySize is the length in bytes of a receipt signing key.
const KeySize = 32

// Defaults for ReceiptOptions.
const (
	DefaultReceiptIssuer   = "megane-jupyter-bridge"
	DefaultReceiptAudience = "megane-builder-tools/confirmation"
	DefaultReceiptTTL      = 30 * 24 * time.Hour
	DefaultReceiptLeeway   = time.Minute
)

// ErrReceipt is wrapped by every error Check returns, so a caller can tell a
// refused receipt (answer confirmation-required) from anything else.
var ErrReceipt = errors.New("confirmation receipt refused")

// LoadOrCreateKey returns the signing key stored at path, creating it with
// KeySize random bytes and mode 0600 if it does not exist. Creation is atomic
// (jupyter.CreateFile): the key is written to a temporary file in the same
// directory and linked into place, so a concurrent creator never sees a
// partial key and two creators agree on one key. A missing parent directory
// is created with mode 0700.
//
// An existing file is refused if it is not a regular file, if group or others
// have any permission on it, or if its size is not KeySize.
func LoadOrCreateKey(path string) ([]byte, error) {
	key, err := readKey(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return key, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create receipt key directory: %w", err)
	}
	fresh, err := newKey()
	if err != nil {
		return nil, err
	}
	if err := jupyter.CreateFile(path, fresh, 0o600); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("install receipt key: %w", err)
	}
	// Either our key or the one a concurrent creator installed first.
	return readKey(path)
}

// RotateKey replaces the key at path with a fresh random one (mode 0600),
// atomically (jupyter.ReplaceFile), so that every receipt signed with the
// old key is refused. The file is created if it does not exist.
func RotateKey(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create receipt key directory: %w", err)
	}
	fresh, err := newKey()
	if err != nil {
		return err
	}
	if err := jupyter.ReplaceFile(path, fresh, 0o600); err != nil {
		return fmt.Errorf("replace receipt key: %w", err)
	}
	return nil
}

// newKey returns KeySize random bytes.
func newKey() ([]byte, error) {
	key := make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("generate receipt key: %w", err)
	}
	return key, nil
}

// readKey reads and checks an existing key file. A missing file yields an
// error wrapping fs.ErrNotExist.
func readKey(path string) ([]byte, error) {
	f, err := openPrivate(path, "receipt key")
	if err != nil {
		return nil, fmt.Errorf("open receipt key: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat receipt key: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("receipt key %s is not a regular file", path)
	}
	if perm, shared := sharedMode(st); shared {
		return nil, fmt.Errorf("receipt key %s has mode %04o: it must be readable by its owner only (chmod 600 it, or run \"megane-jupyter-bridge approvals reset\")", path, perm)
	}
	if st.Size() != KeySize {
		return nil, fmt.Errorf("receipt key %s has %d bytes, want %d (run \"megane-jupyter-bridge approvals reset\")", path, st.Size(), KeySize)
	}
	key := make([]byte, KeySize)
	if _, err := f.ReadAt(key, 0); err != nil {
		return nil, fmt.Errorf("read receipt key %s: %w", path, err)
	}
	return key, nil
}

// ReceiptOptions configures Receipts. The zero value is usable.
type ReceiptOptions struct {
	// Issuer is the "iss" claim written and required. If empty,
	// DefaultReceiptIssuer.
	Issuer string
	// Audience is the "aud" claim written and required. If empty,
	// DefaultReceiptAudience.
	Audience string
	// TTL is how long a receipt stays valid. If zero, 30 days.
	TTL time.Duration
	// Leeway is the clock skew tolerated on expiry and issue time. If zero,
	// 1 minute.
	Leeway time.Duration
	// KeyFile, if set, is the file the key came from (see LoadOrCreateKey).
	// Receipts re-reads it whenever its identity, size or modification time
	// changes, so "approvals reset" run by another process revokes receipts
	// in a running bridge at once. If the file becomes unreadable, Issue and
	// Check fail (closed). If empty, the key given to NewReceipts is used for
	// the life of the Receipts.
	KeyFile string
	// Now returns the current time. If nil, time.Now. For tests.
	Now func() time.Time
}

// Receipts issues and checks confirmation receipts: HS256 JWTs bound to a
// user, a server name and the server's fingerprint. It implements
// bridge.Approvals and is safe for concurrent use.
type Receipts struct {
	issuer, audience string
	ttl, leeway      time.Duration
	keyFile          string
	now              func() time.Time

	mu      sync.Mutex // guards key and keyStat
	key     []byte
	keyStat fs.FileInfo // of keyFile when key was read; nil until then
}

var _ bridge.Approvals = (*Receipts)(nil)

// NewReceipts returns Receipts signing with key (see LoadOrCreateKey).
func NewReceipts(key []byte, opts ReceiptOptions) *Receipts {
	r := &Receipts{
		issuer:   opts.Issuer,
		audience: opts.Audience,
		ttl:      opts.TTL,
		leeway:   opts.Leeway,
		keyFile:  opts.KeyFile,
		now:      opts.Now,
		key:      append([]byte(nil), key...),
	}
	if r.issuer == "" {
		r.issuer = DefaultReceiptIssuer
	}
	if r.audience == "" {
		r.audience = DefaultReceiptAudience
	}
	if r.ttl <= 0 {
		r.ttl = DefaultReceiptTTL
	}
	if r.leeway <= 0 {
		r.leeway = DefaultReceiptLeeway
	}
	if r.now == nil {
		r.now = time.Now
	}
	if r.keyFile != "" {
		if st, err := os.Stat(r.keyFile); err == nil {
			r.keyStat = st
		}
	}
	return r
}

// receiptClaims are the claims of a receipt: sub is the user.
type receiptClaims struct {
	Server      string `json:"srv"`
	Fingerprint string `json:"fp"`
	jwt.RegisteredClaims
}

// currentKey returns the signing key, re-reading KeyFile if it changed.
func (r *Receipts) currentKey() ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.keyFile == "" {
		return r.key, nil
	}
	st, err := os.Stat(r.keyFile)
	if err != nil {
		return nil, fmt.Errorf("receipt key: %w", err)
	}
	if r.keyStat != nil && sameFile(st, r.keyStat) {
		return r.key, nil
	}
	key, err := readKey(r.keyFile)
	if err != nil {
		return nil, err
	}
	r.key, r.keyStat = key, st
	return key, nil
}

func sameFile(a, b fs.FileInfo) bool {
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

// Issue implements bridge.Approvals.
func (r *Receipts) Issue(user, server, fingerprint string) (string, error) {
	if user == "" || server == "" || fingerprint == "" {
		return "", errors.New("issue receipt: user, server and fingerprint are required")
	}
	key, err := r.currentKey()
	if err != nil {
		return "", fmt.Errorf("issue receipt: %w", err)
	}
	now := r.now()
	claims := receiptClaims{
		Server:      server,
		Fingerprint: fingerprint,
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    r.issuer,
			Subject:   user,
			Audience:  jwt.ClaimStrings{r.audience},
			IssuedAt:  jwt.NewNumericDate(now),
			NotBefore: jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(r.ttl)),
		},
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(key)
	if err != nil {
		return "", fmt.Errorf("issue receipt: %w", err)
	}
	return s, nil
}

// Check implements bridge.Approvals. Every refusal wraps ErrReceipt.
func (r *Receipts) Check(receipt, user, server, fingerprint string) error {
	key, err := r.currentKey()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrReceipt, err)
	}
	p := jwt.NewParser(
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithIssuer(r.issuer),
		jwt.WithAudience(r.audience),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(r.leeway),
		jwt.WithTimeFunc(r.now),
		jwt.WithStrictDecoding(),
	)
	var c receiptClaims
	_, err = p.ParseWithClaims(receipt, &c, func(*jwt.Token) (any, error) { return key, nil })
	switch {
	case err != nil:
		return fmt.Errorf("%w: %w", ErrReceipt, err)
	case c.Subject != user:
		return fmt.Errorf("%w: issued to another user", ErrReceipt)
	case c.Server != server:
		return fmt.Errorf("%w: issued for another server", ErrReceipt)
	case c.Fingerprint != fingerprint:
		return fmt.Errorf("%w: issued for another fingerprint", ErrReceipt)
	}
	return nil
}
