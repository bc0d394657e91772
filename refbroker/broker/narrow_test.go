package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestNarrowedVersions: Config.Versions narrows the stub's table key by
// key; -1/-1 or a range outside the stub's removes the key, unlisted keys
// and keys the stub does not implement are left as they are.
func TestNarrowedVersions(t *testing.T) {
	got := narrowed([]kmsg.ApiVersionsResponseApiKey{
		{ApiKey: int16(kmsg.Fetch), MinVersion: 11, MaxVersion: 13},
		{ApiKey: int16(kmsg.OffsetCommit), MinVersion: 3, MaxVersion: 3},
		{ApiKey: int16(kmsg.InitProducerID), MinVersion: -1, MaxVersion: -1},
		{ApiKey: int16(kmsg.OffsetDelete), MinVersion: 5, MaxVersion: 7}, // the stub serves v0 only
		{ApiKey: int16(kmsg.EndTxn), MinVersion: 0, MaxVersion: 4},       // not implemented
	})
	cases := []struct {
		key  kmsg.Key
		want versionRange
		ok   bool
	}{
		{kmsg.Fetch, versionRange{11, 13}, true},
		{kmsg.OffsetCommit, versionRange{3, 3}, true},
		{kmsg.Produce, implemented[kmsg.Produce].versions, true},
		{kmsg.InitProducerID, versionRange{}, false},
		{kmsg.OffsetDelete, versionRange{}, false},
		{kmsg.EndTxn, versionRange{}, false},
	}
	for _, c := range cases {
		r, ok := got[c.key]
		if ok != c.ok || (ok && r != c.want) {
			t.Errorf("%s: %+v %v, want %+v %v", c.key.Name(), r, ok, c.want, c.ok)
		}
	}
	b := &Broker{cfg: Config{served: got}}
	if b.supports(int16(kmsg.Fetch), 4) || !b.supports(int16(kmsg.Fetch), 12) {
		t.Error("supports disagrees with the narrowed table")
	}
}
