package service

import (
	"strings"
	"testing"
)

func TestRedactURL(t *testing.T) {
	in := "nats://prunesched:s3cret-hex@nats-1:4222, nats://prunesched:s3cret-hex@nats-2:4223,nats://nats-3:4224"
	got := RedactURL(in)
	if strings.Contains(got, "s3cret") {
		t.Fatalf("RedactURL(%q) = %q: the password is still there", in, got)
	}
	if want := "nats://prunesched:xxxxx@nats-1:4222,nats://prunesched:xxxxx@nats-2:4223,nats://nats-3:4224"; got != want {
		t.Errorf("RedactURL = %q, want %q", got, want)
	}
}
