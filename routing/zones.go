package routing

import "github.com/kproxy/kproxy/layout"

// Zone reads: brokers that share object storage serve committed data of
// any partition, owned or not, so a read need not cross availability zones
// to reach the partition's owner. RouteRead sends a read from a client in
// zone Z to a live broker of Z (a broker's zone is its rack):
//   - the owner, if it is live and in Z (it has every commit first);
//   - else the rendezvous choice among Z's live brokers (layout.Rendezvous
//     over Z's brokers only), so that one broker per zone serves a
//     partition while Z's brokers stay the same and its cache stays warm;
//   - else, when Z is unknown, has no live broker or every one of its
//     brokers refused this read, the usual route (RouteAvoiding).
//
// Zone reads are off by default and never apply with owner-only routing:
// brokers that serve stale copies of partitions they do not own (KafScale)
// must be read at the owner.

// Read says where RouteRead sent a read and why.
type Read uint8

const (
	ReadInZone       Read = iota // a broker of the client's zone chosen by rendezvous
	ReadOwnerInZone              // the owner, which is in the client's zone
	ReadNoClientZone             // the client's zone is unknown: the usual route
	ReadNoZoneBroker             // the client's zone has no live broker: the usual route
	ReadZoneRefused              // every broker of the zone refused: the usual route
	ReadOwnerOnly                // zone reads are off: the usual route
)

// ReadReasons lists every Read, for metrics known in advance.
func ReadReasons() []Read {
	return []Read{ReadInZone, ReadOwnerInZone, ReadNoClientZone, ReadNoZoneBroker, ReadZoneRefused, ReadOwnerOnly}
}

// String is the read's reason as a metric label.
func (r Read) String() string {
	switch r {
	case ReadInZone:
		return "in_zone"
	case ReadOwnerInZone:
		return "owner_in_zone"
	case ReadNoClientZone:
		return "no_client_zone"
	case ReadNoZoneBroker:
		return "no_zone_broker"
	case ReadZoneRefused:
		return "zone_refused"
	}
	return "owner_only"
}

// ToZone says whether the read went to a non-owner chosen for the zone
// (otherwise it went where the usual route sends it: the owner, or for an
// unowned partition the broker its first produce would go to).
func (r Read) ToZone() bool { return r == ReadInZone }

// SetAcquireInZone turns zone-affine acquisition on or off (off by
// default; set once, before use): see RouteWrite.
func (t *Table) SetAcquireInZone(on bool) { t.acquireInZone.Store(on) }

// RouteWrite routes a write (Produce) of a partition for a client in zone
// ("": unknown). A partition with a live owner goes to it, as with
// RouteAvoiding: ownership and fencing do not change. With zone-affine
// acquisition on, a partition without a live owner goes to the rendezvous
// choice among zone's live brokers that have not refused, so that the
// broker that takes its lease is near the producer; otherwise, and when
// the zone has no such broker, the usual route. Producers in two zones may
// then send a partition's first writes to two brokers: one acquires it,
// the other refuses (NOT_LEADER_OR_FOLLOWER) and the retry goes to the
// new owner.
func (t *Table) RouteWrite(topic string, p int32, zone string, avoid Avoid) (int32, bool) {
	if zone != "" && t.acquireInZone.Load() && !t.ownerOnly.Load() {
		st := t.st.Load()
		if o, _ := unpack(st.ownership(topic, p)); o < 0 || !st.brokers.live(o) {
			if seeds := st.brokers.zones[zone]; len(seeds) > 0 {
				if b, ok := layout.Rendezvous(layout.PartitionKey(topic, p), seeds, avoid.ids[:avoid.n]); ok {
					return b, true
				}
			}
		}
	}
	return t.RouteAvoiding(topic, p, avoid)
}

// SetZoneReads turns zone reads on or off; it is off by default. It is meant
// to be set once, before the table is used.
func (t *Table) SetZoneReads(on bool) { t.zoneReads.Store(on) }

// ZoneReads reports whether RouteRead routes by zone: on, and not owner-only.
func (t *Table) ZoneReads() bool { return t.zoneReads.Load() && !t.ownerOnly.Load() }

// RouteRead routes a read (Fetch) of a partition for a client in zone ("":
// unknown), avoiding brokers that refused it, as described above.
func (t *Table) RouteRead(topic string, p int32, zone string, avoid Avoid) (int32, Read, bool) {
	why := ReadOwnerOnly
	if t.ZoneReads() {
		st := t.st.Load()
		why = ReadNoClientZone
		if zone != "" {
			why = ReadNoZoneBroker
			if seeds := st.brokers.zones[zone]; len(seeds) > 0 {
				o, _ := unpack(st.ownership(topic, p))
				if o >= 0 && !avoid.Has(o) {
					if b, live := st.brokers.get(o); live && b.Rack == zone {
						return o, ReadOwnerInZone, true
					}
				}
				if b, ok := layout.Rendezvous(layout.PartitionKey(topic, p), seeds, avoid.ids[:avoid.n]); ok {
					return b, ReadInZone, true
				}
				why = ReadZoneRefused
			}
		}
	}
	b, ok := t.RouteAvoiding(topic, p, avoid)
	return b, why, ok
}

// Zone returns a live broker's zone (its rack; "" if it has none or is
// not live).
func (t *Table) Zone(id int32) string {
	b, _ := t.st.Load().brokers.get(id)
	return b.Rack
}

// zonesOf groups the rendezvous seeds of brokers that have a rack by rack
// (nil when none has one), in id order.
func zonesOf(sorted []Broker, seeds []layout.Seeded) map[string][]layout.Seeded {
	var zones map[string][]layout.Seeded
	for i, b := range sorted {
		if b.Rack == "" {
			continue
		}
		if zones == nil {
			zones = make(map[string][]layout.Seeded)
		}
		zones[b.Rack] = append(zones[b.Rack], seeds[i])
	}
	return zones
}
