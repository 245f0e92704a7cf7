//go:build race

package main

// raceEnabled builds the server under test with -race too, so the end-to-end
// tests also race-check the real process and share the build cache.
const raceEnabled = true
