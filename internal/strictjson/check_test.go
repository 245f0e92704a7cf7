package strictjson_test

import (
	"encoding/json"
	"strings"
	"testing"

	"mailroom/internal/strictjson"
)

type sendInput struct {
	To   *string `json:"to"`
	Body *string `json:"body"`
}

// TestCheck holds the raw rules: one value, valid UTF-8, no lone
// surrogate escape, no member named twice (at any depth, escaped or not).
func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		ok       bool
	}{
		{"object", `{"to":"lead","body":"hi"}`, true},
		{"surrogate pair", `{"a":"\ud83d\ude00"}`, true},
		{"same name in two objects", `[{"a":1},{"a":2}]`, true},
		{"trailing value", `{"a":1} {"a":2}`, false},
		{"invalid utf-8", "{\"a\":\"\xff\"}", false},
		{"lone high surrogate", `{"a":"\ud800"}`, false},
		{"lone low surrogate", `{"a":"\udc00x"}`, false},
		{"duplicate name", `{"to":"lead","to":"x"}`, false},
		{"duplicate name escaped", `{"to":"lead","t\u006f":"x"}`, false},
		{"duplicate nested", `{"a":{"b":1,"b":2}}`, false},
		{"not json", `{`, false},
	} {
		err := strictjson.Check([]byte(tc.in))
		if (err == nil) != tc.ok {
			t.Errorf("%s: Check(%q) = %v, want ok=%v", tc.name, tc.in, err, tc.ok)
		}
	}
}

// TestDecode holds the field rules of tool inputs: exact names, no unknown
// field, no name twice; empty and null are {}.
func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		ok       bool
	}{
		{"exact", `{"to":"lead","body":"hi"}`, true},
		{"empty", ``, true},
		{"null", `null`, true},
		{"other case", `{"To":"lead","Body":"hi"}`, false},
		{"unknown field", `{"to":"lead","body":"hi","sender":"x"}`, false},
		{"duplicate", `{"to":"lead","body":"a","body":"b"}`, false},
		{"wrong type", `{"to":1,"body":"hi"}`, false},
		{"array", `[]`, false},
	} {
		var in sendInput
		err := strictjson.Decode([]byte(tc.in), &in)
		if (err == nil) != tc.ok {
			t.Errorf("%s: Decode(%q) = %v, want ok=%v", tc.name, tc.in, err, tc.ok)
		}
	}
	var in sendInput
	if err := strictjson.Decode([]byte(`{"to":"lead","body":"hi"}`), &in); err != nil || in.To == nil || *in.To != "lead" || in.Body == nil || *in.Body != "hi" {
		t.Fatalf("Decode = %+v, %v; want to=lead body=hi", in, err)
	}
}

// TestDecodeNamesTheUnknownField: a field the type does not have is named
// in the error, quoted, escaped and cut at 64 characters.
func TestDecodeNamesTheUnknownField(t *testing.T) {
	var v struct {
		To string `json:"to"`
	}
	for in, want := range map[string]string{
		`{"to":"lead","From":"x"}`:              `"From" is not a field of this input.`,
		`{"To":"lead"}`:                         `"To" is not a field of this input.`,
		`{"a\nb":1}`:                            `"a\nb" is not a field of this input.`,
		`{"` + strings.Repeat("f", 70) + `":1}`: `"` + strings.Repeat("f", 64) + `"… is not a field of this input.`,
	} {
		err := strictjson.Decode([]byte(in), &v)
		if err == nil || err.Error() != want {
			t.Errorf("Decode(%s) = %v, want %q", in, err, want)
		}
	}
}

// TestDecodeRefusesInsideRawValues: a name twice, a lone surrogate or
// invalid UTF-8 is refused with Check's message wherever it is, inside
// a field the type keeps raw or generic too.
func TestDecodeRefusesInsideRawValues(t *testing.T) {
	var v struct {
		Raw json.RawMessage `json:"raw"`
		Any any             `json:"any"`
	}
	for _, in := range []string{
		`{"raw":{"a":1,"a":2}}`, `{"any":{"a":1,"a":2}}`, `{"raw":"\ud800"}`, `{"any":["\udc00"]}`,
		"{\"raw\":\"\xff\"}", `{"any":1} {}`, `{"raw":[1,2]}x`,
	} {
		err := strictjson.Decode([]byte(in), &v)
		want := strictjson.Check([]byte(in))
		if want == nil {
			t.Fatalf("Check(%q) accepts it; the case is wrong", in)
		}
		if err == nil || err.Error() != want.Error() {
			t.Errorf("Decode(%q) = %v, want %v", in, err, want)
		}
	}
}

// TestParseDepth: Parse and Check agree at the nesting bound (10000
// levels), where Parse's one pass and Check's scanner both stop.
func TestParseDepth(t *testing.T) {
	for _, n := range []int{10000, 10001} {
		for _, in := range []string{
			strings.Repeat("[", n) + strings.Repeat("]", n),
			strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n),
		} {
			_, err := strictjson.Parse([]byte(in))
			want := strictjson.Check([]byte(in))
			if (err == nil) != (want == nil) || (err != nil && err.Error() != want.Error()) {
				t.Errorf("depth %d: Parse = %v, Check = %v", n, err, want)
			}
		}
	}
}
