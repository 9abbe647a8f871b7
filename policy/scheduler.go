package policy

import "fmt"

// Scheduler configures the timing scheduler.
type Scheduler struct {
	// Mode is "next_request" (apply every pending mark at the next model
	// request). Default next_request.
	Mode string `yaml:"mode,omitempty" json:"mode,omitempty"`
}

func (s *Scheduler) setDefaults() {
	if s.Mode == "" {
		s.Mode = "next_request"
	}
}

func (s *Scheduler) validate() error {
	switch s.Mode {
	case "next_request":
	default:
		return fmt.Errorf("mode: bad value %q", s.Mode)
	}
	return nil
}
