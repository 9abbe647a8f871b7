package build

import (
	"github.com/prunesched/prunesched/events"
	"github.com/prunesched/prunesched/toolspec"
)

// ShellSource names what a shell command observed, as the eligibility
// core's shell classifier reads it: a single content read of one file gives
// kind "file" with the path and line range (Offset/Limit, 0 when whole or
// when the range is a tail), a search or listing gives kind "search", and
// anything else kind "command". An empty command gives nil.
func ShellSource(command string) *events.SourceIdentity {
	if command == "" {
		return nil
	}
	cc := toolspec.ClassifyShellCommand(command)
	switch {
	case cc.ReadPath != "":
		s := &events.SourceIdentity{Kind: "file", Path: cc.ReadPath}
		if !cc.Full && !cc.Tail && !cc.Window {
			s.Offset, s.Limit = cc.Offset, cc.Limit
		}
		return s
	case cc.Kind == "search":
		return &events.SourceIdentity{Kind: "search"}
	}
	return &events.SourceIdentity{Kind: "command"}
}

// OpenAIUsage converts a usage report in the OpenAI convention (prompt
// tokens include cached tokens) to events.Usage, whose InputTokens are the
// uncached rest: prompt - cacheRead - cacheWrite, never below zero.
func OpenAIUsage(prompt, completion, cacheRead, cacheWrite int) *events.Usage {
	in := prompt - cacheRead - cacheWrite
	if in < 0 {
		in = 0
	}
	return &events.Usage{InputTokens: in, OutputTokens: completion, CacheReadTokens: max(cacheRead, 0), CacheWriteTokens: max(cacheWrite, 0)}
}
