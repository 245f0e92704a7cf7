//go:build !race

package workspace

// raceEnabled: this binary was built with the race detector (tests); see
// race.go.
const raceEnabled = false
