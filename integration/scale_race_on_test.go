//go:build race

package integration

// defaultScalePartitions under the race detector, which makes the proxy and
// brokers about ten times slower on this 2-core machine: 30,000 partitions
// do not fit the delivery timeout there (measured: 10,000 left 40% of the
// records unanswered within 90s), 3,000 passed in 19-43s depending on the
// machine's other load, so 2,000 keeps a margin under the 90s timeout.
const defaultScalePartitions = 2000
