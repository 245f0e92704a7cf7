//go:build race

package e2e

// raceEnabled builds the server under test with -race too, so the crash
// test also race-checks the real process.
const raceEnabled = true
