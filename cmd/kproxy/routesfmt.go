package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/kproxy/kproxy/routing"
)

// formatRoutes prints the JSON of /v1/routes (a routing.Snapshot) for a
// person: brokers, topics, partitions and groups in aligned columns.
func formatRoutes(w io.Writer, snapshotJSON []byte) error {
	var s routing.Snapshot
	if err := json.Unmarshal(snapshotJSON, &s); err != nil {
		return fmt.Errorf("decode routing snapshot: %w", err)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	section := func(title string, n int) {
		fmt.Fprintf(tw, "%s (%d)\n", title, n)
	}
	fmt.Fprintf(tw, "FETCH FROM %s, PROXY ZONE %s\n\n", dash(s.FetchFrom), dash(s.Zone))
	section("BROKERS", len(s.Brokers))
	fmt.Fprintln(tw, "ID\tADDRESS\tZONE\tLIVE")
	for _, b := range s.Brokers {
		fmt.Fprintf(tw, "%d\t%s\t%s\tyes\n", b.ID, b.Addr, dash(b.Rack))
	}
	fmt.Fprintln(tw)
	section("TOPICS", len(s.Topics))
	fmt.Fprintln(tw, "TOPIC\tPARTITIONS\tID")
	for _, t := range s.Topics {
		fmt.Fprintf(tw, "%s\t%d\t%s\n", t.Name, t.Partitions, t.ID)
	}
	fmt.Fprintln(tw)
	section("PARTITIONS", len(s.Partitions))
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tOWNER\tEPOCH\tLIVE")
	for _, p := range s.Partitions {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", p.Topic, p.Partition, idOrDash(p.Owner), idOrDash(p.Epoch), yesNo(p.Live))
	}
	fmt.Fprintln(tw)
	section("GROUPS", len(s.Groups))
	fmt.Fprintln(tw, "GROUP\tCOORDINATOR\tEPOCH\tLIVE")
	for _, g := range s.Groups {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", g.Group, idOrDash(g.Coordinator), idOrDash(g.Epoch), yesNo(g.Live))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("print routes: %w", err)
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func idOrDash(v int32) string {
	if v < 0 {
		return "-"
	}
	return fmt.Sprint(v)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
