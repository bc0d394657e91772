package layout

// Rendezvous (highest random weight) hashing picks the broker for a
// partition or group that has no owner key: every proxy and every broker
// that sees the same live brokers picks the same one, so a client that talks
// to brokers directly and one that goes through a proxy are sent to the same
// broker, and that broker then acquires it. A score depends only on the key
// and the broker, so a broker leaving moves only the keys it had.
//
// The hash is fixed (not seeded per process) and part of the contract: two
// processes with different hashes disagree during a rolling upgrade.

// Seeded is a broker id with its rendezvous seed. Callers that choose often
// (routing, on every request to an unowned partition) build these once per
// membership change.
type Seeded struct {
	ID   int32
	Seed uint64
}

// Seed returns id's rendezvous seed.
func Seed(id int32) Seeded { return Seeded{ID: id, Seed: mix64(uint64(uint32(id)) ^ domainBroker)} }

// PartitionKey is the rendezvous key of a partition.
func PartitionKey(topic string, partition int32) uint64 {
	return mix64(fnv64(topic)^domainPartition) ^ uint64(uint32(partition))*domainGroup
}

// GroupKey is the rendezvous key of a consumer group's coordinator.
func GroupKey(group string) uint64 { return mix64(fnv64(group) ^ domainGroup) }

// AnyKey is the rendezvous key of a request any broker can answer (admin and
// transaction requests), so that related requests meet at the same broker.
func AnyKey(key string) uint64 { return mix64(fnv64(key) ^ domainAny) }

// Rendezvous returns the broker with the highest score for key among
// brokers, skipping the ids in exclude; ties go to the lower id. false means
// every broker was excluded (or there were none). It does not allocate.
func Rendezvous(key uint64, brokers []Seeded, exclude []int32) (int32, bool) {
	best, bestScore, found := int32(-1), uint64(0), false
	for _, b := range brokers {
		if excluded(b.ID, exclude) {
			continue
		}
		sc := mix64(key ^ b.Seed)
		if !found || sc > bestScore || (sc == bestScore && b.ID < best) {
			best, bestScore, found = b.ID, sc, true
		}
	}
	return best, found
}

func excluded(id int32, exclude []int32) bool {
	for _, e := range exclude {
		if e == id {
			return true
		}
	}
	return false
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211

	domainPartition = 0x9e3779b97f4a7c15
	domainGroup     = 0xc2b2ae3d27d4eb4f
	domainAny       = 0x165667b19e3779f9
	domainBroker    = 0x27d4eb2f165667c5
)

func fnv64(s string) uint64 {
	h := uint64(fnvOffset)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

// mix64 is the splitmix64 finalizer: a bijection with good avalanche.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
