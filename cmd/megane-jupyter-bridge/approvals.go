package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/megane-labs/megane-jupyter-bridge/auth"
	"github.com/megane-labs/megane-jupyter-bridge/jupyter"
)

// runApprovals implements "megane-jupyter-bridge approvals reset [--key
// PATH]": it replaces the confirmation-receipt signing key, so every receipt
// issued so far is refused and each server must be confirmed again. A
// running bridge notices the new key on its next check.
func runApprovals(_ context.Context, args []string, stdout, stderr io.Writer) error {
	const usage = "usage: megane-jupyter-bridge approvals reset [--key PATH]"
	fs := flag.NewFlagSet("approvals reset", flag.ContinueOnError)
	key := fs.String("key", "", "the receipt signing key (default: <Jupyter data dir>/megane-jupyter-bridge/receipt.key)")
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
		writeHelp(stdout, fs, approvalsHelp)
		return errHelpShown
	}
	if len(args) == 0 || args[0] != "reset" {
		fmt.Fprintln(stderr, usage)
		return usageError{}
	}
	if err := parseFlags(fs, args[1:], approvalsHelp, stdout, stderr); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		fmt.Fprintln(stderr, usage)
		return usageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	path := *key
	if path == "" {
		p, err := jupyter.ReceiptKeyPath(nil)
		if err != nil {
			return fmt.Errorf("approvals reset: %w", err)
		}
		path = p
	}
	if err := auth.RotateKey(path); err != nil {
		return fmt.Errorf("approvals reset: %w", err)
	}
	fmt.Fprintf(stdout, "every confirmation receipt is revoked: new signing key in %s\n", path)
	return nil
}
