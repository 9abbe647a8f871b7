// Package policy owns prunesched's one configuration file: protection,
// determinism classes, horizons, pressure thresholds and provider cache
// prices. Every field has a documented default; the zero Policy with
// SetDefaults applied is the shipped policy. It decides nothing itself, and
// it must not turn on anything beyond provable pruning by default: the
// recoverable policy and the L3 rung are opt-in fields.
package policy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"

	"go.yaml.in/yaml/v3"
)

// Policy is the whole policy file.
type Policy struct {
	// Name is a free label for the policy; Version is derived from the
	// content (see Version) unless set explicitly.
	Name        string      `yaml:"name,omitempty" json:"name,omitempty"`
	Eligibility Eligibility `yaml:"eligibility" json:"eligibility"`
	Scheduler   Scheduler   `yaml:"scheduler" json:"scheduler"`

	version string
}

// behaviourRevision is mixed into Version; see there.
const behaviourRevision = "rev3"

// Default returns the shipped policy.
func Default() Policy {
	var p Policy
	p.SetDefaults()
	return p
}

// SetDefaults fills every unset field with its documented default.
func (p *Policy) SetDefaults() {
	if p.Name == "" {
		p.Name = "default"
	}
	p.Eligibility.setDefaults()
	p.Scheduler.setDefaults()
}

// Validate checks the policy; errors name the field.
func (p *Policy) Validate() error {
	if err := p.Eligibility.validate(); err != nil {
		return fmt.Errorf("eligibility.%w", err)
	}
	if err := p.Scheduler.validate(); err != nil {
		return fmt.Errorf("scheduler.%w", err)
	}
	return nil
}

// Version is the policy version recorded in every certificate: the name
// plus a short hash of the effective (defaulted) policy, so two runs with
// the same effective policy agree and any change shows.
func (p *Policy) Version() string {
	if p.version != "" {
		return p.version
	}
	b, _ := json.Marshal(p)
	// behaviourRevision changes when a default's meaning changes without
	// the file's effective fields changing (L3 left the default rungs), so
	// certificates from before and after never share a version.
	sum := sha256.Sum256(append(b, behaviourRevision...))
	return p.Name + "@" + hex.EncodeToString(sum[:])[:12]
}

// Load reads a YAML policy file strictly (unknown keys are errors), applies
// defaults and validates.
func Load(path string) (Policy, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Policy{}, fmt.Errorf("load policy %s: %w", path, err)
	}
	p, err := Parse(b)
	if err != nil {
		return Policy{}, fmt.Errorf("load policy %s: %w", path, err)
	}
	return p, nil
}

// Parse decodes a YAML policy strictly, applies defaults and validates.
func Parse(b []byte) (Policy, error) {
	var p Policy
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&p); err != nil && err.Error() != "EOF" {
		return Policy{}, err
	}
	p.SetDefaults()
	if err := p.Validate(); err != nil {
		return Policy{}, err
	}
	return p, nil
}

// YAML renders the effective policy as YAML (for `prunesched policy`).
func (p Policy) YAML() ([]byte, error) { return yaml.Marshal(p) }
