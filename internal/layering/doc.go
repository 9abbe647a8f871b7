// Package layering has no code: its test reads the import lines of every
// package of the module (go/parser, no build) and checks the rules of
// layering the design relies on, so that they stay true as the code moves.
// Each rule is a row of one table in layering_test.go with its reason.
package layering
