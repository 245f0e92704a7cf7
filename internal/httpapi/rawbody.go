package httpapi

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"

	"mailroom/internal/core"
	"mailroom/internal/strictjson"
)

// checkRawBody refuses, before anything else reads it, a JSON request
// body that a decoder would silently accept or alter: bytes after the
// JSON value (the decoders used later read one value and stop), invalid
// UTF-8 and \u escapes of lone surrogates (both decoded to U+FFFD, so no
// check after decoding can see them), and an object naming a member twice
// (of which decoders keep the last value). Each is 400 validation_failed
// and nothing is stored. The body is read whole here, within limitBody's
// cap, and decoded in the same pass (strictjson.Parse): the validator
// checks that value against the schema and the handler binds it, so the
// bytes are parsed once (but for a body with a oneOf, whose handler reads
// the bytes; validate.go). Bodies of other media types are left to the
// validator, which answers them 415.
func checkRawBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || !jsonMediaType(r.Header.Get("Content-Type")) {
			next.ServeHTTP(w, r)
			return
		}
		data, err := io.ReadAll(r.Body)
		_ = r.Body.Close()
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				writeProblem(w, newProblem(codeBodyTooLarge, "The request body is over 1 MiB."))
				return
			}
			writeProblem(w, newProblem(core.CodeValidation, "The request body could not be read."))
			return
		}
		if len(data) == 0 {
			// No body to parse: the validator says whether one is required.
			r.Body = io.NopCloser(bytes.NewReader(data))
			next.ServeHTTP(w, r)
			return
		}
		value, err := strictjson.Parse(data)
		if err != nil {
			writeProblem(w, newProblem(core.CodeValidation, "The request body is not acceptable: "+err.Error()))
			return
		}
		r.Body = &parsedBody{Reader: bytes.NewReader(data), data: data, value: value}
		next.ServeHTTP(w, r)
	})
}

// jsonMediaType reports whether a Content-Type names JSON. An empty one
// counts: the body is still checked before anything reads it.
func jsonMediaType(contentType string) bool {
	if strings.TrimSpace(contentType) == "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// parsedBody is a JSON request body that checkRawBody read whole and
// decoded once. It still reads as its bytes, for whatever reads a body as
// bytes (the validator, when the media type is not plain JSON).
type parsedBody struct {
	*bytes.Reader
	data  []byte
	value any
}

// Close implements io.Closer; the bytes are in memory.
func (*parsedBody) Close() error { return nil }

// validatedBody is a body whose decoded value passed the schema: the
// generated handlers bind that value into their typed body
// (runtime.BindJSONBody asks for ValidatedValue) rather than decode the
// bytes once more.
type validatedBody struct {
	io.ReadCloser
	value any
}

// ValidatedValue is the value the schema validated.
func (b validatedBody) ValidatedValue() any { return b.value }
