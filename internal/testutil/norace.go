//go:build !race

package testutil

// Race is true when the tests are built with the race detector (-race);
// see race.go.
const Race = false
