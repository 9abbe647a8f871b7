package toolspec

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestExecCommands(t *testing.T) {
	for _, tc := range []struct {
		js   string
		want []string
	}{
		{`await tools.exec_command({cmd: "rg -n foo src", yield_time_ms: 10})`, []string{"rg -n foo src"}},
		{`tools.exec_command({ cmd: 'sed -n \'1,5p\' a.go' })`, []string{"sed -n '1,5p' a.go"}},
		{"tools.exec_command({cmd: `ls`}); tools.exec_command({cmd: `cat ${f}`})", []string{"ls"}},
		{`tools.apply_patch("*** Begin Patch")`, nil},
	} {
		in, _ := json.Marshal(tc.js)
		got := ExecCommands(in)
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("ExecCommands(%q) = %q, want %q", tc.js, got, tc.want)
		}
	}
	if got := ExecCommands(json.RawMessage(`{"cmd":"ls"}`)); got != nil {
		t.Errorf("an object input gave %q, want none", got)
	}
}
