package routing

import (
	"encoding/hex"
	"sort"
)

// Snapshot is a JSON-friendly copy of the table for admin endpoints.
type Snapshot struct {
	Brokers    []Broker            `json:"brokers"`
	Topics     []SnapshotTopic     `json:"topics"`
	Partitions []SnapshotPartition `json:"partitions"`
	Groups     []SnapshotGroup     `json:"groups"`
	// FetchFrom is where fetches go: "zone" (RouteRead by the client's
	// zone) or "owner". Zone is the proxy's own zone, which the proxy
	// fills in ("" if it has none).
	FetchFrom string `json:"fetch_from"`
	Zone      string `json:"zone,omitempty"`
}

// SnapshotTopic is a topic in a Snapshot.
type SnapshotTopic struct {
	Name       string            `json:"name"`
	ID         string            `json:"id"` // 32 hex digits
	Partitions int32             `json:"partitions"`
	Configs    map[string]string `json:"configs,omitempty"`
}

// SnapshotPartition is one partition of a known topic. Owner and Epoch are
// -1 when unknown; Live says whether the owner is a live broker.
type SnapshotPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Owner     int32  `json:"owner"`
	Epoch     int32  `json:"epoch"`
	Live      bool   `json:"live"`
}

// SnapshotGroup is a group with a coordinator key or epoch.
type SnapshotGroup struct {
	Group       string `json:"group"`
	Coordinator int32  `json:"coordinator"`
	Epoch       int32  `json:"epoch"`
	Live        bool   `json:"live"`
}

// Snapshot copies the table. It reads one state, but cells may change while
// it copies them (each cell is read atomically).
func (t *Table) Snapshot() Snapshot {
	st := t.st.Load()
	s := Snapshot{
		Brokers:    append([]Broker{}, st.brokers.sorted...),
		Topics:     []SnapshotTopic{},
		Partitions: []SnapshotPartition{},
		Groups:     []SnapshotGroup{},
		FetchFrom:  "owner",
	}
	if t.ZoneReads() {
		s.FetchFrom = "zone"
	}
	names := make([]string, 0, len(st.topics))
	for name, ref := range st.topics {
		if ref.cur.Load().known {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		e := st.topics[name].cur.Load()
		s.Topics = append(s.Topics, SnapshotTopic{
			Name: name, ID: hex.EncodeToString(e.info.ID[:]),
			Partitions: e.info.Partitions, Configs: e.info.Configs,
		})
		for p := range e.cells {
			o, ep := unpack(e.cells[p].Load())
			s.Partitions = append(s.Partitions, SnapshotPartition{
				Topic: name, Partition: int32(p), Owner: o, Epoch: ep, Live: o >= 0 && st.brokers.live(o),
			})
		}
	}
	st.groups.each(func(g string, v uint64) {
		o, ep := unpack(v)
		s.Groups = append(s.Groups, SnapshotGroup{Group: g, Coordinator: o, Epoch: ep, Live: o >= 0 && st.brokers.live(o)})
	})
	sort.Slice(s.Groups, func(i, j int) bool { return s.Groups[i].Group < s.Groups[j].Group })
	return s
}
