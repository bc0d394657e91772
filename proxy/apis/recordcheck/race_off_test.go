//go:build !race

package recordcheck

const raceEnabled = false
