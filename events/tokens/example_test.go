package tokens_test

import (
	"fmt"

	"github.com/prunesched/prunesched/events/tokens"
)

// ExampleCounter counts a text with the o200k_base tokenizer, and a
// payload by its content address: the second count of the same address is
// remembered, not tokenized again.
func ExampleCounter() {
	c := tokens.New()
	fmt.Println(c.Count("hello world"))
	n := c.CountContent("sha256:abc", "func main() {}\n")
	m, ok := c.Known("sha256:abc")
	fmt.Println(n == m, ok)
	// Output:
	// 2
	// true true
}
