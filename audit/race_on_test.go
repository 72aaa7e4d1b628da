//go:build race

package audit

// raceEnabled: the race detector moves values to the heap, so allocation
// counts hold only without it.
const raceEnabled = true
