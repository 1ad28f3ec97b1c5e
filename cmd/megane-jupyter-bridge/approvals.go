package main

import (
	"context"
	"errors"
	"io"
)

// runApprovals implements "megane-jupyter-bridge approvals reset". Owned by
// the authentication work (issue 4); a placeholder until it lands.
func runApprovals(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("approvals: not built yet")
}
