package events

import "testing"

func TestOpenAIUsage(t *testing.T) {
	for _, tc := range []struct {
		prompt, completion, read, write int
		want                            Usage
	}{
		{1500, 70, 320, 0, Usage{InputTokens: 1180, OutputTokens: 70, CacheReadTokens: 320}},
		{100, 5, 60, 40, Usage{InputTokens: 0, OutputTokens: 5, CacheReadTokens: 60, CacheWriteTokens: 40}},
		{10, 1, 30, 0, Usage{InputTokens: 0, OutputTokens: 1, CacheReadTokens: 30}},
		{10, 1, -3, -2, Usage{InputTokens: 15, OutputTokens: 1}},
	} {
		if got := *OpenAIUsage(tc.prompt, tc.completion, tc.read, tc.write); got != tc.want {
			t.Errorf("OpenAIUsage(%d, %d, %d, %d) = %+v, want %+v", tc.prompt, tc.completion, tc.read, tc.write, got, tc.want)
		}
	}
}
