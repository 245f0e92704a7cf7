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

// defineHealthcheck is `mailroom healthcheck [--addr A]`: it asks a
// running server for GET /healthz and fails unless it answers 2xx. It
// exists because the container image has no curl or wget.
func defineHealthcheck(fs *flag.FlagSet, in *invocation) runFunc {
	addr := fs.String("addr", envOr(in.getenv, "MAILROOM_ADDR", defaultAddr), "address `host:port` of the server to probe (env MAILROOM_ADDR)")
	return func(ctx context.Context, args []string) error {
		return runHealthcheck(ctx, *addr, args, in.stdout)
	}
}

// runHealthcheck probes the server at addr.
func runHealthcheck(ctx context.Context, addr string, args []string, stdout io.Writer) error {
	if len(args) > 0 {
		return usageErrorf("healthcheck: unexpected argument %q", args[0])
	}
	if err := validateAddr(addr); err != nil {
		return usageErrorf("healthcheck: %v", err)
	}
	url := "http://" + dialAddr(addr) + "/healthz"

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
