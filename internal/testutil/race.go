//go:build race

package testutil

// Race is true when the tests are built with the race detector (-race).
// A test whose full input set costs tens of seconds under the detector
// runs a representative subset when Race is true, and says in its
// comment that CI runs the full set without -race (.ci/run's stage "full
// input sets, without -race"). Nothing else may depend on it.
const Race = true
