// Package client is a Go client of Mailroom's REST API, generated from
// api/openapi.yaml (oapi-codegen's client and types), so that every Go
// program talks to Mailroom through the same calls and shapes the
// server's own command line uses (`mailroom hook`, `inbox`, `send`).
//
// NewClientWithResponses(server) with server the API's base URL
// (http://host:port/api/v1) and WithRequestEditorFn adding
// "Authorization: Bearer <token>" gives typed answers per status; see
// Bearer.
package client

import (
	"context"
	"net/http"
)

//go:generate go tool oapi-codegen -config cfg.yaml ../api/openapi.yaml

// Bearer returns the option that sends token with every request, in the
// Authorization header (the only place Mailroom reads tokens from).
func Bearer(token string) ClientOption {
	return WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
		req.Header.Set("Authorization", "Bearer "+token)
		return nil
	})
}
