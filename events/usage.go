package events

// OpenAIUsage converts a usage report in the OpenAI convention (prompt
// tokens include cached tokens) to a Usage, whose InputTokens are the
// uncached rest: prompt - cacheRead - cacheWrite, never below zero.
func OpenAIUsage(prompt, completion, cacheRead, cacheWrite int) *Usage {
	in := prompt - cacheRead - cacheWrite
	if in < 0 {
		in = 0
	}
	return &Usage{InputTokens: in, OutputTokens: completion, CacheReadTokens: max(cacheRead, 0), CacheWriteTokens: max(cacheWrite, 0)}
}
