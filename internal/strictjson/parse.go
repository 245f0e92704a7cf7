package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
)

// Parse checks data as Check does and, in the same pass over the bytes,
// decodes it into the generic value a schema validator reads: nil, bool,
// string, json.Number (the number's text, so that no number is rounded
// or out of range), []any and map[string]any. It is the value
// encoding/json's Decoder with UseNumber gives for data that passes
// Check, so that a REST body is checked, validated against the schema and
// bound to its typed value from one decode.
//
// A refusal is Check's error with Check's message, whatever the decoder
// met first: the messages say the rule broken in Check's order (UTF-8,
// then one valid value, then surrogates, then names), which a single
// pass cannot see in that order, so on a refusal Check runs once more to
// name it. Refused bytes are the rare case; accepted ones cost one pass.
func Parse(data []byte) (any, error) {
	if v, ok := parseOnce(data); ok {
		return v, nil
	}
	if err := Check(data); err != nil {
		return nil, err
	}
	// Bytes Check accepts that the one pass did not take: nesting near
	// the decoders' depth bound, which the two count alike only nearly.
	// The standard decoder, whose scanner Check's validity is, reads them.
	var v any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, refuse("The JSON is not valid.")
	}
	return v, nil
}

// decoders keeps token decoders between requests: a decoder's buffers
// are most of what a small body's parse would allocate.
var decoders = sync.Pool{New: func() any { return new(jsontext.Decoder) }}

// noBytes is what a pooled decoder reads while it waits, so that it holds
// no request's bytes.
var noBytes = new(bytes.Buffer)

// parseOnce decodes data in one pass of the token decoder, whose defaults
// refuse invalid UTF-8, lone surrogate escapes and duplicate member names
// as Check does; it reports false for anything it refuses, bytes after
// the first value included.
func parseOnce(data []byte) (any, bool) {
	dec := decoders.Get().(*jsontext.Decoder)
	dec.Reset(bytes.NewBuffer(data)) // read in place: the decoder copies no bytes out of a Buffer
	defer func() {
		dec.Reset(noBytes)
		decoders.Put(dec)
	}()
	v, err := readValue(dec)
	if err != nil {
		return nil, false
	}
	if _, err := dec.ReadToken(); !errors.Is(err, io.EOF) {
		return nil, false
	}
	return v, true
}

// readValue reads one JSON value from dec as a generic value.
func readValue(dec *jsontext.Decoder) (any, error) {
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, err
	}
	switch tok.Kind() {
	case 'n':
		return nil, nil
	case 't', 'f':
		return tok.Bool(), nil
	case '"':
		return tok.String(), nil
	case '0':
		return json.Number(tok.String()), nil
	case '{':
		obj := map[string]any{}
		for dec.PeekKind() != '}' {
			tok, err := dec.ReadToken()
			if err != nil {
				return nil, err
			}
			name := tok.String() // a token is valid until the next read
			v, err := readValue(dec)
			if err != nil {
				return nil, err
			}
			obj[name] = v
		}
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
		return obj, nil
	case '[':
		arr := []any{}
		for dec.PeekKind() != ']' {
			v, err := readValue(dec)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
		return arr, nil
	default:
		return nil, errors.New("strictjson: unexpected token")
	}
}
