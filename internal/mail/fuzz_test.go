package mail

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
	"testing"
)

// Fuzz targets for the decoders of the file store's own files, which a
// crash may tear and anyone with the data directory may edit: write-ahead
// log records and idempotency logs. Their seed corpora under testdata/fuzz
// run as ordinary tests; CI fuzzes each for a bounded time.

// frame frames payload as the log writes it, as record seq.
func frame(payload []byte, seq uint64) []byte {
	var hdr [walHeader]byte
	binary.LittleEndian.PutUint32(hdr[0:], uint32(len(payload)))
	binary.LittleEndian.PutUint64(hdr[8:], seq)
	binary.LittleEndian.PutUint32(hdr[4:], crc32.Update(crc32.Checksum(payload, walTable), walTable, hdr[8:16]))
	return append(hdr[:], payload...)
}

const seedRecord = `{"team":"demo","created":"2026-11-30T10:00:00Z","letter":{"id":"reader-1","sender":"lead","recipient":"reader","body":"hi"}}`

// FuzzWALFrame: any bytes at a record's place decode as one whole record
// or are refused (torn or damaged), never a panic or a length beyond the
// bytes.
func FuzzWALFrame(f *testing.F) {
	f.Add(frame([]byte(seedRecord), 7))
	f.Add(frame([]byte(`{"team":""}`), 1))
	f.Add(append(frame([]byte(seedRecord), 1), 0, 0, 0))
	f.Add([]byte{1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		rec, n, ok := decodeRecord(data)
		if !ok {
			return
		}
		if n <= walHeader || n > len(data) || rec.Team == "" {
			t.Fatalf("decodeRecord = %+v, %d of %d bytes", rec, n, len(data))
		}
	})
}

// FuzzWALRecord: a correctly framed payload of any bytes decodes or is
// refused without a panic; a decoded record encodes and decodes back to
// itself.
func FuzzWALRecord(f *testing.F) {
	f.Add([]byte(seedRecord), uint64(3))
	f.Add([]byte(`{"team":"demo","state":{"name":"demo","members":[{"name":"lead","role":"","status":"idle","turns":0,"history":[],"token_hash":"x","usage":{"input_tokens":1,"output_tokens":2}}],"requests":[]}}`), uint64(1))
	f.Add([]byte(`{"team":"demo","idem":[{"member":"lead","key":"k","fingerprint":"f","at":"2026-11-30T10:00:00Z"}],"turn_dels":["t-1"]}`), uint64(9))
	f.Add([]byte(`{"team":"demo","state":{"limits":{"inbox_messages":-1}}}`), uint64(2))
	f.Fuzz(func(t *testing.T, payload []byte, seq uint64) {
		if len(payload) == 0 {
			return
		}
		rec, n, ok := decodeRecord(frame(payload, seq))
		if !ok {
			return
		}
		if n != walHeader+len(payload) || rec.Seq != seq {
			t.Fatalf("decoded %d bytes as record %d, want %d bytes as %d", n, rec.Seq, walHeader+len(payload), seq)
		}
		enc, err := json.Marshal(rec)
		if err != nil {
			return // a value that does not encode again (e.g. a time out of range) is the writer's concern
		}
		back, _, ok := decodeRecord(frame(enc, seq))
		if !ok {
			t.Fatalf("re-encoded record %s does not decode", enc)
		}
		again, _ := json.Marshal(back)
		if !bytes.Equal(again, enc) {
			t.Fatalf("record changed on a second round:\n%s\n%s", enc, again)
		}
	})
}

// FuzzIdempotencyLog: the lines of an idempotency log decode as records,
// each with its member and key, or are refused, never a panic.
func FuzzIdempotencyLog(f *testing.F) {
	f.Add([]byte(`{"member":"lead","key":"k1","fingerprint":"abc","result":"eyJpZCI6MX0=","at":"2026-11-30T10:00:00Z","letter":{"id":"reader-1","sender":"lead","recipient":"reader","body":"hi"}}` + "\n"))
	f.Add([]byte(`{"member":"lead","key":"k1","fingerprint":"abc","at":"2026-11-30T10:00:00Z","cancelled":true}` + "\n" + `{"member":"","key":"k"}` + "\n"))
	f.Add([]byte("not json\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, err := decodeIdempotency(data)
		if err != nil {
			return
		}
		for _, r := range recs {
			if r.Member == "" || r.Key == "" {
				t.Fatalf("decoded record %+v without member or key", r)
			}
		}
	})
}
