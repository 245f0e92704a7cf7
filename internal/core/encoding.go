package core

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The canonical encoder (docs/spec.md §13.1). Mailbox lines, protocol letters and
// history text must be byte-for-byte what the lessons' Python json.dumps
// writes, so they are built here by hand rather than with encoding/json,
// whose escaping (HTML characters, U+2028) and separators differ.

// Prefixes of the two kinds of text the lessons put in front of JSON.
const (
	TeamMessagePrefix = "[team-message] "
	ProtocolPrefix    = "[team-protocol] "
)

// ValidName reports whether name matches ^[a-z][a-z0-9-]{0,23}$, the
// member-name rule (docs/spec.md §4.1). Team names follow it too. It is
// asked several times per request (every path built from a name), so it
// reads the bytes itself rather than through a regular expression;
// TestValidName holds it to the pattern.
func ValidName(name string) bool {
	if len(name) == 0 || len(name) > 24 || name[0] < 'a' || name[0] > 'z' {
		return false
	}
	for i := 1; i < len(name); i++ {
		if c := name[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

// field is one key/value of an object written by the canonical encoder.
// Values are strings or booleans, the only types the lessons' letters hold,
// or integers (a reply's seq).
type field struct {
	key  string
	str  string
	bool *bool
	num  *int
}

// appendString writes s as a JSON string the way Python's json.dumps does
// with ensure_ascii=False: quote, backslash and the five short escapes,
// other code points below U+0020 as \u00xx, everything else raw. With
// escapeLineSeparators, U+0085, U+2028 and U+2029 are written as escapes
// too, because the lessons' loader splits lines on them (defect D1).
func appendString(dst []byte, s string, escapeLineSeparators bool) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	// Runs of bytes written as they are (the common case: printable
	// ASCII and valid UTF-8 that is no line separator) are copied whole;
	// a send encodes its letter several times, so this is on the hot path.
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"':
				dst = append(dst, '\\', '"')
			case '\\':
				dst = append(dst, '\\', '\\')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			// Invalid UTF-8 becomes U+FFFD, as ranging over the string
			// (and Python's decoding with errors="replace") gives.
			dst = append(dst, s[start:i]...)
			dst = utf8.AppendRune(dst, utf8.RuneError)
			start = i + size
		case escapeLineSeparators && (r == 0x85 || r == 0x2028 || r == 0x2029):
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', hex[r>>12&0xf], hex[r>>8&0xf], hex[r>>4&0xf], hex[r&0xf])
			start = i + size
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendObject writes fields in the given order with Python's default
// separators ", " and ": ".
func appendObject(dst []byte, fields []field, escapeLineSeparators bool) []byte {
	dst = append(dst, '{')
	for i, f := range fields {
		if i > 0 {
			dst = append(dst, ',', ' ')
		}
		dst = appendString(dst, f.key, false)
		dst = append(dst, ':', ' ')
		switch {
		case f.bool != nil:
			dst = strconv.AppendBool(dst, *f.bool)
		case f.num != nil:
			dst = strconv.AppendInt(dst, int64(*f.num), 10)
		default:
			dst = appendString(dst, f.str, escapeLineSeparators)
		}
	}
	return append(dst, '}')
}

// EncodeInboxLine returns the mailbox line of m, with its final newline:
// keys in the order id, sender, recipient, body (docs/spec.md §2.2, §13.1).
// A reply adds in_reply_to, thread_id and seq after them, and a letter
// that asks for an acknowledgement ack_required (docs/api.md, "Mail that
// stays useful"); a letter with neither is the lesson's line, byte for
// byte.
func EncodeInboxLine(m Message) []byte {
	fields := append(make([]field, 0, 8), []field{
		{key: "id", str: m.ID},
		{key: "sender", str: m.Sender},
		{key: "recipient", str: m.Recipient},
		{key: "body", str: m.Body},
	}...)
	line := appendObject(make([]byte, 0, 64+len(m.Body)), append(fields, letterExtras(m)...), true)
	return append(line, '\n')
}

// letterExtras are the keys a reply or a letter that asks for an
// acknowledgement adds to the lesson's four, in the order of its line.
func letterExtras(m Message) []field {
	var out []field
	if m.InReplyTo != "" {
		seq := m.Seq
		out = append(out, field{key: "in_reply_to", str: m.InReplyTo}, field{key: "thread_id", str: m.ThreadID}, field{key: "seq", num: &seq})
	}
	if m.AckRequired {
		yes := true
		out = append(out, field{key: "ack_required", bool: &yes})
	}
	return out
}

// HistoryText returns the [team-message] text a letter becomes in a
// member's history: the envelope with sorted keys (docs/spec.md §2.3).
// A reply's and an acknowledged letter's extra keys join them in order,
// so that the model sees what the letter answers and that it should ack.
func HistoryText(m Message) string {
	fields := []field{
		{key: "body", str: m.Body},
		{key: "id", str: m.ID},
		{key: "recipient", str: m.Recipient},
		{key: "sender", str: m.Sender},
	}
	fields = append(fields, letterExtras(m)...)
	slices.SortStableFunc(fields, func(a, b field) int { return strings.Compare(a.key, b.key) })
	return TeamMessagePrefix + string(appendObject(nil, fields, false))
}

// EncodeRequestLetter returns the body of a *_request protocol letter.
func EncodeRequestLetter(kind, requestID, payload string) string {
	return ProtocolPrefix + string(appendObject(nil, []field{
		{key: "payload", str: payload},
		{key: "request_id", str: requestID},
		{key: "type", str: kind + "_request"},
	}, false))
}

// EncodeReplyLetter returns the body of a *_response protocol letter.
func EncodeReplyLetter(r Reply) string {
	approve := r.Approve
	return ProtocolPrefix + string(appendObject(nil, []field{
		{key: "approve", bool: &approve},
		{key: "feedback", str: r.Feedback},
		{key: "request_id", str: r.RequestID},
		{key: "type", str: r.Type},
	}, false))
}

// isPythonSpace reports whether r is stripped by Python's str.strip()
// (docs/spec.md §13.2); the set is wider than unicode.IsSpace in places.
func isPythonSpace(r rune) bool {
	switch {
	case r >= 0x09 && r <= 0x0d, r >= 0x1c && r <= 0x20:
		return true
	case r == 0x85, r == 0xa0, r == 0x1680:
		return true
	case r >= 0x2000 && r <= 0x200a:
		return true
	case r == 0x2028, r == 0x2029, r == 0x202f, r == 0x205f, r == 0x3000:
		return true
	}
	return false
}

// Trim removes leading and trailing whitespace as Python's str.strip() does.
func Trim(s string) string { return strings.TrimFunc(s, isPythonSpace) }

// Length counts code points, as Python's len() does on a str.
func Length(s string) int { return utf8.RuneCountInString(s) }

// DecodeInbox parses and validates the bytes of one inbox file (docs/spec.md §4.2
// steps 5–8): UTF-8, one JSON object per line (split on "\n" only, docs/spec.md
// §13.1), at most the message limit, exact keys, sequential ids, the right
// recipient, a registered sender and a body of 1..body_chars code points,
// untrimmed. Any failure is inbox_corrupt: a damaged file is never read as
// an empty inbox. The byte limit is the caller's check, made while reading.
func DecodeInbox(data []byte, rules InboxRules) ([]Message, error) {
	if !utf8.Valid(data) {
		return nil, corrupt(ErrInboxEncoding)
	}
	items := []map[string]json.RawMessage{}
	raw := []json.RawMessage{}
	if len(data) > 0 {
		text := strings.TrimSuffix(string(data), "\n")
		for _, line := range strings.Split(text, "\n") {
			var v json.RawMessage
			if err := json.Unmarshal([]byte(line), &v); err != nil {
				return nil, corrupt(ErrInboxJSON)
			}
			raw = append(raw, v)
		}
	}
	if len(raw) > rules.Limits.InboxMessages {
		return nil, corrupt(ErrInboxCount)
	}
	for _, v := range raw {
		var obj map[string]json.RawMessage
		if len(v) == 0 || v[0] != '{' || json.Unmarshal(v, &obj) != nil || !letterKeys(obj) {
			return nil, corrupt(ErrInboxFields)
		}
		items = append(items, obj)
	}
	out := make([]Message, 0, len(items))
	for i, obj := range items {
		msg, err := decodeLetter(obj, rules)
		if err != nil {
			return nil, err
		}
		if msg.ID != rules.Recipient+"-"+strconv.Itoa(rules.Archive.Number(i+1)) {
			return nil, corrupt(ErrInboxSequence)
		}
		out = append(out, msg)
	}
	return out, nil
}

// decodeLetter reads one line of rules.Recipient's inbox or archive: an
// id of that inbox, the recipient, a registered sender and a body of
// 1..body_chars code points, untrimmed, and a reply's and an
// acknowledged letter's keys.
func decodeLetter(obj map[string]json.RawMessage, rules InboxRules) (Message, error) {
	id, idOK := jsonString(obj["id"])
	recipient, recOK := jsonString(obj["recipient"])
	who, _, numOK := ParseLetterID(id)
	if !idOK || !recOK || !numOK || who != rules.Recipient || recipient != rules.Recipient {
		return Message{}, corrupt(ErrInboxSequence)
	}
	sender, ok := jsonString(obj["sender"])
	if !ok || !ValidName(sender) || rules.IsMember == nil || !rules.IsMember(sender) {
		return Message{}, corrupt(ErrInboxSender)
	}
	body, ok := jsonString(obj["body"])
	if n := Length(body); !ok || n < 1 || n > rules.Limits.BodyChars {
		return Message{}, corrupt(ErrInboxBody)
	}
	msg := Message{ID: id, Sender: sender, Recipient: recipient, Body: body}
	if !decodeExtras(obj, &msg) {
		return Message{}, corrupt(ErrInboxFields)
	}
	return msg, nil
}

// letterKeys reports whether obj has the lesson's four keys and, besides
// them, only a reply's three (all or none) and ack_required.
func letterKeys(obj map[string]json.RawMessage) bool {
	n := 4
	for _, k := range []string{"id", "sender", "recipient", "body"} {
		if _, ok := obj[k]; !ok {
			return false
		}
	}
	reply := 0
	for _, k := range []string{"in_reply_to", "thread_id", "seq"} {
		if _, ok := obj[k]; ok {
			reply++
		}
	}
	if reply != 0 && reply != 3 {
		return false
	}
	n += reply
	if _, ok := obj["ack_required"]; ok {
		n++
	}
	return len(obj) == n
}

// decodeExtras reads a reply's keys and ack_required into m: letter ids,
// a positive seq written as Mailroom writes it, and ack_required true
// (a letter that asks for none has no key).
func decodeExtras(obj map[string]json.RawMessage, m *Message) bool {
	if raw, ok := obj["in_reply_to"]; ok {
		in, ok1 := jsonString(raw)
		thread, ok2 := jsonString(obj["thread_id"])
		seq, ok3 := canonicalNumber(string(obj["seq"]))
		if _, _, ok := ParseLetterID(in); !ok || !ok1 || !ok2 || !ok3 {
			return false
		}
		if _, _, ok := ParseLetterID(thread); !ok {
			return false
		}
		m.InReplyTo, m.ThreadID, m.Seq = in, thread, seq
	}
	if raw, ok := obj["ack_required"]; ok {
		if v, ok := jsonBool(raw); !ok || !v {
			return false
		}
		m.AckRequired = true
	}
	return true
}

func exactKeys(obj map[string]json.RawMessage, keys ...string) bool {
	if len(obj) != len(keys) {
		return false
	}
	for _, k := range keys {
		if _, ok := obj[k]; !ok {
			return false
		}
	}
	return true
}

// jsonString decodes v when it is a JSON string.
func jsonString(v json.RawMessage) (string, bool) {
	if len(v) == 0 || v[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}

// jsonBool decodes v when it is a JSON boolean.
func jsonBool(v json.RawMessage) (bool, bool) {
	switch string(v) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}
