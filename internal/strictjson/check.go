// Package strictjson is the one strict decoder of JSON that comes from
// outside: REST request bodies and the tool inputs of MCP clients and of
// models. A body is exactly one JSON value in valid UTF-8, without \u
// escapes of lone surrogates and without an object that names a member
// twice; a decoded object has exactly the field names of the Go type it
// is decoded into (case included) and no other. Both doors use it, so a
// tool input is refused whenever the same bytes would be refused as a
// REST body.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Error says why bytes were refused. Its text names the rule broken, and of
// the bytes themselves at most an unknown field's name, quoted and cut
// short, so it may be shown to the client.
type Error struct{ msg string }

func (e *Error) Error() string { return e.msg }

func refuse(msg string) error { return &Error{msg: msg} }

// Check returns why data is not exactly one JSON value in valid UTF-8
// without lone surrogate escapes and without duplicate member names, or
// nil when it is. Each of these would otherwise be silently accepted or
// altered by a decoder: bytes after the value are never read, invalid
// UTF-8 and lone surrogates decode to U+FFFD, and of a duplicate name the
// last value wins, so no check after decoding could see them.
func Check(data []byte) error {
	if !utf8.Valid(data) {
		return refuse("The JSON is not valid UTF-8.")
	}
	if !json.Valid(data) {
		var first json.RawMessage
		if json.NewDecoder(bytes.NewReader(data)).Decode(&first) == nil {
			return refuse("The JSON holds more than one value; only whitespace may follow the first.")
		}
		return refuse("The JSON is not valid.")
	}
	if hasLoneSurrogate(data) {
		return refuse("The JSON escapes a lone UTF-16 surrogate (\\ud800-\\udfff without its pair).")
	}
	if hasDuplicateName(data) {
		return refuse("The JSON names a member of one object twice.")
	}
	return nil
}

// hasDuplicateName reports whether valid JSON data has an object that
// names a member twice (after unescaping, as every decoder compares
// names).
func hasDuplicateName(data []byte) bool {
	dec := jsontext.NewDecoder(bytes.NewReader(data)) // rejects duplicate names by default
	for {
		_, err := dec.ReadToken()
		if errors.Is(err, io.EOF) {
			return false
		}
		if err != nil {
			return errors.Is(err, jsontext.ErrDuplicateName)
		}
	}
}

// Decode decodes data strictly into v: Check's rules, then exactly the
// member names of v's type (case included), no unknown member, and the
// types v declares. Empty input and null decode as {} (a tool called
// without arguments).
//
// It is one pass over the bytes: the decoder refuses by itself all that
// Check refuses (invalid UTF-8, lone surrogate escapes, a name twice,
// bytes after the value), so Check runs only on a refusal, first, to
// name the rule broken as Check names it. On a refusal v may hold part
// of the input.
func Decode(data []byte, v any) error {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		data = []byte(`{}`)
	}
	if err := jsonv2.Unmarshal(data, v, jsonv2.RejectUnknownMembers(true)); err != nil {
		if cerr := Check(data); cerr != nil {
			return cerr
		}
		var se *jsonv2.SemanticError
		if errors.As(err, &se) && errors.Is(se.Err, jsonv2.ErrUnknownName) {
			// The one piece of the input an error repeats: the name of the
			// field that is not one, quoted and cut short, so that the
			// caller (a person or a model) sees its mistake at once.
			return refuse(quoteName(se.JSONPointer.LastToken()) + " is not a field of this input.")
		}
		return refuse("The JSON is not an object with exactly the expected fields and types.")
	}
	return nil
}

// quoteName quotes a field name as given, its control characters escaped,
// cut to 64 characters.
func quoteName(name string) string {
	const most = 64
	if r := []rune(name); len(r) > most {
		return strconv.Quote(string(r[:most])) + "…"
	}
	return strconv.Quote(name)
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
