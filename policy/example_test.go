package policy

import "testing"

// TestExamplePolicyLoads keeps the documented example policy file valid.
func TestExamplePolicyLoads(t *testing.T) {
	p, err := Load("../examples/policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if p.Scheduler.Mode != "scheduled" || p.Eligibility.KeepCopy != "first" {
		t.Errorf("example policy: mode %q keep_copy %q", p.Scheduler.Mode, p.Eligibility.KeepCopy)
	}
	d := Default()
	if p.Version() == d.Version() {
		t.Error("the example changes protected tools and files, so its version must differ from the default's")
	}
	if _, on := p.Eligibility.RecoverableOn(); on {
		t.Error("the example turns the recoverable policy on")
	}
}

// TestRecoverableExampleLoads: examples/recoverable.yaml is the default
// with the recoverable policy on at its documented defaults and the
// break-even horizon fixed at 5 requests.
func TestRecoverableExampleLoads(t *testing.T) {
	p, err := Load("../examples/recoverable.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r, on := p.Eligibility.RecoverableOn()
	want := Recoverable{Enabled: true, HorizonRequests: DefaultRecoverableHorizonRequests,
		QuietRequests: DefaultRecoverableQuietRequests, MinTokens: DefaultRecoverableMinTokens, CommonTermItems: DefaultRecoverableCommonTermItems}
	if !on || r != want {
		t.Errorf("recoverable %+v %v, want %+v", r, on, want)
	}
	var d Policy
	d.Name = "recoverable"
	d.Eligibility.Recoverable = &Recoverable{Enabled: true}
	d.Scheduler.HorizonRequests = 5
	d.SetDefaults()
	if p.Version() != d.Version() {
		t.Errorf("version %s, want the defaults' %s", p.Version(), d.Version())
	}
}

// TestSetDefaultsDoesNotWriteSharedMaps: copies of one Policy are defaulted
// concurrently by every worker's cores; run with -race.
func TestSetDefaultsDoesNotWriteSharedMaps(t *testing.T) {
	base := Default()
	done := make(chan struct{})
	for i := 0; i < 4; i++ {
		go func() {
			defer func() { done <- struct{}{} }()
			p := base
			p.SetDefaults()
		}()
	}
	for i := 0; i < 4; i++ {
		<-done
	}
}
