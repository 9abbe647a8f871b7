package api

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// DefaultTimeout is how long a request waits for the pipeline to catch up
// unless Config.Timeout says otherwise.
const DefaultTimeout = 30 * time.Second

// setDefaults fills every unset field that has a default.
func (c *Config) setDefaults() {
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = MaxBodyBytes
	}
	if c.LoginTTL <= 0 {
		c.LoginTTL = DefaultLoginTTL
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Validate reports every invalid field, each by name. New calls it after
// filling the defaults.
func (c Config) Validate() error {
	var errs []error
	if c.Pipeline == nil {
		errs = append(errs, errors.New("pipeline: required"))
	}
	if c.Store == nil {
		errs = append(errs, errors.New("store: required"))
	}
	if c.Tokens == nil {
		errs = append(errs, errors.New("tokens: required"))
	}
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("timeout: negative (%s)", c.Timeout))
	}
	if c.MaxBodyBytes < 0 {
		errs = append(errs, fmt.Errorf("max body bytes: negative (%d)", c.MaxBodyBytes))
	}
	if len(errs) > 0 {
		return fmt.Errorf("api config: %w", errors.Join(errs...))
	}
	return nil
}
