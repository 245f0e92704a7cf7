package agent

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"mailroom/internal/core"
)

// A model's answer is untrusted input, like a request body: a provider (or
// whatever answers at its base URL) may send any bytes. What the loop
// takes from an answer is checked here before anything is counted or run.

// MaxAnswerBytes bounds the body of one model answer. The largest real
// answer (MaxMaxTokens of text and tool calls, as JSON) is far smaller;
// a body beyond it is cut off, so that a provider cannot make the server
// hold an answer of any size.
const MaxAnswerBytes = 8 << 20

// ErrAnswerTooLarge is the error of reading an answer's body beyond
// MaxAnswerBytes.
var ErrAnswerTooLarge = fmt.Errorf("the answer's body is larger than %d MiB", MaxAnswerBytes>>20)

// invalidAnswer is the ProviderError type of an answer that arrived but
// cannot be used: too large, or with counts that are not counts.
const invalidAnswer = "invalid_response"

// usageCount is one token count of an answer: its name in the
// provider's wire format and its raw JSON text as the SDK kept it.
type usageCount struct {
	name string
	raw  string
}

// checkUsage refuses an answer whose token counts are not integers
// within 0..core.MaxUsageCount, read from their raw JSON so that neither
// SDK's lenient decoding (a float, a string, a number too large for
// int64) can slip a wrong count through. An absent or null count is 0:
// OpenAI-compatible servers often send no usage at all.
func checkUsage(provider string, retries int, counts ...usageCount) *ProviderError {
	for _, c := range counts {
		raw := strings.TrimSpace(c.raw)
		if raw == "" || raw == "null" {
			continue
		}
		n, err := strconv.ParseInt(raw, 10, 64)
		if err == nil && n >= 0 && n <= core.MaxUsageCount {
			continue
		}
		shown := raw
		if len(shown) > 40 {
			shown = shown[:40] + "…"
		}
		return &ProviderError{
			Provider: provider, Status: http.StatusOK, Type: invalidAnswer, Retries: retries,
			Message: scrub(fmt.Sprintf("the answer's usage.%s is %s, not a token count of 0 to 2^53; nothing of it was counted", c.name, shown), ""),
		}
	}
	return nil
}

// usageMissing reports whether any of counts is absent or null in the
// answer: the answer says nothing of what it cost.
func usageMissing(counts ...usageCount) bool {
	for _, c := range counts {
		if raw := strings.TrimSpace(c.raw); raw == "" || raw == "null" {
			return true
		}
	}
	return false
}

// tooLarge reports err as the ProviderError of an answer cut off at
// MaxAnswerBytes, or nil for any other error.
func tooLarge(provider string, err error, retries int) *ProviderError {
	if !errors.Is(err, ErrAnswerTooLarge) {
		return nil
	}
	return &ProviderError{Provider: provider, Status: http.StatusOK, Type: invalidAnswer, Message: ErrAnswerTooLarge.Error(), Retries: retries}
}

// limitedClient returns an HTTP client that sends through c (nil: a
// default client) and cuts every answer's body at MaxAnswerBytes.
func limitedClient(c *http.Client) *http.Client {
	out := &http.Client{}
	if c != nil {
		*out = *c
	}
	next := out.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	out.Transport = limitTransport{next: next}
	return out
}

// limitTransport wraps every answer's body in a bodyLimit.
type limitTransport struct{ next http.RoundTripper }

func (t limitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := t.next.RoundTrip(req)
	if err != nil || res == nil || res.Body == nil {
		return res, err
	}
	res.Body = &bodyLimit{rc: res.Body, left: MaxAnswerBytes, header: res.Header}
	return res, nil
}

// bodyLimit reads at most left bytes of rc and then fails with
// ErrAnswerTooLarge if more follow. When it fails it marks the answer
// x-should-retry: false, which both SDKs read after the body to decide
// whether to send the request again: an answer too large would be as
// large the next time.
type bodyLimit struct {
	rc     io.ReadCloser
	left   int64
	header http.Header
	failed bool
}

func (b *bodyLimit) Read(p []byte) (int, error) {
	if b.failed {
		return 0, ErrAnswerTooLarge
	}
	if b.left <= 0 {
		var one [1]byte
		n, err := b.rc.Read(one[:])
		if n == 0 {
			return 0, err
		}
		b.failed = true
		if b.header != nil {
			b.header.Set("x-should-retry", "false")
		}
		return 0, ErrAnswerTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *bodyLimit) Close() error { return b.rc.Close() }
