//go:build !race

package integration

// defaultScalePartitions without the race detector: issue 11's full run
// (measured about 25s to produce one record to each of 30,000 partitions).
const defaultScalePartitions = 30000
