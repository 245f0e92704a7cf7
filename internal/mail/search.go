package mail

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/custom"
	"github.com/blevesearch/bleve/v2/analysis/token/lowercase"
	"github.com/blevesearch/bleve/v2/analysis/tokenizer/regexp"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/blevesearch/bleve/v2/search/query"

	"mailroom/internal/core"
)

// The file store's search index (core.Searcher, docs/api.md "Search"): a
// bleve index in <data>/search, beside the teams. The inbox files stay the
// truth; the index is only ever behind them, never ahead:
//
//   - A letter enters the index's tail when its unit of work is durable
//     (fileTx.Commit, before the send is answered), and a goroutine moves
//     the tail into the index in batches. A search reads the tail and the
//     index, so a letter is found as soon as its send is acknowledged, and
//     the send pays only an append to the tail.
//   - At start the index is opened, or made anew when it is missing or
//     does not open (damaged); then every team's letters are counted in it
//     against its inboxes and the teams it misses are indexed again from
//     their inboxes, in the background. Until that pass is done, searches
//     scan the inboxes instead. Indexing a letter twice replaces it, so the
//     pass may overlap the tail.
//   - Documents are keyed by the team's incarnation (teamKey), so a team
//     deleted and created again under its name never finds the old team's
//     letters; the old documents are removed in the background.

// searchDir is the index's directory in the data directory.
const searchDir = "search"

// searchBatch bounds the letters indexed in one bleve batch.
const searchBatch = 2000

// searchNapMS is how long, in milliseconds, the index's persister waits
// for batches to gather before it writes them to disk.
const searchNapMS = 2000

// searchLockWait is how long opening the index waits for another holder
// of its files.
const searchLockWait = "1s"

// searchGather is how long the indexer gathers letters in the tail before
// it indexes them.
const searchGather = time.Second

// Index fields.
const (
	fieldTeam      = "team"
	fieldSender    = "sender"
	fieldRecipient = "recipient"
	fieldBody      = "body"
	fieldLetter    = "letter"
)

// searchIndex is the store's index and its tail.
type searchIndex struct {
	off bool // WithoutSearchIndex: every search scans

	mu sync.Mutex // guards tail and forget
	// tail is the letters committed and not yet in idx, in commit order.
	tail []tailLetter
	// forget is the team keys whose documents are to be removed.
	forget []string
	wake   chan struct{}

	idx   bleve.Index
	ready atomic.Bool // the start's pass is done: idx holds every letter not in tail
	stop  chan struct{}
	// unwritten is the letters of the batches idx has not yet written to
	// disk, by batch (guarded by mu); batches numbers them.
	unwritten map[int64][]tailLetter
	closeOnce sync.Once
	closeErr  error
	batches   int64
	done      chan struct{}
	// rebuilt is how long the start's pass took and how many letters it
	// indexed, for the operator's log and the benchmarks.
	rebuilt   time.Duration
	reindexed int
}

type tailLetter struct {
	key string
	msg core.Message
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

func indexMapping() (*mapping.IndexMappingImpl, error) {
	im := bleve.NewIndexMapping()
	// Words exactly as core.SearchWords splits them: runs of letters,
	// digits and marks, lower case.
	if err := im.AddCustomTokenizer("words", map[string]any{"type": regexp.Name, "regexp": `[\p{L}\p{N}\p{M}]+`}); err != nil {
		return nil, err
	}
	if err := im.AddCustomAnalyzer("words", map[string]any{"type": custom.Name, "tokenizer": "words", "token_filters": []any{lowercase.Name}}); err != nil {
		return nil, err
	}
	keyword := func() *mapping.FieldMapping {
		f := bleve.NewKeywordFieldMapping()
		f.Store, f.IncludeInAll, f.DocValues = false, false, false
		return f
	}
	body := bleve.NewTextFieldMapping()
	body.Analyzer = "words"
	body.Store, body.IncludeInAll, body.DocValues = false, false, false
	body.IncludeTermVectors = true // phrases need the words' positions
	letter := bleve.NewTextFieldMapping()
	letter.Index, letter.IncludeInAll, letter.DocValues, letter.IncludeTermVectors = false, false, false, false
	dm := bleve.NewDocumentStaticMapping()
	dm.AddFieldMappingsAt(fieldTeam, keyword())
	dm.AddFieldMappingsAt(fieldSender, keyword())
	dm.AddFieldMappingsAt(fieldRecipient, keyword())
	dm.AddFieldMappingsAt(fieldBody, body)
	dm.AddFieldMappingsAt(fieldLetter, letter)
	im.DefaultMapping = dm
	im.DefaultAnalyzer = "words"
	return im, nil
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
	x.unwritten = map[int64][]tailLetter{}
	x.stop = make(chan struct{})
	x.done = make(chan struct{})
	dir := filepath.Join(s.dataDir, searchDir)
	idx, err := bleve.OpenUsing(dir, searchConfig())
	if err == nil {
		// An index that opens may still fail to answer (a damaged
		// segment): asked once, it is made anew if it does not.
		if _, err = idx.Search(bleve.NewSearchRequestOptions(bleve.NewMatchAllQuery(), 0, 0, false)); err != nil {
			_ = idx.Close()
		}
	}
	if err != nil && strings.Contains(err.Error(), "timeout") {
		// Another store of this process holds the index (the server holds
		// mailroom.lock, so only tests get here): this one scans.
		s.log.Info("search index held by another store; searches scan the inboxes", "err", err)
		close(x.done)
		return
	}
	if err != nil {
		if !errors.Is(err, bleve.ErrorIndexPathDoesNotExist) {
			s.log.Warn("search index does not open; rebuilding it from the inboxes", "err", err)
		}
		idx, err = newSearchIndex(dir)
	}
	if err != nil {
		// Searches scan the inboxes; sends are not refused for it.
		s.log.Error("search index cannot be made; searches scan the inboxes", "err", err)
		close(x.done)
		return
	}
	x.idx = idx
	go s.runSearchIndex()
}

func newSearchIndex(dir string) (bleve.Index, error) {
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	m, err := indexMapping()
	if err != nil {
		return nil, err
	}
	// Made with batches that wait for the disk, so that its mapping is
	// written before it is used; then opened as every start opens it.
	idx, err := bleve.NewUsing(dir, m, scorch.Name, scorch.Name, nil)
	if err != nil {
		return nil, err
	}
	if err := idx.Close(); err != nil {
		return nil, err
	}
	return bleve.OpenUsing(dir, searchConfig())
}

// searchConfig is the index's runtime configuration: a batch is
// searchable once it is in memory (unsafe_batch: the store's durability
// is the inboxes', not the index's), and the persister writes what
// gathered in memory to disk every searchNapMS, so that the index's
// writes and fsyncs do not compete with the write-ahead log's on every
// send. What it had not written when the process died is indexed again
// at the next start (catchUpSearch); Close waits for it (closeSearch).
func searchConfig() map[string]any {
	return map[string]any{"unsafe_batch": true, "bolt_timeout": searchLockWait, "scorchPersisterOptions": map[string]any{"PersisterNapTimeMSec": searchNapMS, "PersisterNapUnderNumFiles": 1000}}
}

// runSearchIndex brings the index up to the inboxes, then indexes the
// tail whenever it grows, until the store closes.
func (s *Store) runSearchIndex() {
	x := &s.search
	defer close(x.done)
	began := time.Now()
	x.reindexed = s.catchUpSearch()
	x.rebuilt = time.Since(began)
	x.ready.Store(true)
	s.log.Info("search index ready", "letters_indexed", x.reindexed, "took", x.rebuilt.Round(time.Millisecond))
	for {
		s.flushSearch()
		select {
		case <-x.wake:
		case <-x.stop:
			s.flushSearch()
			return
		}
		// Letters are gathered for a while before they are indexed: one
		// bleve batch per letter would cost every send a segment, and
		// searches read the tail meanwhile.
		select {
		case <-time.After(searchGather):
		case <-x.stop:
		}
	}
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
	st := u.State()
	key := teamKey(st)
	var letters []core.Message
	if u.Damaged() == nil {
		for _, m := range st.Members {
			var items []core.Message
			if items, err = u.LoadInbox(m.Name); err != nil {
				break
			}
			letters = append(letters, items...)
		}
	}
	if cerr := u.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, err
	}
	req := bleve.NewSearchRequestOptions(termQuery(fieldTeam, key), 0, 0, false)
	res, err := x.idx.Search(req)
	if err != nil {
		return 0, err
	}
	if res.Total == uint64(len(letters)) {
		return 0, nil
	}
	for rest := letters; len(rest) > 0; {
		n := min(len(rest), searchBatch)
		batch := make([]tailLetter, 0, n)
		for _, m := range rest[:n] {
			batch = append(batch, tailLetter{key, m})
		}
		if err := x.index(x.idx, batch, true); err != nil {
			return 0, err
		}
		rest = rest[n:]
	}
	return len(letters), nil
}

func indexLetter(b *bleve.Batch, key string, m core.Message) error {
	doc, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return b.Index(key+"\x00"+m.ID, map[string]any{
		fieldTeam: key, fieldSender: m.Sender, fieldRecipient: m.Recipient, fieldBody: m.Body, fieldLetter: string(doc),
	})
}

// indexSearch puts a letter whose unit of work is durable into the tail:
// from now on searches find it. It is all a send pays for the index.
func (s *Store) indexSearch(key string, m *core.Message) {
	x := &s.search
	if x.idx == nil {
		return
	}
	x.mu.Lock()
	x.tail = append(x.tail, tailLetter{key, *m})
	x.mu.Unlock()
	select {
	case x.wake <- struct{}{}:
	default:
	}
}

// searchKey is the team key of the letter cs commits, "" when it commits
// none or there is no index; Commit calls it under the team's lock.
func (s *Store) searchKey(e *teamEntry, cs *core.ChangeSet) string {
	if cs.Letter == nil || s.search.idx == nil {
		return ""
	}
	return teamKey(e.st)
}

// forgetSearch schedules the removal of a deleted team's documents.
func (s *Store) forgetSearch(st *core.TeamState) {
	x := &s.search
	if x.idx == nil {
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

// flushSearch moves the tail into the index, in batches, and removes the
// documents of deleted teams. Only the indexing goroutine calls it, so a
// prefix of the tail it indexed is still the prefix when it drops it.
func (s *Store) flushSearch() {
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
			return
		}
		if err := x.index(x.idx, batch, true); err != nil {
			// Kept in the tail, where searches still find them; tried
			// again at the next letter.
			s.log.Warn("search index: letters could not be indexed", "err", err)
			return
		}
		x.mu.Lock()
		x.tail = append([]tailLetter(nil), x.tail[n:]...)
		x.mu.Unlock()
	}
}

func (s *Store) removeTeamDocs(key string) error {
	idx := s.search.idx
	for {
		req := bleve.NewSearchRequestOptions(termQuery(fieldTeam, key), searchBatch, 0, false)
		res, err := idx.Search(req)
		if err != nil || len(res.Hits) == 0 {
			return err
		}
		b := idx.NewBatch()
		for _, h := range res.Hits {
			b.Delete(h.ID)
		}
		if err := idx.Batch(b); err != nil {
			return err
		}
	}
}

// index indexes letters in one batch of idx. With track, the letters are
// kept until the index has written them to disk (unwritten), so that
// closeSearch can write what the persister had not.
func (x *searchIndex) index(idx bleve.Index, letters []tailLetter, track bool) error {
	b := idx.NewBatch()
	for _, t := range letters {
		if err := indexLetter(b, t.key, t.msg); err != nil {
			return err
		}
	}
	if track {
		x.mu.Lock()
		x.batches++
		id := x.batches
		x.unwritten[id] = letters
		x.mu.Unlock()
		b.SetPersistedCallback(func(err error) {
			if err == nil {
				x.mu.Lock()
				delete(x.unwritten, id)
				x.mu.Unlock()
			}
		})
	}
	return idx.Batch(b)
}

// closeSearch indexes the tail and closes the index. The letters the
// persister had not yet written to disk are then written by the index
// opened again with batches that wait for the disk, so that a clean stop
// leaves an index the next start need not catch up.
func (s *Store) closeSearch() error {
	x := &s.search
	if x.idx == nil {
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
	err := x.idx.Close()
	x.mu.Lock()
	var rest []tailLetter
	for _, letters := range x.unwritten {
		rest = append(rest, letters...)
	}
	clear(x.unwritten)
	x.mu.Unlock()
	if err != nil || len(rest) == 0 {
		return err
	}
	idx, err := bleve.OpenUsing(filepath.Join(s.dataDir, searchDir), map[string]any{"bolt_timeout": searchLockWait})
	if err != nil {
		return err
	}
	for len(rest) > 0 {
		n := min(len(rest), searchBatch)
		if err := x.index(idx, rest[:n], false); err != nil {
			_ = idx.Close()
			return err
		}
		rest = rest[n:]
	}
	return idx.Close()
}

func termQuery(field, term string) query.Query {
	q := bleve.NewTermQuery(term)
	q.SetField(field)
	return q
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
	if x.idx == nil || !x.ready.Load() {
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
	req := bleve.NewSearchRequestOptions(bleveQuery(key, &q), q.Limit+len(seen), 0, false)
	req.Fields = []string{fieldLetter}
	res, err := x.idx.SearchInContext(ctx, req)
	if err != nil {
		s.log.Warn("search index: a search failed; scanning the inboxes", "err", err)
		return s.scanSearch(ctx, &q)
	}
	for _, h := range res.Hits {
		doc, _ := h.Fields[fieldLetter].(string)
		m, err := core.DecodeLetter([]byte(doc))
		if err != nil {
			return nil, fmt.Errorf("mail: search index: a letter does not decode: %w", err)
		}
		if !seen[m.ID] && len(out) < q.Limit {
			out = append(out, m)
		}
	}
	return out, nil
}

// bleveQuery is q in bleve's terms: the team, every term (a word, or its
// words as a phrase), the viewer's letters, the sender and the recipient.
func bleveQuery(key string, q *core.SearchQuery) query.Query {
	all := []query.Query{termQuery(fieldTeam, key)}
	for _, t := range q.Terms {
		if len(t.Words) == 1 {
			all = append(all, termQuery(fieldBody, t.Words[0]))
		} else {
			all = append(all, bleve.NewPhraseQuery(t.Words, fieldBody))
		}
	}
	if q.Viewer != "" {
		all = append(all, bleve.NewDisjunctionQuery(termQuery(fieldSender, q.Viewer), termQuery(fieldRecipient, q.Viewer)))
	}
	if q.From != "" {
		all = append(all, termQuery(fieldSender, q.From))
	}
	if q.To != "" {
		all = append(all, termQuery(fieldRecipient, q.To))
	}
	return bleve.NewConjunctionQuery(all...)
}

// scanSearch searches the team's inboxes one letter at a time
// (core.ScanLetters).
func (s *Store) scanSearch(ctx context.Context, q *core.SearchQuery) ([]core.Message, error) {
	u, err := s.Begin(ctx, q.Team, false)
	if err != nil {
		return nil, err
	}
	defer func() { _ = u.Close() }()
	var inboxes [][]core.Message
	for _, member := range u.State().Members {
		items, err := u.LoadInbox(member.Name)
		if err != nil {
			return nil, err
		}
		inboxes = append(inboxes, items)
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
