package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"mailroom/client"
)

// TestRenderLettersBounds: at most 20 letters and 16 KiB of output, the
// first letter always (cut to fit), and a note of how many are left.
func TestRenderLettersBounds(t *testing.T) {
	letter := func(i, size int) client.Message {
		return client.Message{ID: fmt.Sprintf("reader-%d", i), Sender: "lead", Recipient: "reader", Body: strings.Repeat(`"é`, size/3)}
	}
	outputLen := func(text string) int {
		data, _ := json.Marshal(hookBlockOutput{Decision: "block", Reason: text})
		return len(data) + 1
	}
	t.Run("ByteCap", func(t *testing.T) {
		var ls []client.Message
		for i := range 5 {
			ls = append(ls, letter(i+1, 6000))
		}
		text, shown := renderLetters(ls, hookMaxLetters, hookMaxBytes)
		if n := outputLen(text); n > hookMaxBytes {
			t.Fatalf("output of %d bytes, want at most %d", n, hookMaxBytes)
		}
		if shown < 1 || shown >= 5 || !strings.Contains(text, fmt.Sprintf("%d more unread letters", 5-shown)) {
			t.Fatalf("shown %d of 5, text ends %q; want some, with a note of the rest", shown, text[max(len(text)-120, 0):])
		}
	})
	t.Run("FirstLetterCut", func(t *testing.T) {
		text, shown := renderLetters([]client.Message{letter(1, 60000), letter(2, 10)}, hookMaxLetters, hookMaxBytes)
		if n := outputLen(text); shown != 1 || n > hookMaxBytes || n < hookMaxBytes/2 || !strings.HasPrefix(text, letterPreamble+"\n\nMail from lead (reader-1): ") || !strings.Contains(text, "…") {
			t.Fatalf("shown %d, output %d bytes; want the first letter alone, cut to fit %d bytes", shown, n, hookMaxBytes)
		}
	})
	t.Run("LetterCap", func(t *testing.T) {
		var ls []client.Message
		for i := range 25 {
			ls = append(ls, letter(i+1, 30))
		}
		text, shown := renderLetters(ls, hookMaxLetters, hookMaxBytes)
		if shown != 20 || strings.Count(text, "Mail from ") != 20 || !strings.Contains(text, "5 more unread letters") {
			t.Fatalf("shown %d, %d paragraphs; want 20 and a note of 5 more", shown, strings.Count(text, "Mail from "))
		}
	})
}
