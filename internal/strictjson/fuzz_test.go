package strictjson_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"unicode/utf8"

	"mailroom/internal/strictjson"
)

// Fuzz targets for the one strict decoder of outside JSON: REST bodies
// (Check, the raw-body check) and tool inputs (Decode). Their seed corpora
// under testdata/fuzz run as ordinary tests; CI fuzzes each for a bounded
// time.

// FuzzCheck: what Check accepts is one valid JSON value in valid UTF-8
// that the standard decoder reads whole, without a member named twice.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{
		`{"to":"lead","body":"hi"}`, `{"a":"\ud83d\ude00"}`, `{"a":1,"a":2}`, `{"a":1} x`,
		"{\"a\":\"\xff\"}", `{"a":"\ud800"}`, `[{"a":{"b":[1,2,{"c":null}]}}]`, ` "x" `, `{"a":"\u0061","\u0061":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := strictjson.Check(data); err != nil {
			return
		}
		if !utf8.Valid(data) || !json.Valid(data) {
			t.Fatalf("Check accepted %q, which is not one valid JSON value in UTF-8", data)
		}
		var v any
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber() // a number beyond float64 is valid JSON all the same
		if err := dec.Decode(&v); err != nil || dec.More() {
			t.Fatalf("Check accepted %q, which does not decode as one value: %v", data, err)
		}
	})
}

// toolInput has the shapes tool inputs use: strings, a bool, an int and a
// nested object, each optional.
type toolInput struct {
	To      *string          `json:"to"`
	Body    *string          `json:"body"`
	Approve *bool            `json:"approve"`
	Timeout *int             `json:"timeout_seconds"`
	Extra   *struct{ N int } `json:"extra"`
}

// FuzzDecode: what Decode accepts passed Check and names only the fields
// of the type, exactly; decoding it again gives the same value.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"to":"lead","body":"hi"}`, `{"To":"lead"}`, `{"to":"a","to":"b"}`, `{"approve":true,"timeout_seconds":30}`,
		`{"extra":{"N":1}}`, `{"extra":{"n":1}}`, `null`, ``, `{"sender":"x"}`, `{"timeout_seconds":1.5}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var in toolInput
		if err := strictjson.Decode(data, &in); err != nil {
			return
		}
		trimmed := bytes.TrimSpace(data)
		if len(trimmed) != 0 && !bytes.Equal(trimmed, []byte("null")) {
			if err := strictjson.Check(data); err != nil {
				t.Fatalf("Decode accepted %q, which Check refuses: %v", data, err)
			}
			var members map[string]json.RawMessage
			if err := json.Unmarshal(data, &members); err != nil {
				t.Fatalf("Decode accepted %q, which is not an object: %v", data, err)
			}
			for name := range members {
				switch name {
				case "to", "body", "approve", "timeout_seconds", "extra":
				default:
					t.Fatalf("Decode accepted %q with the member %q", data, name)
				}
			}
		}
		enc, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		var again toolInput
		if err := strictjson.Decode(enc, &again); err != nil {
			t.Fatalf("Decode refuses its own value re-encoded %s: %v", enc, err)
		}
		if back, _ := json.Marshal(again); !bytes.Equal(back, enc) {
			t.Fatalf("value changed on a second round: %s, then %s", enc, back)
		}
	})
}

// FuzzParse: Parse refuses exactly what Check refuses, with Check's
// message, and what it accepts decodes to the value the standard decoder
// (with UseNumber, as the schema validator decodes a body) gives.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"to":"lead","body":"hi"}`, `{"a":"\ud83d\ude00"}`, `{"a":1,"a":2}`, `{"a":1} x`, `1 2`, `1e400`,
		"{\"a\":\"\xff\"}", `{"a":"\ud800"}`, `[{"a":{"b":[1,2,{"c":null}]}}]`, ` "x" `, `{"a":"\u0061","\u0061":1}`,
		`[]`, `{}`, `[true,false,null,-0.5e-3,"\n\u00e9"]`, `{"a":[{}]} `, `{"a":1,}`, ``, ` `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := strictjson.Parse(data)
		checkErr := strictjson.Check(data)
		switch {
		case checkErr != nil && err == nil:
			t.Fatalf("Parse(%q) accepted what Check refuses: %v", data, checkErr)
		case checkErr == nil && err != nil:
			t.Fatalf("Parse(%q) = %v, where Check accepts it", data, err)
		case err != nil:
			if err.Error() != checkErr.Error() {
				t.Fatalf("Parse(%q) says %q, Check says %q", data, err, checkErr)
			}
			return
		}
		var want any
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if err := dec.Decode(&want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("Parse(%q) = %#v, want %#v", data, got, want)
		}
	})
}
