//go:build race

package recordcheck

// raceEnabled: the race detector is on (sync.Pool then drops items at
// random, so pooled code allocates).
const raceEnabled = true
