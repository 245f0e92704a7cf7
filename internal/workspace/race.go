//go:build race

package workspace

// raceEnabled: this binary was built with the race detector (tests), whose
// runtime has mapped far more than the sandbox's address-space limit and
// maps more whenever Go code runs; see addressLimitArgs.
const raceEnabled = true
