package apis

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/proxy/apis/answer"
)

// Version bridging: the proxy offers a client the versions it can serve,
// not only those every broker speaks. A sub-request goes to its broker at
// the highest version the broker speaks that is at most the client's (or
// the broker's lowest, when the client's is below it), if the API's rule
// below allows that pair; the broker's answer is decoded at its version,
// where kmsg gives every field the version lacks Kafka's default, and
// merged into the client's answer at the client's version. Record sets
// stay as they are: a pair is only allowed where both versions carry the
// same record format (magic-2 batches: Produce v3+, Fetch v4+), so
// bridging never converts records. Requests whose meaning a version cannot
// carry (a static member's group.instance.id to a version without it, say)
// are answered UNSUPPORTED_VERSION (Carries); pairs whose semantics differ
// are not offered at all. The rules below are the one place this is
// decided; docs/compatibility.md explains them.

// bridgeRule is what may be bridged of one API.
type bridgeRule struct {
	// ok says whether a client request at from may be sent at to.
	ok func(from, to int16) bool
	// carries says whether req (decoded at the client's version) means the
	// same at to, preparing it for to where fields are spelled differently
	// (nil: it always does).
	carries func(req kmsg.Request, to int16) bool
	// answer fixes a broker's answer decoded at its version for req's (nil:
	// kmsg's defaults suffice).
	answer func(resp kmsg.Response, req kmsg.Request)
	// again, if set, says whether the broker's answer asks for the request
	// to be sent once more, having updated req from it (the client's
	// version would not understand the answer).
	again func(resp kmsg.Response, req kmsg.Request) bool
}

// between says whether both versions are in [lo, hi].
func between(lo, hi int16) func(from, to int16) bool {
	return func(from, to int16) bool { return from >= lo && from <= hi && to >= lo && to <= hi }
}

// anyOf allows a pair any of rules allows.
func anyOf(rules ...func(from, to int16) bool) func(from, to int16) bool {
	return func(from, to int16) bool {
		for _, r := range rules {
			if r(from, to) {
				return true
			}
		}
		return false
	}
}

// upTo allows a client at [lo, hi] to be sent at any version in [lo, top]:
// the versions above hi only add fields the client does not know.
func upTo(lo, hi, top int16) func(from, to int16) bool {
	return func(from, to int16) bool { return from >= lo && from <= hi && to >= lo && to <= top }
}

// bridgeRules is the table: one rule per API that can be bridged. An API
// without a rule is offered only at versions every broker speaks.
var bridgeRules = func() (t [numKeys]*bridgeRule) {
	// Produce: v3-v11 all carry magic-2 batches and mean the same (v10 and
	// v11 add leader hints, which a lower broker leaves at their -1
	// defaults). v0-v2 carry older message sets (bridging would convert
	// records); v12 changes transactions (KIP-890: partitions join the
	// transaction implicitly); v13 names topics by id. None is bridged.
	t[kmsg.Produce] = &bridgeRule{ok: between(3, 11)}
	// Fetch: v4+ answers carry magic-2 batches (v0-v3 would need
	// conversion). Within topic names (v4-v12) a client below v12 may be
	// served by any such broker; v12's LastFetchedEpoch (truncation
	// detection) is only sent to brokers that check it. v13+ name topics by
	// id and bridge among themselves (v14-v18 add nothing a consumer
	// sends that v13 lacks: replica state and directory are followers').
	t[kmsg.Fetch] = &bridgeRule{ok: anyOf(between(4, 11), upTo(4, 11, 12), between(13, 18)), carries: fetchCarries}
	// ListOffsets: v1+ share one shape (v0 answers lists of old-style
	// offsets). The special timestamps need the version that introduced
	// them (carries).
	t[kmsg.ListOffsets] = &bridgeRule{ok: between(1, 11), carries: listOffsetsCarries}
	// OffsetCommit: v2-v9 share one shape for classic groups (v2-v4 carry
	// a retention time, kmsg's -1 default is the broker's own; v6's leader
	// epoch is not stored by a lower broker, as with Kafka's own old
	// brokers). v0/v1 are ZooKeeper-era commits with other semantics, v10
	// names topics by id. group.instance.id needs v7+ (carries).
	t[kmsg.OffsetCommit] = &bridgeRule{ok: between(2, 9), carries: offsetCommitCarries}
	// OffsetFetch: v1-v6 ask for one group the same way (v0 reads
	// ZooKeeper), and may go up to v7; v1 has no group-level error code, so
	// a v1 client gets it in every partition, as Kafka answers v1.
	// v7 is not sent lower: its require_stable (which librdkafka sets by
	// default) would be lost, so a v7 client is refused rather than
	// answered with offsets of pending transactions; clients of a lower
	// pool get v6 at most, where they know they cannot require it. v8+
	// batch groups, which one sub-request to a lower broker cannot carry
	// when several share a coordinator: not bridged.
	t[kmsg.OffsetFetch] = &bridgeRule{ok: upTo(1, 6, 7), answer: offsetFetchAnswer}
	// JoinGroup: from v4 a new member must rejoin with the member id the
	// broker gives it (MEMBER_ID_REQUIRED), which a v0-v3 client does not
	// know: for such a client the proxy rejoins itself, at once, with that
	// id, and the client gets the second answer (again), as a v4 client
	// would have it. A v4+ client of a v0-v3 broker is given its id in the
	// first answer, which v4 clients accept too. group.instance.id needs
	// v5+ (carries). v7's protocol type and v9's skip_assignment default to
	// "not told" and false, as a lower broker means.
	t[kmsg.JoinGroup] = &bridgeRule{ok: between(0, 9), carries: joinGroupCarries, again: joinGroupAgain}
	// SyncGroup, Heartbeat: every version means the same; group.instance.id
	// needs v3+ (carries). SyncGroup v5's protocol type and name are
	// checks a lower broker skips.
	t[kmsg.SyncGroup] = &bridgeRule{ok: between(0, 5), carries: instanceCarries(3)}
	t[kmsg.Heartbeat] = &bridgeRule{ok: between(0, 4), carries: instanceCarries(3)}
	// LeaveGroup: v3 replaced the one member id with a list of members;
	// both directions are mapped (carries, answer).
	t[kmsg.LeaveGroup] = &bridgeRule{ok: between(0, 5), carries: leaveGroupCarries, answer: leaveGroupAnswer}
	// DescribeGroups: every version asks the same; later ones add answer
	// fields (group.instance.id, authorized operations, error message)
	// that a lower broker leaves at their defaults.
	t[kmsg.DescribeGroups] = &bridgeRule{ok: between(0, 6), carries: describeGroupsCarries}
	return t
}()

// pick is the version a broker speaking r is sent a request for key at
// version v, and whether it may be.
func pick(key, v int16, r vrange) (int16, bool) {
	if !r.ok() {
		return v, false
	}
	if v >= r.min && v <= r.max {
		return v, true
	}
	rule := ruleOf(key)
	if rule == nil {
		return v, false
	}
	to := r.max
	if v < r.min {
		to = r.min
	}
	return to, rule.ok(v, to)
}

func ruleOf(key int16) *bridgeRule {
	if key < 0 || int(key) >= numKeys {
		return nil
	}
	return bridgeRules[key]
}

// offered is the range of versions of key, within static, that every
// broker in brokers can serve: the highest such version and those below it
// down to the first that cannot be served (advertised ranges are
// contiguous).
func offered(key int16, static vrange, brokers []*[numKeys]vrange) vrange {
	servable := func(v int16) bool {
		for _, br := range brokers {
			if _, ok := pick(key, v, br[key]); !ok {
				return false
			}
		}
		return true
	}
	hi := static.max
	for hi >= static.min && !servable(hi) {
		hi--
	}
	if hi < static.min {
		return noVersions
	}
	lo := hi
	for lo > static.min && servable(lo-1) {
		lo--
	}
	return vrange{min: lo, max: hi}
}

// brokerVersion is split.Env.Version: the version broker is sent key at
// for a client at version. The common case, a version every broker speaks,
// is one comparison; a broker not yet probed gets the client's version.
func (d *Dispatcher) brokerVersion(broker int32, key, version int16) (int16, bool) {
	t := d.vers.current()
	if r := t.direct.get(key); version >= r.min && version <= r.max {
		return version, true
	}
	br := t.byID[broker]
	if br == nil || key < 0 || int(key) >= numKeys {
		return version, true
	}
	return pick(key, version, br[key])
}

// carries applies key's rule to a request about to be sent at to.
func carries(req kmsg.Request, to int16) bool {
	rule := ruleOf(req.Key())
	if rule == nil {
		return false
	}
	return rule.carries == nil || rule.carries(req, to)
}

// bridgeAgain says whether resp, decoded at a broker's version, asks for
// req to be sent again (see bridgeRule.again).
func bridgeAgain(resp kmsg.Response, req kmsg.Request) bool {
	rule := ruleOf(req.Key())
	return rule != nil && rule.again != nil && rule.again(resp, req)
}

// bridgeAnswer fixes resp, decoded at a broker's version, for req's.
func bridgeAnswer(resp kmsg.Response, req kmsg.Request) {
	if rule := ruleOf(req.Key()); rule != nil && rule.answer != nil {
		rule.answer(resp, req)
	}
}

// appendAt encodes req at version v, leaving its version as it was.
func appendAt(req kmsg.Request, v int16, dst []byte) []byte {
	was := req.GetVersion()
	req.SetVersion(v)
	dst = req.AppendTo(dst)
	req.SetVersion(was)
	return dst
}

// The per-API halves of bridgeRules (bridge.go): what a request asks that
// a version cannot carry, and the fields versions spell differently.

// fetchCarries: follower fetches (a replica id or replica state) are
// brokers' business and never bridged.
func fetchCarries(req kmsg.Request, _ int16) bool {
	r := req.(*kmsg.FetchRequest)
	return r.ReplicaID < 0 && r.ReplicaState.ID < 0
}

// specialTimestampSince is the ListOffsets version that introduced each
// special timestamp beyond earliest (-2) and latest (-1): max timestamp
// (KIP-734), local log start (KIP-405), last tiered offset (KIP-1005).
var specialTimestampSince = map[int64]int16{-3: 7, -4: 8, -5: 9}

// listOffsetsCarries: a special timestamp goes only to a version that knows
// it (an unknown one only to the client's own version or later), and
// read_committed only to v2+.
func listOffsetsCarries(req kmsg.Request, to int16) bool {
	r := req.(*kmsg.ListOffsetsRequest)
	if r.IsolationLevel != 0 && to < 2 {
		return false
	}
	for ti := range r.Topics {
		for _, p := range r.Topics[ti].Partitions {
			if p.Timestamp >= -2 {
				continue
			}
			since, known := specialTimestampSince[p.Timestamp]
			if !known {
				since = r.Version
			}
			if to < since {
				return false
			}
		}
	}
	return true
}

// offsetCommitCarries: a static member's commit (group.instance.id, v7+)
// goes only to v7+.
func offsetCommitCarries(req kmsg.Request, to int16) bool {
	return req.(*kmsg.OffsetCommitRequest).InstanceID == nil || to >= 7
}

// joinGroupCarries: group.instance.id needs v5+. A v0 join has no
// rebalance timeout: Kafka takes the session timeout for it, and so does
// the proxy for a v1+ broker.
func joinGroupCarries(req kmsg.Request, to int16) bool {
	r := req.(*kmsg.JoinGroupRequest)
	if r.InstanceID != nil && to < 5 {
		return false
	}
	if r.Version == 0 && to >= 1 {
		r.RebalanceTimeoutMillis = r.SessionTimeoutMillis
	}
	return true
}

// joinGroupAgain: a v0-v3 client that joined without a member id is
// rejoined with the one a v4+ broker gave it with MEMBER_ID_REQUIRED;
// once only, as the rejoin carries an id.
func joinGroupAgain(resp kmsg.Response, req kmsg.Request) bool {
	r, q := resp.(*kmsg.JoinGroupResponse), req.(*kmsg.JoinGroupRequest)
	if q.Version >= 4 || r.Version < 4 || q.MemberID != "" || r.MemberID == "" || r.ErrorCode != kerr.MemberIDRequired.Code {
		return false
	}
	q.MemberID = r.MemberID
	return true
}

// offsetFetchAnswer: v0-v1 have no group-level error code; Kafka answers
// them with the group's error in every partition asked about.
func offsetFetchAnswer(resp kmsg.Response, req kmsg.Request) {
	r, q := resp.(*kmsg.OffsetFetchResponse), req.(*kmsg.OffsetFetchRequest)
	if q.Version >= 2 || r.ErrorCode == 0 {
		return
	}
	r.Topics = answer.ErrorResponse(q, r.ErrorCode).(*kmsg.OffsetFetchResponse).Topics
}

// instanceCarries: group.instance.id (SyncGroup, Heartbeat) needs since+.
func instanceCarries(since int16) func(kmsg.Request, int16) bool {
	return func(req kmsg.Request, to int16) bool {
		var id *string
		switch r := req.(type) {
		case *kmsg.SyncGroupRequest:
			id = r.InstanceID
		case *kmsg.HeartbeatRequest:
			id = r.InstanceID
		}
		return id == nil || to >= since
	}
}

// leaveGroupCarries maps v0-v2's one member id onto v3+'s list of members
// and back; a v3+ request for several members, or for a static member,
// cannot be sent below v3.
func leaveGroupCarries(req kmsg.Request, to int16) bool {
	r := req.(*kmsg.LeaveGroupRequest)
	switch {
	case r.Version < 3 && to >= 3:
		m := kmsg.NewLeaveGroupRequestMember()
		m.MemberID = r.MemberID
		r.Members = []kmsg.LeaveGroupRequestMember{m}
	case r.Version >= 3 && to < 3:
		if len(r.Members) != 1 || r.Members[0].InstanceID != nil {
			return false
		}
		r.MemberID = r.Members[0].MemberID
	}
	return true
}

// leaveGroupAnswer: a v0-v2 client reads one error code, the member's when
// the request's is 0; a v3+ client of a v0-v2 broker gets its member
// answered with the request's code.
func leaveGroupAnswer(resp kmsg.Response, req kmsg.Request) {
	r, q := resp.(*kmsg.LeaveGroupResponse), req.(*kmsg.LeaveGroupRequest)
	switch {
	case q.Version < 3 && r.Version >= 3:
		for _, m := range r.Members {
			r.ErrorCode = cmpOr(r.ErrorCode, m.ErrorCode)
		}
	case q.Version >= 3 && r.Version < 3:
		r.Members = r.Members[:0]
		for _, qm := range q.Members {
			m := kmsg.NewLeaveGroupResponseMember()
			m.MemberID, m.InstanceID, m.ErrorCode = qm.MemberID, qm.InstanceID, r.ErrorCode
			r.Members = append(r.Members, m)
		}
	}
}

// describeGroupsCarries: every version asks the same (a lower broker
// leaves authorized operations at "not given", which Kafka's own brokers
// may answer too).
func describeGroupsCarries(kmsg.Request, int16) bool { return true }
