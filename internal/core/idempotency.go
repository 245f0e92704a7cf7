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

// Idempotency records are kept by the store (TeamTx.Idempotency,
// PutIdempotency) and commit with the letter their write stored, so a
// record exists exactly when its write happened. How the file store keeps
// them (a log per team, written before the letter) is in
// docs/durability.md.

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
// fingerprint it fails with idempotency_conflict. An empty key never
// matches; an expired record does not either.
func (u *unit) replay(member, key, fp string, out any) (bool, error) {
	if key == "" {
		return false, nil
	}
	r, ok, err := u.tx.Idempotency(member, key)
	if err != nil {
		return false, asStoreError(err)
	}
	if !ok || r.Expired(u.now) {
		return false, nil
	}
	if r.Fingerprint != fp {
		return false, Errorf(CodeIdempotencyConflict, "This Idempotency-Key was already used with a different request.")
	}
	if err := json.Unmarshal(r.Result, out); err != nil {
		return false, err
	}
	return true, nil
}

// remember records result as the response of member's key, committed with
// the unit's letter; nothing for an empty key.
func (u *unit) remember(member, key, fp string, result any) error {
	if key == "" {
		return nil
	}
	return asStoreError(u.tx.PutIdempotency(IdempotencyRecord{Member: member, Key: key, Fingerprint: fp, Result: mustJSON(result), At: u.now.UTC()}))
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only called on plain result structs
	}
	return b
}

func itoa(n int) string { return strconv.Itoa(n) }
