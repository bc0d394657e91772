package main

import (
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/kproxy/kproxy/routing"
)

// TestFormatRoutes prints the JSON the admin API's /v1/routes serves (a
// routing.Snapshot) and finds each broker and partition on its line.
func TestFormatRoutes(t *testing.T) {
	routes := routing.NewTable()
	routes.SetBroker(routing.Broker{ID: 1, Addr: "127.0.0.1:1"})
	routes.SetBroker(routing.Broker{ID: 2, Addr: "127.0.0.1:2", Rack: "us-east-1b"})
	routes.SetZoneReads(true)
	routes.SetTopic(routing.Topic{Name: "orders", Partitions: 2})
	routes.SetOwner("orders", 0, 1)
	routes.SetEpoch("orders", 0, 3)
	snap := routes.Snapshot()
	snap.Zone = "us-east-1a" // the proxy fills in its own zone
	body, err := json.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := formatRoutes(&out, body); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(out.String(), "\n") {
		lines = append(lines, strings.Join(strings.Fields(l), " "))
	}
	norm := strings.Join(lines, "\n")
	for _, want := range []string{"FETCH FROM zone, PROXY ZONE us-east-1a", "1 127.0.0.1:1 - yes", "2 127.0.0.1:2 us-east-1b yes", "orders 0 1 3 yes", "orders 1 - - no"} {
		if !strings.Contains(norm, want) {
			t.Fatalf("formatRoutes output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestFormatRoutesRejectsGarbage(t *testing.T) {
	if err := formatRoutes(io.Discard, []byte("not json")); err == nil {
		t.Fatal("no error for garbage")
	}
}
