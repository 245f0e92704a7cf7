package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"
)

// healthcheckTimeout bounds one probe; container runtimes call it often.
const healthcheckTimeout = 3 * time.Second

// runHealthcheck asks a running server for GET /healthz and fails unless it
// answers 2xx. It exists because the container image has no curl or wget.
func runHealthcheck(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("mailroom healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", envOr(getenv, "MAILROOM_ADDR", defaultAddr), "address `host:port` of the server to probe (env MAILROOM_ADDR)")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return err
		}
		return usageErrorf("healthcheck: %v", err)
	}
	if fs.NArg() > 0 {
		return usageErrorf("healthcheck: unexpected argument %q", fs.Arg(0))
	}
	if err := validateAddr(*addr); err != nil {
		return usageErrorf("healthcheck: %v", err)
	}
	url := "http://" + dialAddr(*addr) + "/healthz"

	ctx, cancel := context.WithTimeout(ctx, healthcheckTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("healthcheck: %s answered %s", url, resp.Status)
	}
	fmt.Fprintf(stdout, "ok: %s answered %s\n", url, resp.Status)
	return nil
}
