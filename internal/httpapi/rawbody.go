package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"

	"mailroom/internal/core"
)

// checkRawBody refuses, before anything decodes it, a JSON request body
// that a decoder would silently accept or alter: bytes after the JSON
// value (the decoders used later read one value and stop), invalid UTF-8
// and \u escapes of lone surrogates (both decoded to U+FFFD, so no check
// after decoding can see them). Each is 400 validation_failed and nothing
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
// UTF-8 without lone surrogate escapes, or "" when it is.
func rawBodyProblem(data []byte) string {
	if !utf8.Valid(data) {
		return "The request body is not valid UTF-8."
	}
	if !json.Valid(data) {
		var first json.RawMessage
		if json.NewDecoder(bytes.NewReader(data)).Decode(&first) == nil {
			return "The request body holds more than one JSON value; only whitespace may follow it."
		}
		return "The request body is not valid JSON."
	}
	if hasLoneSurrogate(data) {
		return "The request body escapes a lone UTF-16 surrogate (\\ud800-\\udfff without its pair)."
	}
	return ""
}

// hasLoneSurrogate reports whether valid JSON data holds a \u escape of a
// high surrogate not directly followed by an escaped low surrogate, or of
// a low surrogate on its own. Such an escape names no character; decoders
// replace it with U+FFFD.
func hasLoneSurrogate(data []byte) bool {
	inString := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if !inString {
			if c == '"' {
				inString = true
			}
			continue
		}
		switch c {
		case '"':
			inString = false
		case '\\':
			// data is valid JSON, so an escape is complete: \x or \uXXXX.
			if data[i+1] != 'u' {
				i++
				continue
			}
			u := hex4(data[i+2 : i+6])
			i += 5
			switch {
			case u >= 0xDC00 && u <= 0xDFFF:
				return true
			case u >= 0xD800 && u <= 0xDBFF:
				if i+6 >= len(data) || data[i+1] != '\\' || data[i+2] != 'u' {
					return true
				}
				if lo := hex4(data[i+3 : i+7]); lo < 0xDC00 || lo > 0xDFFF {
					return true
				}
				i += 6
			}
		}
	}
	return false
}

// hex4 decodes four hex digits, which valid JSON guarantees after \u.
func hex4(b []byte) rune {
	var r rune
	for _, c := range b {
		r <<= 4
		switch {
		case '0' <= c && c <= '9':
			r |= rune(c - '0')
		case 'a' <= c && c <= 'f':
			r |= rune(c - 'a' + 10)
		case 'A' <= c && c <= 'F':
			r |= rune(c - 'A' + 10)
		}
	}
	return r
}
