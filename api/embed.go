// Package api holds the machine-readable REST contract, api/openapi.yaml,
// embedded so that the server can serve the exact bytes it was built from.
package api

import _ "embed"

// Spec is the OpenAPI 3.0.3 document of the /api/v1 interface.
//
//go:embed openapi.yaml
var Spec []byte
