package mail

import (
	"context"
	"database/sql"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"mailroom/internal/core"
)

// The file store's search index (core.Searcher, docs/api.md "Search"): an
// SQLite FTS5 index in <data>/search, beside the teams (searchdb.go). The
// inbox files stay the truth; the index is only ever behind them, never
// ahead:
//
//   - A letter enters the index's tail when its unit of work is durable
//     (fileTx.Commit, before the send is answered), and a goroutine moves
//     the tail into the index in batches. A search reads the tail and the
//     index, so a letter is found as soon as its send is acknowledged, and
//     the send pays only an append to the tail.
//   - Indexing yields to sends: the goroutine indexes once no letter was
//     committed for searchQuiet. Under a load that never pauses, once the
//     tail holds searchTailBound letters (or searchTailBytes) it indexes
//     a batch at a time, paced so that it takes about a twentieth of the
//     time (searchPace): the tail grows while sends take the CPU, and a
//     search's walk over it with it. Only at searchTailHard letters (or
//     searchTailHardBytes) does it index at full speed, so that the
//     tail's memory stays bounded.
//   - The index holds what is searched (team, sender, recipient, the
//     body's words with their positions) and no letter: a hit names the
//     letter by its id, and the letter is read from its inbox
//     (memberLetters) and matched again (core.MatchLetter), so the index
//     stores no second copy of the mail and decides no match alone.
//   - At start the index is opened, or made anew when it is missing or
//     does not open; in the background it is then read whole and made anew
//     if damaged, every team's letters are counted in it against its
//     inboxes and the teams it misses are indexed again from their
//     inboxes. Until that pass is done, searches scan the inboxes instead.
//     The pass may overlap the tail: a letter committed before it ended
//     is looked up before it is indexed, so none is indexed twice.
//   - Letters are indexed under the team's incarnation (teamKey), so a
//     team deleted and created again under its name never finds the old
//     team's letters; the old ones are removed in the background.

// searchDir is the index's directory in the data directory.
const searchDir = "search"

// searchBatch bounds the letters indexed in one transaction of the index.
const searchBatch = 2000

// searchQuiet is how long no letter must have been committed before the
// tail is indexed: indexing takes CPU that sends arriving meanwhile would
// otherwise get.
const searchQuiet = 200 * time.Millisecond

// searchTailBound is how many letters the tail may hold before batches
// are indexed, paced, even while sends keep arriving: letters of a few
// hundred bytes each, a few MiB, and a search's walk over all of them
// takes about 10 ms (BenchmarkSearchTail). searchTailBytes bounds the
// same by the letters' bytes, for long letters.
const (
	searchTailBound = 20000
	searchTailBytes = 16 << 20
)

// searchTailHard is how many letters (searchTailHardBytes: bytes) the tail
// may hold before batches are indexed at full speed: the memory the tail
// may take under a load that never pauses (about ten times the bound's,
// and a search's walk ten times as long).
const (
	searchTailHard      = 200000
	searchTailHardBytes = 160 << 20
)

// searchPace is how long the indexer waits after a paced batch, in
// multiples of the time the batch took: 19, a twentieth of the time
// spent indexing while sends keep arriving.
const searchPace = 19

// searchIndex is the store's index and its tail.
type searchIndex struct {
	off bool // WithoutSearchIndex: every search scans

	mu sync.Mutex // guards tail, tailBytes and forget
	// tail is the letters committed and not yet in db, in commit order;
	// tailBytes is about the memory their bodies take.
	tail      []tailLetter
	tailBytes int
	// forget is the team keys whose documents are to be removed.
	forget []string
	wake   chan struct{}
	// lastCommit is when the last letter entered the tail (UnixNano).
	lastCommit atomic.Int64
	// quiet, bound, hard and pace are searchQuiet, searchTailBound,
	// searchTailHard and searchPace, and boundBytes and hardBytes are
	// searchTailBytes and searchTailHardBytes, unless a test set others.
	quiet                 time.Duration
	bound, hard, pace     int
	boundBytes, hardBytes int
	// window is searchWindow unless a test set another.
	window int
	// beforePass, when a test sets it, runs just before the start's pass
	// reads the teams.
	beforePass func()
	// paced is when the indexer may next index a batch while sends keep
	// arriving (only its goroutine uses it).
	paced time.Time

	// on is set once at start when the store keeps an index: letters
	// then enter the tail.
	on bool
	// db is the index (searchdb.go). Only the indexer's goroutine uses it
	// until ready is set (it may make it anew), searches after.
	db        *sql.DB
	ready     atomic.Bool // the start's pass is done: db holds every letter not in tail
	stop      chan struct{}
	closeOnce sync.Once
	closeErr  error
	done      chan struct{}
	// rebuilt is how long the start's pass took and how many letters it
	// indexed, for the operator's log and the benchmarks.
	rebuilt   time.Duration
	reindexed int
}

// tailLetter is a letter to index under its team's key. recheck marks one
// the start's pass may have indexed already (searchKey).
type tailLetter struct {
	key     string
	msg     core.Message
	recheck bool
}

// WithoutSearchIndex makes the store keep no search index: every search
// scans the team's inboxes. It is what a send costs without the index.
func WithoutSearchIndex() Option { return func(s *Store) { s.search.off = true } }

// teamKey names one incarnation of a team: its name, when it was created
// and lead's token hash, which a team created again under the name does
// not share.
func teamKey(st *core.TeamState) string {
	var lead string
	if m := st.Member(core.LeadName); m != nil {
		lead = m.TokenHash
	}
	return st.Name + "/" + strconv.FormatInt(st.CreatedAt.UnixNano(), 36) + "/" + lead
}

// openSearch opens the index, or makes it anew when it is missing or
// damaged, and starts the pass that brings it up to the inboxes and the
// goroutine that indexes the tail. Start calls it once the teams are
// loaded.
func (s *Store) openSearch() {
	x := &s.search
	if x.off {
		return
	}
	x.wake = make(chan struct{}, 1)
	if x.quiet == 0 {
		x.quiet, x.bound = searchQuiet, searchTailBound
	}
	if x.hard == 0 {
		x.hard = max(searchTailHard, 10*x.bound)
	}
	if x.pace == 0 {
		x.pace = searchPace
	}
	if x.window == 0 {
		x.window = searchWindow
	}
	if x.boundBytes == 0 {
		x.boundBytes, x.hardBytes = searchTailBytes, searchTailHardBytes
	}
	x.stop = make(chan struct{})
	x.done = make(chan struct{})
	db, why, err := openSearchDB(filepath.Join(s.dataDir, searchDir))
	if err != nil {
		// Searches scan the inboxes; sends are not refused for it.
		s.log.Error("search index cannot be made; searches scan the inboxes", "err", err)
		close(x.done)
		return
	}
	if why != "" {
		s.log.Warn("search index does not open; rebuilding it from the inboxes", "err", why)
	}
	x.db, x.on = db, true
	go s.runSearchIndex()
}

// runSearchIndex brings the index up to the inboxes, then indexes the
// tail whenever it grows, until the store closes.
func (s *Store) runSearchIndex() {
	x := &s.search
	defer close(x.done)
	began := time.Now()
	// The whole index is read only here, off the start's path: a damaged
	// one is made anew before the pass fills it.
	if err := checkSearchDB(context.Background(), x.db); err != nil {
		s.log.Warn("search index is damaged; rebuilding it from the inboxes", "err", err)
		_ = x.db.Close()
		db, err := newSearchIndex(filepath.Join(s.dataDir, searchDir))
		if err != nil {
			s.log.Error("search index cannot be made; searches scan the inboxes", "err", err)
			s.dropSearchTail()
			return
		}
		x.db = db
	}
	if x.beforePass != nil {
		x.beforePass()
	}
	x.reindexed = s.catchUpSearch()
	x.rebuilt = time.Since(began)
	x.ready.Store(true)
	s.log.Info("search index ready", "letters_indexed", x.reindexed, "took", x.rebuilt.Round(time.Millisecond))
	for {
		s.indexWhenQuiet()
		select {
		case <-x.wake:
		case <-x.stop:
			s.flushSearch(true)
			return
		}
	}
}

// dropSearchTail empties the tail whenever letters enter it, until the
// store closes: what an index that could not be made leaves the indexer
// to do (searches scan the inboxes).
func (s *Store) dropSearchTail() {
	x := &s.search
	for {
		x.mu.Lock()
		x.tail, x.tailBytes, x.forget = nil, 0, nil
		x.mu.Unlock()
		select {
		case <-x.wake:
		case <-x.stop:
			return
		}
	}
}

// indexWhenQuiet indexes the tail once no letter was committed for
// x.quiet, one batch at a time, looking again between batches, so that
// sends that arrive meanwhile find the CPU free after at most one batch.
// While sends keep arriving it indexes only a tail over its bound, a
// batch at a time with searchPace times the batch's time between
// batches, and a tail over its hard bound without waiting. It returns
// when the tail is empty, when a batch failed (tried again at the next
// letter) or when the store closes.
func (s *Store) indexWhenQuiet() {
	x := &s.search
	for {
		n, bytes := x.tailSize()
		if n == 0 {
			s.flushSearch(false) // a deleted team's documents, if any
			return
		}
		busy := false
		if n < x.hard && bytes < x.hardBytes {
			idle := time.Since(time.Unix(0, x.lastCommit.Load()))
			if busy = idle < x.quiet; busy {
				wait := x.quiet - idle
				if n >= x.bound || bytes >= x.boundBytes {
					// The pace's end, or quiet if it comes first.
					wait = min(wait, time.Until(x.paced))
				}
				if wait > 0 {
					select {
					case <-time.After(wait):
					case <-x.wake: // the tail may have reached a bound
					case <-x.stop:
						return
					}
					continue
				}
			}
		}
		began := time.Now()
		if !s.flushSearch(false) {
			return
		}
		if busy {
			x.paced = time.Now().Add(time.Duration(x.pace) * time.Since(began))
		}
	}
}

// tailSize is how many letters the tail holds and about how many bytes.
func (x *searchIndex) tailSize() (int, int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.tail), x.tailBytes
}

// letterBytes is about what a letter in the tail takes in memory.
func letterBytes(m *core.Message) int {
	return len(m.Body) + len(m.ID) + len(m.Sender) + len(m.Recipient) + 200
}

// catchUpSearch indexes again, from its inboxes, every team whose letters
// the index does not all hold; it returns how many letters it indexed.
func (s *Store) catchUpSearch() int {
	s.units.mu.RLock()
	names := make([]string, 0, len(s.units.teams))
	for name := range s.units.teams {
		names = append(names, name)
	}
	s.units.mu.RUnlock()
	total := 0
	for _, name := range names {
		select {
		case <-s.search.stop:
			return total
		default:
		}
		n, err := s.catchUpTeam(name)
		if err != nil {
			s.log.Warn("search index: a team could not be indexed; its searches miss letters until the next start", "team", name, "err", err)
		}
		total += n
	}
	return total
}

// catchUpTeam indexes team name's letters again when the index does not
// hold as many of them as its inboxes.
func (s *Store) catchUpTeam(name string) (int, error) {
	x := &s.search
	u, err := s.Begin(context.Background(), name, false)
	if err != nil {
		if core.ErrorCode(err) == core.CodeNotFound {
			return 0, nil // deleted meanwhile
		}
		return 0, err
	}
	key := teamKey(u.State())
	var letters []core.Message
	if u.Damaged() == nil {
		var inboxes [][]core.Message
		inboxes, err = teamLetters(u)
		letters = slices.Concat(inboxes...)
	}
	if cerr := u.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, err
	}
	held, err := countTeamLetters(context.Background(), x.db, key)
	if err != nil {
		return 0, err
	}
	if held == len(letters) {
		return 0, nil
	}
	// The letters the index lacks, looked up once: the tail waits for
	// this goroutine, so nothing else indexes the team meanwhile.
	if held > 0 {
		id, _, err := teamIndexID(context.Background(), x.db, key)
		if err != nil {
			return 0, err
		}
		have, err := heldLetters(context.Background(), x.db, id)
		if err != nil {
			return 0, err
		}
		letters = slices.DeleteFunc(letters, func(m core.Message) bool { return have[m.ID] })
	}
	added := 0
	for rest := letters; len(rest) > 0; {
		n := min(len(rest), searchBatch)
		batch := make([]tailLetter, 0, n)
		for _, m := range rest[:n] {
			batch = append(batch, tailLetter{key: key, msg: m})
		}
		k, err := indexLetters(context.Background(), x.db, batch)
		if err != nil {
			return added, err
		}
		added += k
		rest = rest[n:]
	}
	return added, nil
}

// teamLetters is the letters of every member of u's team, by member in
// the team's order: what the start's pass indexes and a scan searches.
func teamLetters(u core.Snapshot) ([][]core.Message, error) {
	members := u.State().Members
	out := make([][]core.Message, 0, len(members))
	for _, m := range members {
		items, err := memberLetters(u, m.Name)
		if err != nil {
			return nil, err
		}
		out = append(out, items)
	}
	return out, nil
}

// memberLetters is every letter of member that a search may find, in
// order: the one list the start's pass, a scan and a hit's lookup read,
// so that letters kept elsewhere than the inbox are added here once.
func memberLetters(u core.Snapshot, member string) ([]core.Message, error) {
	archived, err := u.LoadArchive(member)
	if err != nil {
		return nil, err
	}
	items, err := u.LoadInbox(member)
	if err != nil || len(archived) == 0 {
		return items, err
	}
	// The archived letters, then the inbox's: in the order they were
	// sent (a letter kept in the inbox for the rules may come before an
	// archived one).
	all := append(append(make([]core.Message, 0, len(archived)+len(items)), archived...), items...)
	slices.SortStableFunc(all, func(a, b core.Message) int { return letterNumber(a.ID, member) - letterNumber(b.ID, member) })
	return all, nil
}

// indexSearch puts a letter whose unit of work is durable into the tail:
// from now on searches find it. It is all a send pays for the index.
func (s *Store) indexSearch(key string, m *core.Message, recheck bool) {
	x := &s.search
	if !x.on {
		return
	}
	x.lastCommit.Store(time.Now().UnixNano())
	x.mu.Lock()
	size := letterBytes(m)
	x.tail = append(x.tail, tailLetter{key: key, msg: *m, recheck: recheck})
	x.tailBytes += size
	n, bytes := len(x.tail), x.tailBytes
	x.mu.Unlock()
	// The indexer needs waking only when it may be asleep for good (an
	// empty tail) or a bound is reached; otherwise it is waiting for
	// quiet or for its pace.
	if n == 1 || n == x.bound || n == x.hard || (bytes >= x.boundBytes && bytes-size < x.boundBytes) || bytes >= x.hardBytes {
		select {
		case x.wake <- struct{}{}:
		default:
		}
	}
}

// searchKey is the team key of the letter cs commits, "" when it commits
// none or there is no index, and whether the start's pass may index the
// letter too. Commit calls it under the team's lock, which the pass holds
// while it reads the team: a letter committed once the pass is done
// (ready) was not there when the pass read its team.
func (s *Store) searchKey(e *teamEntry, cs *core.ChangeSet) (string, bool) {
	if cs.Letter == nil || !s.search.on {
		return "", false
	}
	return teamKey(e.st), !s.search.ready.Load()
}

// forgetSearch schedules the removal of a deleted team's documents.
func (s *Store) forgetSearch(st *core.TeamState) {
	x := &s.search
	if !x.on {
		return
	}
	key := teamKey(st)
	x.mu.Lock()
	x.forget = append(x.forget, key)
	x.mu.Unlock()
	select {
	case x.wake <- struct{}{}:
	default:
	}
}

// flushSearch moves the oldest batch of the tail into the index (with
// all, the whole tail, in batches) and removes the documents of deleted
// teams. It reports whether it indexed what it took. Only the indexing
// goroutine calls it, so a prefix of the tail it indexed is still the
// prefix when it drops it.
func (s *Store) flushSearch(all bool) bool {
	x := &s.search
	for {
		x.mu.Lock()
		n := min(len(x.tail), searchBatch)
		batch := x.tail[:n:n]
		forget := x.forget
		x.forget = nil
		x.mu.Unlock()
		for _, key := range forget {
			if err := s.removeTeamDocs(key); err != nil {
				s.log.Warn("search index: a deleted team's letters could not be removed", "err", err)
			}
		}
		if n == 0 {
			return true
		}
		if _, err := indexLetters(context.Background(), x.db, batch); err != nil {
			// Kept in the tail, where searches still find them; tried
			// again at the next letter.
			s.log.Warn("search index: letters could not be indexed", "err", err)
			return false
		}
		x.mu.Lock()
		// Not copied: searches may hold the prefix, which nothing
		// changes, and the next growth of the tail lets it go.
		x.tail = x.tail[n:]
		for i := range batch {
			x.tailBytes -= letterBytes(&batch[i].msg)
		}
		x.mu.Unlock()
		if !all {
			return true
		}
	}
}

func (s *Store) removeTeamDocs(key string) error {
	return removeTeamLetters(context.Background(), s.search.db, key)
}

// closeSearch indexes the tail and closes the index, so that a clean stop
// leaves an index the next start need not catch up.
func (s *Store) closeSearch() error {
	x := &s.search
	if !x.on {
		return nil
	}
	x.closeOnce.Do(func() { x.closeErr = s.closeIndex() })
	return x.closeErr
}

// closeIndex is closeSearch, once.
func (s *Store) closeIndex() error {
	x := &s.search
	close(x.stop)
	<-x.done
	return x.db.Close()
}

// SearchLetters implements core.Searcher: the tail and the index, or,
// while the index is not ready (or kept at all), a scan of the team's
// inboxes.
func (s *Store) SearchLetters(ctx context.Context, q core.SearchQuery) ([]core.Message, error) {
	e, err := s.entry(ctx, q.Team)
	if err != nil {
		return nil, err
	}
	x := &s.search
	if !x.on || !x.ready.Load() {
		return s.scanSearch(ctx, &q)
	}
	e.mu.Lock()
	key := teamKey(e.st)
	e.mu.Unlock()
	// The tail first: a letter that leaves it meanwhile is in the index
	// by the time the index is asked.
	x.mu.Lock()
	tail := x.tail[:len(x.tail):len(x.tail)]
	x.mu.Unlock()
	var out []core.Message
	seen := map[string]bool{}
	for i := len(tail) - 1; i >= 0 && len(out) < q.Limit; i-- {
		t := tail[i]
		if t.key == key && q.Visible(t.msg) && core.MatchLetter(q.Terms, t.msg.Body) > 0 {
			out = append(out, t.msg)
			seen[t.msg.ID] = true
		}
	}
	if len(out) == q.Limit {
		return out, nil
	}
	// Each hit's letter is matched again as the tail's are (a token of
	// the index may stand for two words, indexToken), so pages are asked
	// until the limit is filled or the hits end.
	id, ok, err := teamIndexID(ctx, x.db, key)
	if err != nil {
		return s.searchFailed(ctx, &q, err)
	}
	if !ok {
		return out, nil // the index holds none of the team's letters
	}
	expr := matchExpr(&q)
	lo, hi := teamRows(id)
	letters := map[string][]core.Message{} // by member, read once per search
	size := q.Limit + len(seen)
	// Windows of the matches indexed last, the last first, each ranked
	// whole.
	for upTo := hi; len(out) < q.Limit; {
		from, err := hitWindow(ctx, x.db, expr, lo, upTo, x.window)
		if err != nil {
			return s.searchFailed(ctx, &q, err)
		}
		for offset := 0; len(out) < q.Limit; size = min(4*size, searchBatch) {
			hits, err := searchPage(ctx, x.db, expr, from, upTo, size, offset)
			if err != nil {
				return s.searchFailed(ctx, &q, err)
			}
			var ids []string
			for _, id := range hits {
				if !seen[id] {
					ids = append(ids, id)
					seen[id] = true
				}
			}
			found, err := s.lettersByID(ctx, q.Team, key, ids, letters)
			if err != nil {
				return nil, err
			}
			for _, m := range found {
				if len(out) == q.Limit {
					break
				}
				if q.Visible(m) && core.MatchLetter(q.Terms, m.Body) > 0 {
					out = append(out, m)
				}
			}
			offset += len(hits)
			if len(hits) < size {
				break
			}
		}
		if from <= lo {
			break // the window held every older match
		}
		upTo = from - 1
	}
	return out, nil
}

// lettersByID reads the letters ids of the team with key from their
// members' letters (memberLetters, kept in byMember for the next call of
// the same search), in the order of ids, in one view of the team. An id
// the team no longer holds (its team deleted and made again since the
// index was asked) is left out.
func (s *Store) lettersByID(ctx context.Context, team, key string, ids []string, byMember map[string][]core.Message) ([]core.Message, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	u, err := s.Begin(ctx, team, false)
	if err != nil {
		return nil, err
	}
	defer func() { _ = u.Close() }()
	if teamKey(u.State()) != key {
		return nil, nil
	}
	out := make([]core.Message, 0, len(ids))
	for _, id := range ids {
		member, pos, ok := core.ParseLetterID(id)
		if !ok || u.State().Member(member) == nil {
			continue
		}
		items, ok := byMember[member]
		if !ok {
			if items, err = memberLetters(u, member); err != nil {
				return nil, err
			}
			byMember[member] = items
		}
		if m, ok := findLetter(items, id, pos); ok {
			out = append(out, m)
		}
	}
	return out, nil
}

// findLetter finds letter id among items: at its number's place, where an
// inbox keeps it, else by a walk.
func findLetter(items []core.Message, id string, pos int) (core.Message, bool) {
	if pos <= len(items) && items[pos-1].ID == id {
		return items[pos-1], true
	}
	for _, m := range items {
		if m.ID == id {
			return m, true
		}
	}
	return core.Message{}, false
}

// searchFailed is the answer to a search the index failed with err: the
// context's end, or a scan of the inboxes.
func (s *Store) searchFailed(ctx context.Context, q *core.SearchQuery, err error) ([]core.Message, error) {
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	s.log.Warn("search index: a search failed; scanning the inboxes", "err", err)
	return s.scanSearch(ctx, q)
}

// scanSearch searches the team's inboxes one letter at a time
// (core.ScanLetters).
func (s *Store) scanSearch(ctx context.Context, q *core.SearchQuery) ([]core.Message, error) {
	u, err := s.Begin(ctx, q.Team, false)
	if err != nil {
		return nil, err
	}
	defer func() { _ = u.Close() }()
	inboxes, err := teamLetters(u)
	if err != nil {
		return nil, err
	}
	return core.ScanLetters(q, inboxes...), nil
}

// SearchIndexStats says how the start's pass over the index went: how
// long it took and how many letters it indexed, and whether it is done.
func (s *Store) SearchIndexStats() (ready bool, took time.Duration, indexed int) {
	x := &s.search
	if !x.ready.Load() {
		return false, 0, 0
	}
	return true, x.rebuilt, x.reindexed
}

// SearchIndexed waits until the index holds every letter committed so far
// and is idle: its tail indexed (each batch is committed before it leaves
// the tail) and the start's pass done. It is for benchmarks, which must not time one
// store while another's index works. A store without an index returns at
// once.
func (s *Store) SearchIndexed(ctx context.Context) error {
	x := &s.search
	if !x.on {
		return nil
	}
	for {
		x.mu.Lock()
		busy := len(x.tail) > 0
		x.mu.Unlock()
		if !busy && x.ready.Load() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-x.done:
			return nil
		case <-time.After(20 * time.Millisecond):
		}
	}
}
