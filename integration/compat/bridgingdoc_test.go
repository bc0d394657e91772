package compat

// bridgingDoc is the static part of docs/compatibility.md that explains
// version bridging (the rules live in proxy/apis/bridge.go; this says them
// for users, and the narrow brokers column tests them with real clients).
const bridgingDoc = `## Version bridging

kproxy offers clients the versions it can serve, not only the versions every
broker speaks. When a broker does not speak the client's version of an API,
kproxy sends that broker's part of the request at the highest version the broker
speaks that is at most the client's (or the broker's lowest, when the client's
is below it), decodes the answer at that version and encodes it at the client's.
Fields a version lacks get Kafka's default in either direction. Record batches
are never converted: a pair of versions is bridged only when both carry the same
record format (magic-2 batches: Produce v3 and later, Fetch v4 and later), and
record bytes go through as they came. When the broker speaks the client's
version, the request and the answer are forwarded as they are, as without
bridging. Something a client asks for that the broker's version cannot carry is
answered UNSUPPORTED_VERSION, never sent without it. kproxy advertises, per API,
the versions every live broker can be served at under these rules.

| API | bridged between | not bridged, and why | refused (UNSUPPORTED_VERSION) |
|---|---|---|---|
| Produce | v3-v11 | v0-v2 (older message sets: records would need conversion); v12 (transactions changed, KIP-890); v13 (topic ids) | - |
| Fetch | v4-v11 among themselves and up to v12; v13-v18 | v0-v3 (older message sets); v12 to a broker below v12 (its last fetched epoch would be dropped); v4-v12 and v13+ (topic names vs ids) | follower fetches |
| ListOffsets | v1-v11 | v0 (another answer shape) | a special timestamp the broker's version does not know (-3 max timestamp before v7, -4 before v8, -5 before v9); read_committed below v2 |
| OffsetCommit | v2-v9 | v0-v1 (ZooKeeper-era commits); v10 (topic ids) | a static member (group.instance.id) below v7 |
| OffsetFetch | v1-v6, and up to v7 | v7 to a lower broker (require_stable, which librdkafka sets, would be dropped); v8+ (several groups per request) | - |
| JoinGroup | v0-v9 | - | a static member below v5 |
| SyncGroup | v0-v5 | - | a static member below v3 |
| Heartbeat | v0-v4 | - | a static member below v3 |
| LeaveGroup | v0-v5 | - | several members, or a static one, below v3 |
| DescribeGroups | v0-v6 | - | - |
| Metadata, FindCoordinator, ApiVersions | answered by kproxy at every version it decodes: no bridging needed | | |

Where semantics differ between versions, kproxy bridges them as follows.
JoinGroup v4 made a new member rejoin with the member id the broker gives it
(MEMBER_ID_REQUIRED); for a v0-v3 client of a v4+ broker kproxy does that rejoin
itself, at once, and the client gets the answer to it. A v0 JoinGroup has no
rebalance timeout: kproxy sends the session timeout, as Kafka takes it. A v0-v1
OffsetFetch has no group-level error code: the group's error is put in every
partition, as Kafka answers v1. LeaveGroup v0-v2 name one member and v3+ a list:
kproxy maps one onto the other and the member's error onto the top-level code.
A lower broker does not store OffsetCommit's leader epoch (v6+), as Kafka's own
older brokers do not. APIs not in the table (transactions, admin APIs, ...) are
offered only at versions every broker speaks.

In front of KafScale's brokers (Produce 0-9, Fetch 11-13, ListOffsets 0-4,
OffsetCommit 3, OffsetFetch 5, JoinGroup, SyncGroup, Heartbeat and LeaveGroup 4
only, DescribeGroups 5), kproxy offers Produce 0-11, Fetch 4-18, ListOffsets
0-11, OffsetCommit 2-9, OffsetFetch 1-6, JoinGroup 0-9, SyncGroup 0-5,
Heartbeat 0-4, LeaveGroup 0-5 and DescribeGroups 0-6. Fetch v4 is what lets
librdkafka 2.0.2 (Debian's kcat) enable magic-2 batches and fetch at all; kafka-go
0.4's consumer groups need JoinGroup v1-v2, OffsetFetch v1, SyncGroup,
Heartbeat and LeaveGroup v0. The narrow brokers column runs every client
against such a pool.
`
