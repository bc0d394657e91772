package split

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Version bridging: a broker may not speak the client's version of an API.
// Env.Version then names the version the broker is sent (or none), the
// Bridger says whether the decoded request means the same at it, Encode
// encodes at SubVersion, and Absorb decodes sub-request si at VersionOf(si);
// Merge encodes at the client's Version as always. A bridged answer is
// never passed to the client as it came (it is at the broker's version).
// When the broker speaks the client's version nothing of this costs more
// than comparing two versions.

// Bridger is an Adapter whose request can be sent at a version other than
// the client's.
type Bridger interface {
	// Carries says whether the request, sent at version to, asks the
	// broker for what the client asked; it may prepare the decoded request
	// for that version (fields the version spells differently). false
	// answers the sub-request's items UNSUPPORTED_VERSION.
	Carries(to int16) bool
}

// SubVersion is the version of the sub-request being encoded (Encode,
// EncodeVec): the client's unless it is bridged.
func (s *Engine) SubVersion() int16 { return s.subVer }

// VersionOf is the version sub-request si was sent at: its answer is
// encoded at it.
func (s *Engine) VersionOf(si int) int16 { return s.subs[si].version }

// brokerVersion is the version broker is sent this request at.
func (s *Engine) brokerVersion(broker int32) (int16, bool) {
	if s.env.Version == nil {
		return s.version, true
	}
	v, ok := s.env.Version(broker, s.key, s.version)
	if !ok {
		return v, false
	}
	if v != s.version {
		b, isB := s.ops.(Bridger)
		if !isB || !b.Carries(v) {
			return v, false
		}
	}
	return v, true
}

// unbridgeable answers items idx, which broker cannot be sent at any
// version that keeps their meaning, with Kafka's UNSUPPORTED_VERSION.
func (s *Engine) unbridgeable(broker int32, to int16, idx []int32) {
	s.env.Log.Debug("request not bridgeable to broker's version", "api", kmsg.NameForKey(s.key),
		"version", s.version, "broker", broker, "broker_version", to)
	for _, i := range idx {
		s.done(i, kerr.UnsupportedVersion.Code)
	}
}

// Again has item i, whose broker answered that the request must be sent
// once more with what the answer gave (a bridged JoinGroup's
// MEMBER_ID_REQUIRED, which the client's version does not know), sent
// again now to its current route, not counted as a refusal. The Adapter
// bounds how often it asks.
func (s *Engine) Again(i int32) {
	it := &s.items[i]
	it.mark = s.seq
	it.state = itemRetry
	it.due = s.env.Now()
	s.retries++
}
