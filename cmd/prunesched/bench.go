package main

import (
	"context"
	"errors"
)

// runBench is replaced by the real command.
func runBench(_ context.Context, _ *env, _ []string) error {
	return errors.New("bench: not built yet")
}
