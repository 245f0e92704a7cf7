package mail

import (
	"slices"
	"time"

	"mailroom/internal/core"
)

// fileSig identifies one version of a file: which file (device and inode)
// and its size, modification and change times in nanoseconds. Any write
// through the file system changes the change time and, for contents, the
// modification time too; a rename in place changes the inode.
type fileSig struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64
}

// racyWindow: a file the store reads whose last change is this recent
// might still be changed within the same timestamp tick, invisibly to a
// signature compare (the "racy clean" problem of version-control
// indexes), so its letters are not cached until the change is older.
// Timestamp ticks are milliseconds; the margin also covers clock steps.
const racyWindow = 2 * time.Second

func (g fileSig) racy(now time.Time) bool {
	return g.ctime > now.Add(-racyWindow).UnixNano()
}

// inboxState is what the store knows of one inbox file: whether it
// exists, its signature when last read or written, and its validated
// letters. A state is never modified once published; an append publishes
// a new one (which may share the letters' backing array, see letters).
type inboxState struct {
	exists bool
	// size is the length of the file msgs were read from or written as.
	// sig is the file's signature then, or the zero fileSig when it is
	// unknown (the file changed while it was read), which no file matches.
	size int64
	sig  fileSig
	msgs []core.Message
	// raw holds the file's bytes when they are not exactly what the store
	// would write for msgs (canonical): a file written by someone else, in
	// other spacing, with a raw U+2028, or without its final newline. The
	// next append then rewrites the file whole, in canonical bytes.
	raw []byte
	// limits and senders are what msgs were validated against.
	limits  core.Limits
	senders []string
	// archive is the mark the letters were checked at (their ids).
	archive *core.ArchiveMark
}

// letters returns the letters capped at their length, so a caller that
// appends to the slice copies it rather than writing into the array a
// later append of the store will use.
func (st *inboxState) letters() []core.Message {
	if len(st.msgs) == 0 {
		return []core.Message{}
	}
	return st.msgs[:len(st.msgs):len(st.msgs)]
}

// fits reports whether the letters, validated under st.limits and the
// members of that time, are valid under rules too: the same limits, and
// every sender still a member. It costs one call per distinct sender, not
// per letter.
func (st *inboxState) fits(rules core.InboxRules) bool {
	if st.limits != rules.Limits || rules.IsMember == nil || !st.archive.Equal(rules.Archive) {
		return false
	}
	for _, s := range st.senders {
		if !rules.IsMember(s) {
			return false
		}
	}
	return true
}

// encodeAll is the canonical file for msgs: what the lesson's save_inbox
// writes (docs/spec.md §13.1).
func encodeAll(msgs []core.Message) []byte {
	var out []byte
	for _, m := range msgs {
		out = append(out, core.EncodeInboxLine(m)...)
	}
	return out
}

// isCanonical reports whether data is exactly encodeAll(msgs), without
// building it.
func isCanonical(data []byte, msgs []core.Message) bool {
	for _, m := range msgs {
		l := core.EncodeInboxLine(m)
		if len(data) < len(l) || string(data[:len(l)]) != string(l) {
			return false
		}
		data = data[len(l):]
	}
	return len(data) == 0
}

// senderSet is the distinct senders of msgs.
func senderSet(msgs []core.Message) []string {
	var out []string
	for _, m := range msgs {
		out = addSender(out, m.Sender)
	}
	return out
}

func addSender(set []string, s string) []string {
	if slices.Contains(set, s) {
		return set
	}
	return append(slices.Clip(set), s)
}

func cacheKey(team, member string) string { return team + "/" + member }

// cached returns the state last published for key, or nil.
func (s *Store) cached(key string) *inboxState {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.inboxes[key]
}

// remember publishes st for key.
func (s *Store) remember(key string, st *inboxState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inboxes[key] = st
}

// forget drops what the store knows of key, so the next call reads the
// file in full, and closes the file it kept open for key, if any.
func (s *Store) forget(key string) {
	s.mu.Lock()
	delete(s.inboxes, key)
	s.mu.Unlock()
	s.files.drop(key)
}
