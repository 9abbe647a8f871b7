package rss

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/prunesched/prunesched/events"
)

// TestBatchIsValidInput: the scenario's events are valid native JSONL,
// unique per session, so the measurement appends what it claims.
func TestBatchIsValidInput(t *testing.T) {
	evs, err := events.DecodeJSONL(bytes.NewReader(batch("s1", 0, 12)), "batch")
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 12 {
		t.Fatalf("%d events, want 12", len(evs))
	}
	kinds := map[events.Type]int{}
	for _, e := range evs {
		kinds[e.Type]++
	}
	if kinds[events.TypeToolResult] != 3 || kinds[events.TypeToolCall] != 3 || kinds[events.TypeMessage] != 6 {
		t.Fatalf("kinds %v", kinds)
	}
}

// TestReadRSSSelf reads this process's RSS.
func TestReadRSSSelf(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc")
	}
	n, err := ReadRSS(os.Getpid())
	if err != nil || n <= 0 {
		t.Fatalf("rss %d, %v", n, err)
	}
}

// TestWriteSVGAndCSV: the chart is well-formed XML with one polyline per
// series, and the CSV has a row per sample.
func TestWriteSVGAndCSV(t *testing.T) {
	r := Result{Scenario: "events", Samples: []Sample{{0, 40 << 20, 0, 0}, {1, 300 << 20, 5000, 0}, {2, 310 << 20, 10000, 0}}}
	var b bytes.Buffer
	c := Chart{Title: "t <&>", XLabel: "events", YLabel: "MB", Limit: 1000, LimitLabel: "1 GB",
		Series: []Series{{Label: "after", Color: "#000", X: []float64{0, 5000, 10000}, Y: []float64{40, 300, 310}}}}
	if err := WriteSVG(&b, c); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(b.Bytes()))
	polylines := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("svg is not well-formed: %v\n%s", err, b.String())
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "polyline" {
			polylines++
		}
	}
	if polylines != 1 {
		t.Fatalf("%d polylines, want 1", polylines)
	}
	var csv bytes.Buffer
	if err := WriteCSV(&csv, r); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(csv.String(), "\n"); lines != 4 {
		t.Fatalf("csv has %d lines, want 4:\n%s", lines, csv.String())
	}
	if r.PeakRSS() != 310<<20 {
		t.Fatalf("peak %d", r.PeakRSS())
	}
}

// TestOutputBodiesAreValid: the output scenarios send what they claim: a
// call and its result of n bytes (JSONL and array), and an Anthropic agent
// turn whose tool result has n bytes.
func TestOutputBodiesAreValid(t *testing.T) {
	const n = 1000
	for _, format := range []string{"jsonl", "array"} {
		body := outputEvents(n, format)
		var evs []events.Event
		var err error
		if format == "array" {
			evs, err = events.DecodeJSONArray(body)
		} else {
			evs, err = events.DecodeJSONLBytes(body, "body")
		}
		if err != nil || len(evs) != 2 {
			t.Fatalf("%s: %d events, %v", format, len(evs), err)
		}
		if tr, ok := evs[1].Data.(*events.ToolResult); !ok || len(*tr.Output) != n {
			t.Fatalf("%s: second event is not a %d-byte output", format, n)
		}
	}
	var req struct {
		Tools    []any `json:"tools"`
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(anthropicRequest(n), &req); err != nil || len(req.Tools) != 1 || len(req.Messages) != 3 || len(req.Messages[2].Content) < n {
		t.Fatalf("anthropic request: %v", err)
	}
}
