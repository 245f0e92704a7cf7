package core

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"time"
)

// IdempotencyTTL is how long a remembered response is kept: at least a day,
// so a client may retry after any realistic timeout.
const IdempotencyTTL = 24 * time.Hour

// fingerprint identifies an operation and its arguments: a retry must
// repeat both exactly to be answered with the first response.
func fingerprint(op string, args ...string) string {
	h := sha256.New()
	h.Write([]byte(op))
	for _, a := range args {
		h.Write([]byte{0})
		h.Write([]byte(a))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// replay looks up (member, key). When found with the same fingerprint it
// decodes the remembered response into out and reports true; with another
// fingerprint it fails with idempotency_conflict. Expired records are
// dropped first. An empty key never matches.
func (t *team) replay(member, key, fp string, now time.Time, out any) (bool, error) {
	if key == "" {
		return false, nil
	}
	t.prune(now)
	for _, r := range t.st.Idempotency {
		if r.Member == member && r.Key == key {
			if r.Fingerprint != fp {
				return false, Errorf(CodeIdempotencyConflict, "This Idempotency-Key was already used with a different request.")
			}
			if err := json.Unmarshal(r.Result, out); err != nil {
				return false, err
			}
			return true, nil
		}
	}
	return false, nil
}

func (t *team) prune(now time.Time) {
	kept := t.st.Idempotency[:0]
	for _, r := range t.st.Idempotency {
		if now.Sub(r.At) < IdempotencyTTL {
			kept = append(kept, r)
		}
	}
	t.st.Idempotency = kept
}

func (t *team) remember(r IdempotencyRecord) {
	t.st.Idempotency = append(t.st.Idempotency, r)
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only called on plain result structs
	}
	return b
}

func itoa(n int) string { return strconv.Itoa(n) }
