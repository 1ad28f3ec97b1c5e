package main

import (
	"context"
	"errors"
	"io"
)

// The administration subcommands. Owned by the configuration work (issue 3);
// these are placeholders until it lands.

func runServers(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("servers: not built yet")
}

func runDoctor(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("doctor: not built yet")
}

func runInstall(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("install: not built yet")
}

func runUninstall(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("uninstall: not built yet")
}
