//go:build race

package integration

// defaultScalePartitions under the race detector, which makes the proxy and
// brokers about ten times slower on this 2-core machine: 30,000 partitions
// do not fit the delivery timeout there (measured: 10,000 left 40% of the
// records unanswered within 90s), 3,000 pass in about 30s.
const defaultScalePartitions = 3000
