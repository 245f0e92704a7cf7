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

// checkRawBody refuses, before anything decodes it, a JSON request body
// that a decoder would silently accept or alter: bytes after the JSON
// value (the decoders used later read one value and stop), invalid UTF-8
// and \u escapes of lone surrogates (both decoded to U+FFFD, so no check
// after decoding can see them), and an object naming a member twice (of
// which decoders keep the last value). Each is 400 validation_failed and nothing
// is stored. The body is read whole here, within limitBody's cap, and
// handed on unchanged. Bodies of other media types are left to the
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
		if len(data) > 0 {
			if detail := rawBodyProblem(data); detail != "" {
				writeProblem(w, newProblem(core.CodeValidation, detail))
				return
			}
		}
		r.Body = io.NopCloser(bytes.NewReader(data))
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

// rawBodyProblem returns why data is not exactly one JSON value in valid
// UTF-8 without lone surrogate escapes or duplicate member names (the one
// strict check of internal/strictjson, which tool inputs pass too), or ""
// when it is.
func rawBodyProblem(data []byte) string {
	if err := strictjson.Check(data); err != nil {
		return "The request body is not acceptable: " + err.Error()
	}
	return ""
}
