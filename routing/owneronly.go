package routing

// Owner-only routing is for brokers that serve reads of partitions they do
// not own from a stale copy instead of refusing them (KafScale's brokers
// answer Fetch and ListOffsets for any partition). For them, sending an
// owned partition's request to another broker, as RouteAvoiding does when
// the owner refused or is not live, returns stale data rather than a
// retriable error. So with owner-only routing on:
//   - a partition (group) whose owner key names a live broker goes to that
//     broker, even after it refused: the retry waits for the owner key to
//     change (the caller's backoff spaces the attempts);
//   - one whose owner key names a broker that is not live (not in the
//     broker list) has no route: the caller answers a retriable error
//     (LEADER_NOT_AVAILABLE, COORDINATOR_NOT_AVAILABLE);
//   - one without an owner key goes to the rendezvous choice, avoiding
//     refusers as usual, so that its reads and its first write go to the
//     same broker: the one that will take it.
//
// Such brokers do not fence on leader epochs either, so the epochs in an
// owner-only table are the proxy's own: Metadata reports a partition's last
// epoch while it is unowned, instead of -1 (see proxy/apis).

// SetOwnerOnly turns owner-only routing on or off; it is off by default.
// It is meant to be set once, before the table is used.
func (t *Table) SetOwnerOnly(on bool) { t.ownerOnly.Store(on) }

// OwnerOnly reports whether owner-only routing is on.
func (t *Table) OwnerOnly() bool { return t.ownerOnly.Load() }

// ownerRoute applies owner-only routing to an owner o read from st: decided
// is false when the usual rules apply (owner-only off, or no owner key).
func (t *Table) ownerRoute(st *state, o int32) (b int32, ok, decided bool) {
	if o < 0 || !t.ownerOnly.Load() {
		return -1, false, false
	}
	if !st.brokers.live(o) {
		return -1, false, true
	}
	return o, true, true
}
