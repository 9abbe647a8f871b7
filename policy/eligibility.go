package policy

import "fmt"

// Eligibility configures the eligibility core.
type Eligibility struct {
	// ProtectedTools are tool names whose outputs are never pruned.
	// Default: none beyond the property-derived protections.
	ProtectedTools []string `yaml:"protected_tools,omitempty" json:"protected_tools,omitempty"`
	// ProtectedFiles are glob patterns (path.Match, also matched against the
	// base name) of files whose observations are never pruned.
	ProtectedFiles []string `yaml:"protected_files,omitempty" json:"protected_files,omitempty"`
	// MinPruneTokens: items smaller than this are not worth a placeholder.
	// Default 0 (prune whatever is proven redundant and nets a saving).
	MinPruneTokens int `yaml:"min_prune_tokens,omitempty" json:"min_prune_tokens,omitempty"`
}

func (e *Eligibility) setDefaults() {}

func (e *Eligibility) validate() error {
	if e.MinPruneTokens < 0 {
		return fmt.Errorf("min_prune_tokens: must be >= 0")
	}
	return nil
}
