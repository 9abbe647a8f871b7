package events

import (
	"testing"
	"time"
)

// checkFastTime requires that whatever fastTime accepts, UnmarshalJSON
// accepts and, in UTC, decodes to the identical time.Time (==: same
// wall, ext and location).
func checkFastTime(t *testing.T, lit []byte) {
	got, ok := fastTime(lit)
	if !ok {
		return
	}
	var want time.Time
	if err := want.UnmarshalJSON(lit); err != nil {
		t.Fatalf("fastTime(%s) = %v, UnmarshalJSON: %v", lit, got, err)
	}
	if got.UTC() != want.UTC() {
		t.Fatalf("fastTime(%s) = %#v, UnmarshalJSON %#v", lit, got.UTC(), want.UTC())
	}
}

func TestFastTime(t *testing.T) {
	taken := []string{
		`"2026-11-30T09:00:02Z"`, `"2026-11-30T09:00:02.5Z"`, `"2026-11-30T09:00:02.123456789Z"`,
		`"2024-02-29T23:59:59Z"`, `"2000-02-29T00:00:00Z"`, `"0000-01-01T00:00:00Z"`, `"9999-12-31T23:59:59.999999999Z"`,
	}
	for _, s := range taken {
		if _, ok := fastTime([]byte(s)); !ok {
			t.Errorf("fastTime(%s) not taken", s)
		}
		checkFastTime(t, []byte(s))
	}
	left := []string{
		`"2023-02-29T00:00:00Z"`, `"1900-02-29T00:00:00Z"`, `"2026-04-31T00:00:00Z"`, `"2026-13-01T00:00:00Z"`,
		`"2026-00-01T00:00:00Z"`, `"2026-01-00T00:00:00Z"`, `"2026-01-01T24:00:00Z"`, `"2026-01-01T00:60:00Z"`,
		`"2026-01-01T00:00:60Z"`, `"2026-01-01T00:00:00+01:00"`, `"2026-01-01T00:00:00z"`, `"2026-01-01t00:00:00Z"`,
		`"2026-01-01T00:00:00.Z"`, `"2026-01-01T00:00:00.1234567890Z"`, `"2026-01-01T00:00:00,5Z"`, `"2026-1-01T00:00:00Z"`,
		`"+026-01-01T00:00:00Z"`, `"2026-01-01T00:00:00Z`, `2026-01-01T00:00:00Z"`, `"2026-01-01 00:00:00Z"`,
	}
	for _, s := range left {
		if _, ok := fastTime([]byte(s)); ok {
			t.Errorf("fastTime(%s) taken", s)
		}
	}
}

// FuzzFastTime compares fastTime with time.Time.UnmarshalJSON.
func FuzzFastTime(f *testing.F) {
	f.Add([]byte(`"2026-11-30T09:00:02Z"`))
	f.Add([]byte(`"2024-02-29T23:59:59.123Z"`))
	f.Add([]byte(`"2026-11-30T09:00:02+01:00"`))
	f.Fuzz(func(t *testing.T, b []byte) { checkFastTime(t, b) })
}

// TestDaysFromCivil compares daysFromCivil with package time on every
// day of the years fastTime reads (0000-9999).
func TestDaysFromCivil(t *testing.T) {
	for d := time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC); d.Year() <= 9999; d = d.AddDate(0, 0, 1) {
		want := d.Unix() / 86400
		if d.Unix()%86400 != 0 {
			t.Fatalf("%v: not at midnight", d)
		}
		if got := daysFromCivil(d.Year(), int(d.Month()), d.Day()); got != want {
			t.Fatalf("daysFromCivil(%v) = %d, want %d", d.Format(time.DateOnly), got, want)
		}
	}
}
