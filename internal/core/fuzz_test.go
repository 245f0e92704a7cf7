package core

import (
	"slices"
	"strings"
	"testing"
)

// Fuzz targets for the decoders of bytes core reads from outside: inbox
// files (which anyone with the data directory may edit) and protocol
// letters (whose bodies members write). Their seed corpora under
// testdata/fuzz run as ordinary tests; CI fuzzes each for a bounded time.

func fuzzRules() InboxRules {
	return InboxRules{Recipient: "reader", Limits: DefaultLimits(), IsMember: func(n string) bool {
		return n == "lead" || n == "reader" || n == "reviewer"
	}}
}

// FuzzDecodeInbox: any bytes either decode or are inbox_corrupt, never a
// panic; what decodes is valid letters of the inbox, and encodes back to
// bytes that decode to the same letters.
func FuzzDecodeInbox(f *testing.F) {
	f.Add([]byte(`{"id": "reader-1", "sender": "lead", "recipient": "reader", "body": "hello"}` + "\n"))
	f.Add([]byte(`{"id": "reader-1", "sender": "lead", "recipient": "reader", "body": "a\u2028b"}` + "\n" +
		`{"id": "reader-2", "sender": "reviewer", "recipient": "reader", "body": "second"}` + "\n"))
	f.Add([]byte(`{"id": "reader-1", "sender": "lead", "recipient": "reader", "body": "x", "body": "y"}` + "\n"))
	f.Add([]byte("{\"id\": \"reader-1\"}\n\xff"))
	f.Add([]byte(""))
	rules := fuzzRules()
	f.Fuzz(func(t *testing.T, data []byte) {
		msgs, err := DecodeInbox(data, rules)
		if err != nil {
			if ErrorCode(err) != CodeInboxCorrupt {
				t.Fatalf("DecodeInbox error %v has code %s, want inbox_corrupt", err, ErrorCode(err))
			}
			return
		}
		if len(msgs) > rules.Limits.InboxMessages {
			t.Fatalf("decoded %d letters, over the limit %d", len(msgs), rules.Limits.InboxMessages)
		}
		var again []byte
		for _, m := range msgs {
			if m.Recipient != "reader" || !rules.IsMember(m.Sender) {
				t.Fatalf("decoded letter %+v is not the reader's from a member", m)
			}
			again = append(again, EncodeInboxLine(m)...)
		}
		back, err := DecodeInbox(again, rules)
		if err != nil || !slices.Equal(back, msgs) {
			t.Fatalf("re-encoded inbox decodes to %+v, %v; want %+v", back, err, msgs)
		}
	})
}

// FuzzMatchLetter: a letter body a member wrote is matched against a
// pending request without panicking, and changes only that request, only
// through a protocol letter.
func FuzzMatchLetter(f *testing.F) {
	reply := Reply{Type: "plan_response", RequestID: "req-1", Approve: true, Feedback: "ok"}
	f.Add(EncodeReplyLetter(reply))
	f.Add(EncodeRequestLetter(KindPlan, "req-1", "do it"))
	f.Add(ProtocolPrefix + `{"type": "plan_response", "request_id": "req-1", "approve": true, "feedback": "ok", "feedback": "no"}`)
	f.Add(ProtocolPrefix + `{"type": "plan_response"`)
	f.Add("just a letter")
	f.Fuzz(func(t *testing.T, body string) {
		saved := reply
		st := &TeamState{Name: "demo", Limits: DefaultLimits(), Requests: []Request{{
			ID: "req-1", Kind: KindPlan, Sender: "reader", Target: "lead", Status: RequestPending, Reply: &saved,
		}}}
		u := &unit{st: st}
		res, changed := u.matchLocked("reader", Message{ID: "reader-1", Sender: "lead", Recipient: "reader", Body: body})
		if changed != (res.Status == RequestApproved || res.Status == RequestRejected) {
			t.Fatalf("match %+v reports changed=%v", res, changed)
		}
		if changed && (!strings.HasPrefix(body, ProtocolPrefix) || res.RequestID != "req-1" || st.Requests[0].Status != res.Status) {
			t.Fatalf("letter %q changed the request as %+v (request now %+v)", body, res, st.Requests[0])
		}
	})
}

// appendStringByRune is the canonical string writer as first written, one
// code point at a time: the reference appendString's run-copying must
// match byte for byte.
func appendStringByRune(dst []byte, s string, escapeLineSeparators bool) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for _, r := range s {
		switch {
		case r == '"':
			dst = append(dst, '\\', '"')
		case r == '\\':
			dst = append(dst, '\\', '\\')
		case r == '\n':
			dst = append(dst, '\\', 'n')
		case r == '\r':
			dst = append(dst, '\\', 'r')
		case r == '\t':
			dst = append(dst, '\\', 't')
		case r == '\b':
			dst = append(dst, '\\', 'b')
		case r == '\f':
			dst = append(dst, '\\', 'f')
		case escapeLineSeparators && (r == 0x85 || r == 0x2028 || r == 0x2029):
			dst = append(dst, '\\', 'u', hex[r>>12&0xf], hex[r>>8&0xf], hex[r>>4&0xf], hex[r&0xf])
		case r < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hex[r>>4], hex[r&0xf])
		default:
			dst = append(dst, string(r)...)
		}
	}
	return append(dst, '"')
}

// FuzzAppendString: the canonical writer equals the code-point-at-a-time
// reference on any string, valid UTF-8 or not, with and without the
// line-separator escapes.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "quote \" back \\ nl \n tab \t", "\x00\x01\x1f\x7f", "é 漢字 🙂",
		"\u0085\u2028\u2029", "bad \xff\xfe utf-8 \xe2\x80", "ends in \xc3"} {
		f.Add(s, true)
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, s string, esc bool) {
		got, want := appendString([]byte("x"), s, esc), appendStringByRune([]byte("x"), s, esc)
		if string(got) != string(want) {
			t.Fatalf("appendString(%q, %v) = %q, want %q", s, esc, got, want)
		}
	})
}
