package main

import (
	"context"
	"errors"
	"io"
)

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("serve: not built yet")
}

func runDemoTools(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return errors.New("demo-tools: not built yet")
}
