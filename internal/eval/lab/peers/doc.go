// Package peers re-implements, from their documented behaviour (never their
// code), the pruning policies the Context Lab compares prunesched against,
// plus the lab's two reference conditions:
//
//   - DCP (the OpenCode Dynamic Context Pruning plugin): deduplication by
//     tool name and arguments keeping the newest output, and errored-call
//     inputs purged after 4 model requests (error text kept), both
//     recalculated at every model request and applied at once;
//   - Anthropic context editing clear_tool_uses with its defaults: once the
//     prompt exceeds 100,000 input tokens, every tool result except those of
//     the 3 most recent tool uses is cleared (inputs kept);
//   - observation masking (Lindenbauer et al.): every tool output but the
//     last 10 is replaced by a placeholder;
//   - E, aggressive heuristic pruning: the cleanup pass of the spec's opening
//     story (duplicate tool calls keep the newest, failed calls older than 4
//     requests go whole, outputs of subtasks the agent closed go, tool outputs
//     older than 20 requests go unless the latest of their kind);
//   - F, the oracle: exactly the items the fixture labels safe, from the fact
//     that makes them safe.
//
// Each returns marks (PRUNE decisions in the events vocabulary, with the
// fact index that caused them), so the production scheduler applies them
// and the production projection renders them with mechanical placeholders:
// nothing is ever summarised. Heuristic removals carry rung L4 and reason
// PREDICTED_IRRELEVANT (they predict, they do not prove); the rule that made
// them is in the evidence.
//
// It must not: import the eligibility core (peers are not allowed to see its
// evidence), summarise or rewrite content, or read the wall clock.
package peers
