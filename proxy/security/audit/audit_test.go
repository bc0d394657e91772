package audit

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestLogWritesJSONLines(t *testing.T) {
	var nilLog *Log
	nilLog.Write(Event{Event: AuthSuccess}) // audit off: no panic, nothing written
	if err := nilLog.Close(); err != nil {
		t.Fatal(err)
	}

	var buf bytes.Buffer
	l := New(&buf)
	l.now = func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600)) }
	l.Write(Event{Event: AuthFailure, Listener: "SASL_SSL", Client: "10.0.0.1:5000", Mechanism: "SCRAM-SHA-512", Reason: "scram: invalid proof"})
	l.Write(Event{Event: CredentialChanged, Principal: "User:admin", User: "bob"})
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines:\n%s", len(lines), buf.String())
	}
	var e map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &e); err != nil {
		t.Fatal(err)
	}
	if e["time"] != "2026-01-02T02:04:05Z" || e["event"] != AuthFailure || e["listener"] != "SASL_SSL" || e["reason"] != "scram: invalid proof" {
		t.Fatalf("event %v", e)
	}
	if _, ok := e["user"]; ok {
		t.Fatalf("empty field written: %s", lines[0])
	}
}
