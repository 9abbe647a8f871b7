package analyze

import (
	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/internal/toolspec"
)

// detect assigns shapes, walking the calls backwards so each call knows what
// comes after it.
func detect(calls []*callFacts) []ShapedItem {
	// The keys: a read of a path's range; the same with the write
	// counters when it was answered (nothing written since); a path, or a
	// search, with the hash of what it answered; a search with the count of
	// all writes when it was answered.
	type snap struct{ path, rng string }
	type unchanged struct {
		snap
		pathWrites, unscoped int
	}
	type pathWrites struct {
		path                 string
		pathWrites, unscoped int
	}
	type sameOutput struct{ path, hash string }
	type searchWrites struct {
		call      callKey
		allWrites int
	}
	type searchOutput struct {
		call callKey
		hash string
	}
	laterUnchanged := map[unchanged]bool{}
	laterSameHashRead := map[sameOutput]bool{}
	laterReadRanges := map[snap]bool{}
	laterFullRead := map[string]bool{}
	laterFullUnchanged := map[pathWrites]bool{}
	laterSearchUnchanged := map[searchWrites]bool{}
	laterSearchSame := map[searchOutput]bool{}
	laterTest := map[callKey]bool{}
	laterHash := map[string]bool{}
	laterPlan := false
	laterPassingTest := false
	var out []ShapedItem
	for i := len(calls) - 1; i >= 0; i-- {
		c := calls[i]
		kind := c.cls.Kind
		if c.cls.Class == events.DeterminismSideEffect && kind != "plan" && kind != "write" {
			kind = "write"
		}
		if c.failed && c.inTokens >= failedInputTokens {
			out = append(out, ShapedItem{Item: c.inItem, Shape: ShapeFailedLargeInput, Tool: c.tool})
		}
		if kind == "plan" && laterPlan {
			out = append(out, ShapedItem{Item: c.inItem, Shape: ShapeSupersededPlan, Tool: c.tool})
		}
		if !c.hasResult {
			if kind == "plan" {
				laterPlan = true
			}
			continue
		}
		unchangedKey := unchanged{snap{c.readPath, c.rangeKey}, c.pathWrites, c.unscoped}
		fullKey := pathWrites{c.readPath, c.pathWrites, c.unscoped}
		hashKey := sameOutput{c.readPath, c.outHash}
		searchKey, searchHash := searchWrites{c.canon, c.allWrites}, searchOutput{c.canon, c.outHash}
		var shape Shape
		ok := !c.failed
		switch {
		case kind == "test" && laterTest[testKey(c)]:
			// Failed runs too: an old failing log is the common case.
			shape = ShapeSupersededTest
		case !ok:
		case c.readPath != "" && (laterUnchanged[unchangedKey] || laterSameHashRead[hashKey] || laterFullUnchanged[fullKey]):
			shape = ShapeRepeatedRead
		case kind == "search" && (laterSearchUnchanged[searchKey] || laterSearchSame[searchHash]):
			shape = ShapeDuplicateSearch
		case c.readPath != "" && (laterReadRanges[snap{c.readPath, c.rangeKey}] || laterFullRead[c.readPath]):
			shape = ShapeSupersededRead
		case kind == "plan" && laterPlan:
			shape = ShapeSupersededPlan
		case kind == "write" && laterPassingTest && (c.cls.Command == "" || len(c.cls.Writes) > 0 && !c.cls.Unscoped):
			shape = ShapeCompletedResidue
		case c.install && c.outTokens >= installLogTokens:
			shape = ShapeInstallLog
		case c.outTokens >= identicalMinimum && laterHash[c.outHash]:
			shape = ShapeIdenticalOutput
		}
		if shape != "" {
			out = append(out, ShapedItem{Item: c.outItem, Shape: shape, Tool: c.tool, HostPruned: c.hostPruned})
		}
		// Index this call for the earlier ones.
		if ok {
			laterHash[c.outHash] = true
		}
		switch {
		case c.readPath != "" && ok:
			laterUnchanged[unchangedKey] = true
			laterSameHashRead[hashKey] = true
			laterReadRanges[snap{c.readPath, c.rangeKey}] = true
			if c.full {
				laterFullRead[c.readPath] = true
				laterFullUnchanged[fullKey] = true
			}
		case kind == "search" && ok:
			laterSearchUnchanged[searchKey] = true
			laterSearchSame[searchHash] = true
		case kind == "test":
			laterTest[testKey(c)] = true
			if c.passing {
				laterPassingTest = true
			}
		case kind == "plan":
			laterPlan = true
		}
	}
	// Report in session order.
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// testKey is what identifies a test run: its command without output
// redirection and head/tail filters, or the tool and input.
func testKey(c *callFacts) callKey {
	if c.cls.Command == "" {
		return c.canon
	}
	return callKey{input: toolspec.RunKey(c.cls.Command)}
}
