// Package lab is the Context Lab: the design's pruning experiment, six
// conditions at its core (A raw, B exact duplicates, C plus errored inputs, D plus
// superseded observations, E aggressive heuristic pruning, F the oracle),
// plus D with the opt-in L3 rung, D without span references, G (D with a
// scripted agent's removal requests, judged and applied as in
// production), rows read from the opt-in policy files under lab/policies,
// and the peers re-implemented from their documented behaviour (DCP,
// Anthropic clear_tool_uses, observation masking), run on ground-truth fixtures (lab/fixtures) and reported in four
// metric groups that are never collapsed into one number: reduction,
// preservation, behaviour (evidence presence, not model success; with and
// without one recovery of each removed item a probe needs) and economics.
//
// B, C, D, D+L3, D-span and G run the production cores (package decide): the
// eligibility core fed every fact, the scheduler core fed facts and marks
// and deciding at each model request exactly as the pipeline's scheduler
// worker does. Peers, E and F produce marks in the same event
// vocabulary; the production scheduler applies them and the production
// projection renders them, so every condition is measured by the same code.
//
// It must not: summarise anything, read the wall clock (results are a
// function of the seed and the configuration, byte for byte), or touch
// NATS or the file system (the command writes the files).
package lab
