package broker

import (
	"testing"

	"github.com/kproxy/kproxy/refbroker/broker/schema"
)

func TestEpochEnd(t *testing.T) {
	st := schema.PartitionState{End: 50, Epochs: []schema.EpochStart{{Epoch: 1, Start: 0}, {Epoch: 3, Start: 10}, {Epoch: 4, Start: 30}}}
	cases := []struct {
		name           string
		requested, cur int32
		wantEpoch      int32
		wantEnd        int64
	}{
		{"current epoch", 5, 5, 5, 50},
		{"latest written epoch", 4, 5, 4, 50},
		{"epoch with a successor", 3, 5, 3, 30},
		{"epoch never written: floor", 2, 5, 1, 10},
		{"first epoch", 1, 5, 1, 10},
		{"before the first epoch", 0, 5, 0, 0},
		{"newer than current", 6, 5, -1, -1},
		{"undefined", -1, 5, -1, -1},
	}
	for _, tc := range cases {
		e, end := epochEnd(st, tc.requested, tc.cur)
		if e != tc.wantEpoch || end != tc.wantEnd {
			t.Errorf("%s: (%d, %d), want (%d, %d)", tc.name, e, end, tc.wantEpoch, tc.wantEnd)
		}
	}
	if e, end := epochEnd(schema.PartitionState{}, 1, 1); e != 1 || end != 0 {
		t.Errorf("empty log, current epoch: (%d, %d), want (1, 0)", e, end)
	}
}
