package main

import (
	"context"
	"errors"
)

// runLab is replaced by the real command.
func runLab(_ context.Context, _ *env, _ []string) error {
	return errors.New("lab: not built yet")
}
