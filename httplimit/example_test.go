package httplimit_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/prunesched/prunesched/httplimit"
)

// ExampleReadBody reads request bodies under one shared byte budget and a
// per-body limit: a body over the limit is refused (the handler answers
// 413 naming the limit), never read into memory whole.
func ExampleReadBody() {
	budget := httplimit.NewBudget(1 << 20)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := httplimit.ReadBody(w, r, budget, 16)
		var tooLarge *httplimit.TooLargeError
		if errors.As(err, &tooLarge) {
			http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
			return
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		defer b.Release()
		fmt.Fprintf(w, "read %d bytes", len(b.Bytes))
	})
	for _, body := range []string{"small", strings.Repeat("x", 64)} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body)))
		fmt.Println(rec.Code, budget.Used())
	}
	// Output:
	// 200 0
	// 413 0
}
