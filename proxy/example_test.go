package proxy_test

import (
	"fmt"

	"github.com/prunesched/prunesched/proxy"
)

// ExampleParseUpstream checks an upstream base URL the way `prunesched
// proxy --upstream` does before it starts anything: a bare host is
// refused with the value quoted, so the command can name its flag.
func ExampleParseUpstream() {
	u, err := proxy.ParseUpstream("https://api.anthropic.com")
	fmt.Println(u.Host, err)
	_, err = proxy.ParseUpstream("api.anthropic.com")
	fmt.Println(err)
	// Output:
	// api.anthropic.com <nil>
	// "api.anthropic.com": want an http(s) URL with a host (such as https://api.anthropic.com)
}
