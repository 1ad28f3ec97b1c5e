package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/megane-labs/megane-jupyter-bridge/auth"
)

func TestApprovalsReset(t *testing.T) {
	path := filepath.Join(t.TempDir(), "receipt.key")
	key, err := auth.LoadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	r := auth.NewReceipts(key, auth.ReceiptOptions{KeyFile: path})
	receipt, err := r.Issue("alice", "megane", "sha256:1")
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"approvals", "reset", "--key", path}, nil, &out, &errOut); err != nil {
		t.Fatalf("approvals reset: %v (%s)", err, errOut.String())
	}
	if !strings.Contains(out.String(), path) {
		t.Fatalf("output %q does not name the key", out.String())
	}
	if err := r.Check(receipt, "alice", "megane", "sha256:1"); err == nil {
		t.Fatal("a receipt issued before the reset is still accepted")
	}
	if err := run(context.Background(), []string{"approvals", "frobnicate"}, nil, &out, &errOut); err == nil {
		t.Fatal("an unknown approvals subcommand succeeded")
	}
}
