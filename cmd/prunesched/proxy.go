package main

import (
	"context"
	"errors"
)

// runProxy is replaced by the real command.
func runProxy(_ context.Context, _ *env, _ []string) error {
	return errors.New("proxy: not built yet")
}
