package httpapi

import (
	"context"
	"mime"
	"net/http"
	"strconv"
	"strings"
)

// mediaJSONL is the inbox in the lesson's file bytes (GET inbox).
const mediaJSONL = "application/jsonl"

type jsonlKey struct{}

// negotiate records in the request's context whether the client prefers
// application/jsonl to application/json (the strict handlers see no
// Accept header; OpenAPI does not declare it as a parameter).
func negotiate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if accept := r.Header.Values("Accept"); len(accept) > 0 && prefersJSONL(strings.Join(accept, ",")) {
			r = r.WithContext(context.WithValue(r.Context(), jsonlKey{}, true))
		}
		next.ServeHTTP(w, r)
	})
}

// wantsJSONL reports whether the request asked for application/jsonl.
func wantsJSONL(ctx context.Context) bool {
	v, _ := ctx.Value(jsonlKey{}).(bool)
	return v
}

// prefersJSONL reports whether an Accept header asks for
// application/jsonl: named with a quality above zero, above that of
// application/json when that is named too, and at least that of a
// wildcard (application/* or */*) otherwise. JSON stays the default.
func prefersJSONL(accept string) bool {
	jsonl, json, wild := 0.0, -1.0, 0.0
	for _, part := range strings.Split(accept, ",") {
		media, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		q := 1.0
		if v, ok := params["q"]; ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				q = f
			}
		}
		switch media {
		case mediaJSONL:
			jsonl = max(jsonl, q)
		case "application/json":
			json = max(json, q)
		case "application/*", "*/*":
			wild = max(wild, q)
		}
	}
	if jsonl <= 0 {
		return false
	}
	if json >= 0 {
		return jsonl > json
	}
	return jsonl >= wild
}
