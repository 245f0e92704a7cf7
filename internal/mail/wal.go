package mail

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"mailroom/internal/core"
)

// The write-ahead log (docs/durability.md). Every unit of work that
// changes a team is one record appended to <data>/wal/<first seq>.log;
// a committer goroutine writes whatever records arrived while its last
// fsync ran and fsyncs them together (group commit). A unit of work is
// acknowledged only once the fsync that covers its record returned. The
// team's files (inboxes, state.json, idempotency.log, turn documents)
// follow: a letter is appended to its inbox, without an fsync of its
// own, as soon as its record is durable; the rest is written at
// checkpoints, after which the log segments they cover are removed.
// Start-up replays what is left of the log into the files.
//
// A record on disk is framed as
//
//	length of the payload (4 bytes, LE) | CRC-32C of payload ‖ seq (4 bytes, LE) | seq (8 bytes, LE) | payload (JSON walRecord)
//
// (the payload is encoded before the record gets its seq, outside the
// log's lock, so a large state does not hold up other teams' commits)
//
// so a torn last record (a crash during its write, before its fsync
// returned, hence never acknowledged) is recognised and cut off.

const (
	walDir    = "wal"
	walExt    = ".log"
	walHeader = 16
	// walMaxRecord bounds one record's payload; more is damage, not a
	// record (a state with long histories is a few MB).
	walMaxRecord = 256 << 20
	// Defaults of WithCheckpoint: a segment is closed and checkpointed
	// after this many records or bytes.
	defaultCheckpointRecords = 50000
	defaultCheckpointBytes   = 64 << 20
	// walChunk: a segment grows in steps of this many zero bytes, each
	// fsynced before any record is written into it. A record then
	// overwrites blocks the file already has, so the fdatasync that makes
	// it durable flushes data only: the file's size and block map do not
	// change, and the file system has no journal commit to make. On ext4
	// here it costs about a quarter less than an append's (BENCHMARKS.md).
	// The zeros also end the log for the reader: a record's length is
	// never 0. One step per MiB of log costs one extra fsync per few
	// thousand records.
	walChunk = 1 << 20
)

// walZeros is what a segment's space is filled with, a piece at a time.
var walZeros [64 << 10]byte

var walTable = crc32.MakeTable(crc32.Castagnoli)

// walRecord is one unit of work: everything it changed of one team.
// Created names the team's incarnation (a team deleted and created again
// under the same name is another team), so replay never applies a record
// to a team it was not written for.
type walRecord struct {
	Seq     uint64    `json:"-"` // in the frame
	Team    string    `json:"team"`
	Created time.Time `json:"created"`
	// The unit's change-set, whose field names are the record's: a log
	// written before change-sets existed replays as it always did.
	core.ChangeSet
}

// WithCheckpoint sets after how many records or bytes of log a segment
// is closed and checkpointed (defaults 50,000 records, 64 MiB).
func WithCheckpoint(records int, bytes int64) Option {
	return func(s *Store) { s.wal.maxRecs, s.wal.maxBytes = max(records, 1), max(bytes, 1) }
}

// wal is the store's log. Group commit is leader/follower: a writer
// waiting for its record that finds no fsync running becomes the leader:
// it takes every record queued so far, writes them with one write and
// fsyncs them with one fsync, then wakes everyone whose record that
// covered. Records queued while it ran wait for the next leader, among
// the writers woken. A lone writer thus writes its own record, with no
// hand-off to another goroutine and back.
type wal struct {
	s        *Store
	dir      string
	maxRecs  int
	maxBytes int64

	mu      sync.Mutex
	buf     []byte // framed records not yet written
	first   uint64 // seq of the first record in buf
	next    uint64 // seq of the next record
	durable uint64 // every record up to it is fsynced
	err     error  // set once the log is closed for good
	// failed lists the ranges of seqs whose records were not made
	// durable (a failed write or fsync): their writers get an error, and
	// each team rolls its memory back to before its first failed record.
	failed  []failedRange
	changed chan struct{}
	closing bool
	// rotateReq asks the next leader to close the current segment
	// between two batches (Store.Checkpoint); it closes the channel when
	// done.
	rotateReq chan struct{}
	// crowded: the last batch held more than one record, or records
	// queued while it was written; its next leader yields first (wait).
	crowded bool
	// yield lets the goroutines ready to run go before a leader of a
	// crowded log writes: runtime.Gosched, replaced in tests.
	yield   func()
	syncing bool   // a leader is writing; the fields below are its
	bufRecs int    // records in buf
	spare   []byte // the previous batch's buffer, for reuse

	// Owned by the leader.
	f        File
	cut      bool  // a batch failed: cut the segment back first
	segBytes int64 // bytes of records in the segment: the next one's offset
	segRecs  int
	// segSpace is how much of the segment is written (records, then
	// zeros) and fsynced: records up to it change no file metadata.
	segSpace int64
	// retire lists closed segments whose records all are durable; a
	// checkpoint removes them once the files hold what they say.
	retire []string

	ckpt    chan struct{}
	ckptMu  sync.Mutex // one checkpoint at a time
	syncs   atomic.Int64
	started bool
}

func segName(first uint64) string { return fmt.Sprintf("%016x%s", first, walExt) }

// append frames rec (its Seq assigned here) and queues it for the next
// group commit. It returns the record's seq.
//
// base is the team's previous record (0: none in memory): a unit of work
// that built on a record that failed is refused, so that nothing durable
// ever depends on something that is not.
func (w *wal) append(rec *walRecord, base uint64) (uint64, error) {
	payload, err := json.Marshal(rec)
	if err != nil {
		return 0, fmt.Errorf("mail: encode log record: %w", err)
	}
	if len(payload) > walMaxRecord {
		return 0, fmt.Errorf("mail: log record of %d bytes is over the limit", len(payload))
	}
	sum := crc32.Checksum(payload, walTable)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return 0, w.err
	}
	if err := w.failure(base); err != nil {
		return 0, err
	}
	if w.closing {
		return 0, errors.New("mail: the store is closed")
	}
	rec.Seq = w.next
	var hdr [walHeader]byte
	binary.LittleEndian.PutUint32(hdr[0:], uint32(len(payload)))
	binary.LittleEndian.PutUint64(hdr[8:], rec.Seq)
	binary.LittleEndian.PutUint32(hdr[4:], crc32.Update(sum, walTable, hdr[8:16]))
	if len(w.buf) == 0 {
		w.first = rec.Seq
	}
	w.buf = append(append(w.buf, hdr[:]...), payload...)
	w.bufRecs++
	w.next++
	return rec.Seq, nil
}

// errRecordFailed: a record's write or fsync failed; nothing of its unit
// of work is kept.
var errRecordFailed = errors.New("mail: the write-ahead log's write or fsync failed; nothing was stored")

// failedRange is records lo to hi, which failed with err.
type failedRange struct {
	lo, hi uint64
	err    error
}

// failure is why record seq failed, or nil. Called with w.mu held.
func (w *wal) failure(seq uint64) error {
	for _, r := range w.failed {
		if seq >= r.lo && seq <= r.hi {
			return fmt.Errorf("%w: %w", errRecordFailed, r.err)
		}
	}
	return nil
}

// outcome returns the durable seq and a function telling failed records,
// for a team to settle its records against.
func (w *wal) outcome() (uint64, func(uint64) bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	failed := w.failed
	return w.durable, func(seq uint64) bool {
		for _, r := range failed {
			if seq >= r.lo && seq <= r.hi {
				return true
			}
		}
		return false
	}
}

// durableSeq is the seq up to which every record is fsynced.
func (w *wal) durableSeq() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.durable
}

// walMaxYields bounds how many times a leader yields before it writes,
// so that a stream of new records cannot hold a batch back for long.
const walMaxYields = 4

// wait returns once record seq is durable, or the error that keeps it
// from ever being. A waiter that finds records queued and no leader
// leads (see wal); when the log is crowded it first lets the goroutines
// ready to run go, so that one fsync covers more records: at 64 clients
// over 64 teams (cmd/loadgen, phase f) a send's share of fsyncs fell from
// about 0.2 to 0.07, an fsync costing this machine about 64 µs of CPU
// (BENCHMARKS.md, "A crowded log gathers, and an untouched state needs
// no reflection"). A lone writer (the log not crowded) leads at once.
func (w *wal) wait(seq uint64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	yields := 0
	for {
		if err := w.failure(seq); err != nil {
			return err
		}
		if w.durable >= seq {
			return nil
		}
		if w.err != nil {
			return w.err
		}
		if !w.syncing && len(w.buf) > 0 {
			if w.crowded && yields < walMaxYields {
				// Before leading, the goroutines ready to run go first:
				// under load some are units of work about to queue their
				// records, which this fsync then covers too. A yield that
				// queued nothing ends the gathering.
				yields++
				queued := w.next
				w.mu.Unlock()
				w.yield()
				w.mu.Lock()
				if w.next == queued {
					yields = walMaxYields
				}
				continue
			}
			w.lead()
			continue
		}
		ch := w.changed
		w.mu.Unlock()
		<-ch
		w.mu.Lock()
	}
}

// lead writes and fsyncs every queued record as one batch, and closes the
// segment if it is full or a checkpoint asked for it. Called with w.mu
// held and no leader; it releases the lock while it writes.
func (w *wal) lead() {
	w.syncing = true
	batch, first, n := w.buf, w.first, w.bufRecs
	w.buf, w.bufRecs = w.spare[:0], 0
	hi := w.next - 1
	w.mu.Unlock()

	var err error
	cutDone := false
	if len(batch) > 0 {
		err = w.write(batch, first)
		if err != nil {
			// The batch is cut off at once, not only before the next
			// write: its write may have reached the file whole although
			// its fsync failed, and a restart must not find a refused
			// record and replay it. If cutting fails too, it is tried
			// again before anything else is written (w.cut).
			cutDone = w.cutBack() == nil
		}
	}
	full := false
	if err == nil && len(batch) > 0 {
		w.segBytes += int64(len(batch))
		w.segRecs += n
		full = w.segRecs >= w.maxRecs || w.segBytes >= w.maxBytes
	}

	w.mu.Lock()
	if err != nil {
		// Nothing of the batch, nor of what was queued behind it (it
		// may build on the batch), is acknowledged. The segment is cut
		// back to its last durable byte before anything follows it.
		w.failed = append(w.failed, failedRange{first, w.next - 1, err})
		w.buf, w.bufRecs = w.buf[:0], 0
		w.cut = !cutDone
		w.s.log.Error("a write-ahead log write failed; its units of work are refused", "first", first, "last", w.next-1, "err", err)
	} else if len(batch) > 0 {
		w.durable = hi
	}
	// Records queued beside this batch's or while it ran: the next
	// leader gathers before it writes.
	w.crowded = n > 1 || len(w.buf) > 0
	w.spare = batch
	req := w.rotateReq
	w.rotateReq = nil
	close(w.changed)
	w.changed = make(chan struct{})
	if (full || req != nil) && w.f != nil && !w.cut {
		// Every record written so far is durable; the next ones go to
		// a new segment. (Still the leader: nobody writes meanwhile.)
		w.mu.Unlock()
		rerr := w.rotate(w.durable + 1)
		w.mu.Lock()
		if rerr != nil {
			w.s.log.Warn("starting a new log segment failed; the current one goes on", "err", rerr)
		} else if full && !w.closing {
			select {
			case w.ckpt <- struct{}{}:
			default:
			}
		}
	}
	if req != nil {
		close(req)
	}
	w.syncing = false
	close(w.changed)
	w.changed = make(chan struct{})
}

// flush makes every record queued so far durable (or failed), leading if
// it must, and returns with no leader running. Called with w.mu held.
func (w *wal) flush() {
	for w.syncing || len(w.buf) > 0 {
		if !w.syncing {
			w.lead()
			continue
		}
		ch := w.changed
		w.mu.Unlock()
		<-ch
		w.mu.Lock()
	}
}

// write appends batch to the current segment and fsyncs it. The first
// batch after start creates the segment.
func (w *wal) write(batch []byte, first uint64) error {
	if w.cut {
		// The segment is cut back to its last durable byte before
		// anything follows it; until that works, nothing is written.
		if err := w.cutBack(); err != nil {
			return err
		}
		w.cut = false
	}
	if w.f == nil {
		f, err := w.create(first)
		if err != nil {
			return err
		}
		w.f, w.segSpace = f, 0
	}
	if end := w.segBytes + int64(len(batch)); end > w.segSpace {
		if err := w.grow(end); err != nil {
			return err
		}
	}
	if _, err := w.f.WriteAt(batch, w.segBytes); err != nil {
		return err
	}
	w.syncs.Add(1)
	return syncData(w.f)
}

// grow fills the segment with zeros up to the walChunk step at or past
// end and fsyncs them, so that the records written there next change no
// metadata (see walChunk).
func (w *wal) grow(end int64) error {
	to := (end + walChunk - 1) / walChunk * walChunk
	for off := w.segSpace; off < to; {
		n := min(int64(len(walZeros)), to-off)
		if _, err := w.f.WriteAt(walZeros[:n], off); err != nil {
			return err
		}
		off += n
	}
	if err := syncData(w.f); err != nil {
		return err
	}
	w.segSpace = to
	return nil
}

// cutBack truncates the current segment to what was durable before the
// failed batch and fsyncs it.
func (w *wal) cutBack() error {
	if w.f == nil {
		return nil
	}
	if err := w.f.Truncate(w.segBytes); err != nil {
		return err
	}
	// The zeros past the records went too; the next write grows again.
	w.segSpace = w.segBytes
	if w.segBytes == 0 {
		// A segment with nothing durable in it: start it again.
		return nil
	}
	return syncData(w.f)
}

// rotate closes the current segment (every record in it is durable) and
// starts the next one with record first.
func (w *wal) rotate(first uint64) error {
	f, err := w.create(first)
	if err != nil {
		return err
	}
	old := w.f
	w.f, w.segBytes, w.segRecs, w.segSpace = f, 0, 0, 0
	_ = old.Close() // fsynced
	w.mu.Lock()
	w.retire = append(w.retire, old.Name())
	w.mu.Unlock()
	return nil
}

// create makes a new, empty segment durable in the log directory. It is
// not opened for appending: records go at their offset (WriteAt), into
// space grow filled with zeros.
func (w *wal) create(first uint64) (File, error) {
	path := filepath.Join(w.dir, segName(first))
	f, err := w.s.fs.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, fileMode)
	if err != nil {
		return nil, fmt.Errorf("mail: create log segment: %w", err)
	}
	if err := w.s.fs.SyncDir(w.dir); err != nil {
		f.Close()
		_ = w.s.fs.Remove(path)
		return nil, fmt.Errorf("mail: sync log directory: %w", err)
	}
	return f, nil
}

// segments lists the log's segment files, oldest first.
func (w *wal) segments() ([]string, error) {
	entries, err := w.s.fs.ReadDir(w.dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), walExt)
		if !ok || len(name) != 16 || !e.Type().IsRegular() {
			continue
		}
		if _, err := strconv.ParseUint(name, 16, 64); err != nil {
			continue
		}
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out, nil
}

// readLog reads every record of the log, oldest first. A torn or
// unreadable tail of the last segment (a record whose write a crash
// interrupted; its fsync never returned, so it was never acknowledged)
// is cut off, fsynced and logged. Anything else that is not a record is
// an error: a record could be lost.
func (w *wal) readLog() ([]walRecord, []string, error) {
	segs, err := w.segments()
	if err != nil {
		return nil, nil, fmt.Errorf("mail: list log: %w", err)
	}
	var out []walRecord
	for i, name := range segs {
		path := filepath.Join(w.dir, name)
		data, fi, err := w.s.readRegular(path, -1)
		if err != nil {
			return nil, nil, fmt.Errorf("mail: read log segment %s: %w", name, err)
		}
		off := 0
		for off < len(data) {
			rec, n, ok := decodeRecord(data[off:])
			if !ok {
				break
			}
			if len(out) > 0 && rec.Seq <= out[len(out)-1].Seq {
				return nil, nil, fmt.Errorf("mail: log segment %s: record %d follows %d", name, rec.Seq, out[len(out)-1].Seq)
			}
			out = append(out, rec)
			off += n
		}
		if off < len(data) && !allZero(data[off:]) {
			if i != len(segs)-1 {
				return nil, nil, fmt.Errorf("mail: log segment %s is damaged at byte %d", name, off)
			}
			if err := w.s.truncatePath(path, sigOf(fi), int64(off)); err != nil {
				return nil, nil, fmt.Errorf("mail: remove the torn end of the log: %w", err)
			}
			w.s.log.Warn("removed the torn end of the write-ahead log; that write was interrupted and never acknowledged",
				"segment", name, "bytes_removed", len(data)-off, "bytes_kept", off)
		}
		// Zeros after the last record are space grow made ready: the
		// log's end, not damage.
	}
	return out, segs, nil
}

// allZero reports whether b holds only zero bytes.
func allZero(b []byte) bool {
	for len(b) >= 8 {
		if binary.LittleEndian.Uint64(b) != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// decodeRecord decodes the record at the start of data and its framed
// length; ok is false for a torn or damaged record.
func decodeRecord(data []byte) (walRecord, int, bool) {
	var rec walRecord
	if len(data) < walHeader {
		return rec, 0, false
	}
	n := int(binary.LittleEndian.Uint32(data))
	sum := binary.LittleEndian.Uint32(data[4:])
	if n == 0 || n > walMaxRecord || len(data)-walHeader < n {
		return rec, 0, false
	}
	payload := data[walHeader : walHeader+n]
	if crc32.Update(crc32.Checksum(payload, walTable), walTable, data[8:16]) != sum {
		return rec, 0, false
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	if err := dec.Decode(&rec); err != nil || rec.Team == "" {
		return rec, 0, false
	}
	rec.Seq = binary.LittleEndian.Uint64(data[8:])
	return rec, walHeader + n, true
}

// open starts the log after start-up replayed it: record first is the
// next, in a segment the first write creates; and the checkpointer.
func (w *wal) open(first uint64) error {
	if first == 0 {
		first = 1
	}
	w.next, w.durable = first, first-1
	w.changed = make(chan struct{})
	w.ckpt = make(chan struct{}, 1)
	w.started = true
	go func() {
		for range w.ckpt {
			_ = w.s.checkpoint(false)
		}
	}()
	return nil
}

// requestRotate closes the current segment between two batches, so that
// a checkpoint can retire everything written so far.
func (w *wal) requestRotate() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closing {
		return
	}
	w.flush()
	req := make(chan struct{})
	w.rotateReq = req
	w.lead() // an empty batch: only the rotation
}

// stop makes what is queued durable and closes the log to writes; the
// current segment joins those to retire.
func (w *wal) stop() error {
	if !w.started {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closing {
		return nil
	}
	w.closing = true
	w.flush()
	close(w.ckpt)
	if w.f != nil {
		w.retire = append(w.retire, w.f.Name())
		err := w.f.Close()
		w.f = nil
		return err
	}
	return nil
}

// errNotDir is a log directory that is not a directory.
var errNotDir = errors.New("not a directory")

func (w *wal) ensureDir() error {
	if err := w.s.ensureDir(w.dir); err != nil {
		return err
	}
	fi, err := w.s.fs.Lstat(w.dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() || fi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("mail: log directory %s: %w", w.dir, errNotDir)
	}
	return nil
}
