package core_test

import (
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"

	"mailroom/internal/core"
)

type vectors struct {
	MailboxLines []struct {
		Body    string `json:"body"`
		Line    string `json:"line"`
		History string `json:"history"`
	} `json:"mailbox_lines"`
	ProtocolLetters []struct {
		Data map[string]any `json:"data"`
		Body string         `json:"body"`
		Line string         `json:"line"`
	} `json:"protocol_letters"`
	Trim []struct {
		Input      string `json:"input"`
		Trimmed    string `json:"trimmed"`
		CodePoints int    `json:"code_points"`
	} `json:"trim"`
	Lengths []struct {
		Input      string `json:"input"`
		CodePoints int    `json:"code_points"`
		UTF8Bytes  int    `json:"utf8_bytes"`
	} `json:"lengths"`
}

func loadVectors(t *testing.T) vectors {
	t.Helper()
	data, err := os.ReadFile("testdata/encoding.json")
	if err != nil {
		t.Fatal(err)
	}
	var v vectors
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestEncodeInboxLineVectors checks mailbox lines and history text against
// the bytes the lessons' own serialisation produced.
func TestEncodeInboxLineVectors(t *testing.T) {
	v := loadVectors(t)
	if len(v.MailboxLines) == 0 {
		t.Fatal("no vectors")
	}
	for i, tc := range v.MailboxLines {
		var m core.Message
		if err := json.Unmarshal([]byte(strings.TrimSuffix(tc.Line, "\n")), &m); err != nil {
			t.Fatalf("vector %d: %v", i, err)
		}
		if m.Body != tc.Body {
			t.Fatalf("vector %d: body decoded %q, want %q", i, m.Body, tc.Body)
		}
		if got := string(core.EncodeInboxLine(m)); got != tc.Line {
			t.Errorf("vector %d line:\n got %q\nwant %q", i, got, tc.Line)
		}
		if got := core.HistoryText(m); got != tc.History {
			t.Errorf("vector %d history:\n got %q\nwant %q", i, got, tc.History)
		}
	}
}

// TestProtocolLetterVectors checks request and response letter bodies.
func TestProtocolLetterVectors(t *testing.T) {
	v := loadVectors(t)
	for i, tc := range v.ProtocolLetters {
		typ, _ := tc.Data["type"].(string)
		id, _ := tc.Data["request_id"].(string)
		var body string
		if strings.HasSuffix(typ, "_request") {
			body = core.EncodeRequestLetter(strings.TrimSuffix(typ, "_request"), id, tc.Data["payload"].(string))
		} else {
			body = core.EncodeReplyLetter(core.Reply{Type: typ, RequestID: id, Approve: tc.Data["approve"].(bool), Feedback: tc.Data["feedback"].(string)})
		}
		if body != tc.Body {
			t.Errorf("vector %d body:\n got %q\nwant %q", i, body, tc.Body)
		}
		var m core.Message
		if err := json.Unmarshal([]byte(strings.TrimSuffix(tc.Line, "\n")), &m); err != nil {
			t.Fatal(err)
		}
		if m.Body != body {
			t.Errorf("vector %d: line body differs from letter body", i)
		}
		if got := string(core.EncodeInboxLine(m)); got != tc.Line {
			t.Errorf("vector %d line:\n got %q\nwant %q", i, got, tc.Line)
		}
	}
}

// TestTrimAndLengthVectors checks Python str.strip() and len() semantics.
func TestTrimAndLengthVectors(t *testing.T) {
	v := loadVectors(t)
	for i, tc := range v.Trim {
		got := core.Trim(tc.Input)
		if got != tc.Trimmed {
			t.Errorf("trim %d: got %q, want %q", i, got, tc.Trimmed)
		}
		if n := core.Length(got); n != tc.CodePoints {
			t.Errorf("trim %d: length %d, want %d", i, n, tc.CodePoints)
		}
	}
	for i, tc := range v.Lengths {
		if n := core.Length(tc.Input); n != tc.CodePoints || len(tc.Input) != tc.UTF8Bytes {
			t.Errorf("length %d: got %d cp / %d bytes, want %d / %d", i, n, len(tc.Input), tc.CodePoints, tc.UTF8Bytes)
		}
	}
}

func TestValidName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"reader", true}, {"a", true}, {"a-1", true}, {strings.Repeat("a", 24), true},
		{strings.Repeat("a", 25), false}, {"", false}, {"1a", false}, {"Reader", false},
		{"../other", false}, {"reader\n", false}, {"-a", false}, {"a_b", false},
	}
	for _, tt := range tests {
		if got := core.ValidName(tt.name); got != tt.ok {
			t.Errorf("ValidName(%q) = %v, want %v", tt.name, got, tt.ok)
		}
	}
	// Every name of up to three characters from an alphabet around the
	// rule's edges, and the cases above, against the pattern itself.
	pattern := regexp.MustCompile(`^[a-z][a-z0-9-]{0,23}$`)
	alphabet := []string{"a", "z", "0", "9", "-", "A", "_", "`", "{", "/", ":", "é", "\x00", "\n"}
	names := []string{""}
	for _, tt := range tests {
		names = append(names, tt.name)
	}
	for _, a := range alphabet {
		names = append(names, a, "a"+a+"a", strings.Repeat("b", 23)+a)
		for _, b := range alphabet {
			for _, c := range alphabet {
				names = append(names, a+b+c)
			}
		}
	}
	for _, name := range names {
		if got, want := core.ValidName(name), pattern.MatchString(name); got != want {
			t.Errorf("ValidName(%q) = %v, want %v (the pattern's answer)", name, got, want)
		}
	}
}

func TestDecodeInbox(t *testing.T) {
	members := map[string]bool{"lead": true, "reader": true, "reviewer": true}
	rules := core.InboxRules{Recipient: "reader", Limits: core.DefaultLimits(), IsMember: func(n string) bool { return members[n] }}
	line := func(id, sender, recipient, body string) string {
		return string(core.EncodeInboxLine(core.Message{ID: id, Sender: sender, Recipient: recipient, Body: body}))
	}
	good := line("reader-1", "reviewer", "reader", "hi") + line("reader-2", "lead", "reader", " x ")
	var nine string
	for i := 1; i <= 9; i++ {
		nine += line("reader-"+string(rune('0'+i)), "lead", "reader", "b")
	}
	tests := []struct {
		name  string
		data  string
		n     int
		cause error
	}{
		{"OK", good, 2, nil},
		{"OKEmptyFile", "", 0, nil},
		{"OKNoFinalNewline", strings.TrimSuffix(good, "\n"), 2, nil},
		{"OKUntrimmedBodyKept", line("reader-1", "lead", "reader", "   "), 1, nil},
		{"OKLineSeparatorEscaped", line("reader-1", "lead", "reader", "a\u2028b"), 1, nil},
		{"ErrNotJSON", "not-json", 0, core.ErrInboxJSON},
		{"ErrBlankLine", good + "\n", 0, core.ErrInboxJSON},
		{"ErrOnlyNewline", "\n", 0, core.ErrInboxJSON},
		{"ErrInvalidUTF8", "\xff\n", 0, core.ErrInboxEncoding},
		{"ErrCount", nine, 0, core.ErrInboxCount},
		{"ErrExtraKey", `{"id": "reader-1", "sender": "lead", "recipient": "reader", "body": "b", "x": 1}` + "\n", 0, core.ErrInboxFields},
		{"ErrNotObject", `["reader-1"]` + "\n", 0, core.ErrInboxFields},
		{"ErrSequence", line("reader-2", "lead", "reader", "b"), 0, core.ErrInboxSequence},
		{"ErrNumericID", `{"id": 1, "sender": "lead", "recipient": "reader", "body": "b"}` + "\n", 0, core.ErrInboxSequence},
		{"ErrRecipient", line("reader-1", "lead", "lead", "b"), 0, core.ErrInboxSequence},
		{"ErrSender", line("reader-1", "ghost", "reader", "b"), 0, core.ErrInboxSender},
		{"ErrEmptyBody", line("reader-1", "lead", "reader", ""), 0, core.ErrInboxBody},
		{"ErrLongBody", line("reader-1", "lead", "reader", strings.Repeat("字", 601)), 0, core.ErrInboxBody},
		{"ErrBodyNotString", `{"id": "reader-1", "sender": "lead", "recipient": "reader", "body": 5}` + "\n", 0, core.ErrInboxBody},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := core.DecodeInbox([]byte(tt.data), rules)
			if tt.cause == nil {
				if err != nil || len(got) != tt.n {
					t.Fatalf("got %d messages, err %v; want %d", len(got), err, tt.n)
				}
				return
			}
			if core.ErrorCode(err) != core.CodeInboxCorrupt || !errors.Is(err, tt.cause) {
				t.Fatalf("err = %v, want inbox_corrupt caused by %v", err, tt.cause)
			}
		})
	}
}
