//go:build race

package proxy

// raceEnabled: the race detector moves some values to the heap, so
// allocation counts under it are higher.
const raceEnabled = true
