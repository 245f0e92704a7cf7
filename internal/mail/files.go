package mail

import (
	"container/list"
	"errors"
	"strings"
	"sync"
)

// defaultOpenFiles is how many idle inbox files a store keeps open between
// appends unless WithOpenFiles says otherwise. Each costs one descriptor;
// the default leaves the usual limit of 1,024 plenty for connections.
const defaultOpenFiles = 128

// WithOpenFiles sets how many idle inbox files the store keeps open
// between appends (default 128), least recently used first out. With 0
// every append opens and closes its file.
func WithOpenFiles(n int) Option {
	return func(s *Store) { s.files.max = max(n, 0) }
}

// heldFile is an inbox file opened for appending, with the identity
// (device and inode) fstat gave when it was opened. A descriptor keeps
// pointing at that inode whatever happens to the path, so before each use
// the path's lstat must show the same inode, with the signature the store
// expects (see Store.appendLine).
type heldFile struct {
	key      string
	f        File
	dev, ino uint64
}

// openFiles holds idle inbox files, at most max of them. An append takes
// its file out (take) and gives it back only after a successful append
// (put), so a file is never closed while in use: eviction closes only idle
// files, and at most max files plus one per append in progress are open.
type openFiles struct {
	mu     sync.Mutex
	max    int
	closed bool
	lru    list.List // of *heldFile, most recently used at the front
	byKey  map[string]*list.Element
}

// take removes and returns the idle file of key, or nil.
func (o *openFiles) take(key string) *heldFile {
	o.mu.Lock()
	defer o.mu.Unlock()
	e := o.byKey[key]
	if e == nil {
		return nil
	}
	delete(o.byKey, key)
	return o.lru.Remove(e).(*heldFile)
}

// put keeps h as the idle file of its key and reports whether it did. It
// does not when the store keeps no files (max 0) or was closed; the
// caller then closes h itself. Files pushed out by h are closed here.
func (o *openFiles) put(h *heldFile) (bool, error) {
	var out []*heldFile
	o.mu.Lock()
	if o.closed || o.max == 0 {
		o.mu.Unlock()
		return false, nil
	}
	if o.byKey == nil {
		o.byKey = map[string]*list.Element{}
	}
	if e := o.byKey[h.key]; e != nil {
		// Only if calls on one inbox overlapped, which core never does.
		out = append(out, o.lru.Remove(e).(*heldFile))
	}
	o.byKey[h.key] = o.lru.PushFront(h)
	for o.lru.Len() > o.max {
		old := o.lru.Remove(o.lru.Back()).(*heldFile)
		delete(o.byKey, old.key)
		out = append(out, old)
	}
	o.mu.Unlock()
	return true, closeAll(out)
}

// drop closes the idle file of key, if any.
func (o *openFiles) drop(key string) {
	if h := o.take(key); h != nil {
		_ = h.f.Close() // every append through it was fsynced
	}
}

// dropPrefix closes the idle files of every key that starts with prefix.
func (o *openFiles) dropPrefix(prefix string) {
	var out []*heldFile
	o.mu.Lock()
	for key, e := range o.byKey {
		if strings.HasPrefix(key, prefix) {
			delete(o.byKey, key)
			out = append(out, o.lru.Remove(e).(*heldFile))
		}
	}
	o.mu.Unlock()
	_ = closeAll(out) // every append through them was fsynced
}

// close closes every idle file and makes put refuse from now on.
func (o *openFiles) close() error {
	var out []*heldFile
	o.mu.Lock()
	o.closed = true
	for o.lru.Len() > 0 {
		out = append(out, o.lru.Remove(o.lru.Front()).(*heldFile))
	}
	o.byKey = nil
	o.mu.Unlock()
	return closeAll(out)
}

// closeAll closes idle files. An error here loses nothing: each append
// through the file was fsynced before it was acknowledged.
func closeAll(hs []*heldFile) error {
	var errs []error
	for _, h := range hs {
		errs = append(errs, h.f.Close())
	}
	return errors.Join(errs...)
}

// Close makes everything queued in the write-ahead log durable, writes
// every team changed since the last checkpoint into its files (inboxes
// fsynced, state.json and idempotency.log replaced) and empties the log,
// so that the files alone hold the data; then it closes the inbox files
// the store keeps open between appends. A server calls it on shutdown.
// Later units of work fail; the store's direct file calls stay usable.
func (s *Store) Close() error {
	// The search index first: its start-up pass reads teams through the log.
	searchErr := s.closeSearch()
	return errors.Join(s.closeLog(), s.files.close(), searchErr)
}
