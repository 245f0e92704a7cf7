package main

import (
	"context"
	"io"
)

// runScenario is the "scenario" command. It is reserved here so the command
// line keeps its shape; running scenarios is available over the API
// (POST /api/v1/scenarios/{name}/runs).
func runScenario(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return usageErrorf("the scenario command is not available in this build; use POST /api/v1/scenarios/{name}/runs")
}
