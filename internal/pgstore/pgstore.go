// Package pgstore is core.Store on PostgreSQL: several Mailroom replicas on
// one database serve the same teams with the same guarantees.
//
// Every unit of work (UpdateTeam) is one transaction that locks the team's
// row (SELECT ... FOR UPDATE), runs core's function, and commits the letter,
// the state, the idempotency record and the turn documents together, so
// the intents the file store needs are not needed here. A replica that
// remembers what its last unit of work on the team committed runs the
// function on that and sends the lock, the writes and the commit in one
// round trip; the lock refuses unless the row is still that version, and
// the unit then runs as above (cache.go). After a commit core
// announces its events; the store sends them with NOTIFY, and a LISTEN
// connection per process delivers the other replicas' events to core
// (core.Notifier). The schema is embedded (migrations/) and applied at
// start under a session advisory lock, so replicas may start together.
package pgstore

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"mailroom/internal/core"
)

//go:embed migrations/*.sql
var migrations embed.FS

// channel is the NOTIFY channel of every replica.
const channel = "mailroom"

// opTimeout bounds one store call, so that a database that hangs (rather
// than refuses) turns into storage_unavailable instead of a stuck request.
const opTimeout = 15 * time.Second

// Options tune a Store. The zero value is usable.
type Options struct {
	Logger *slog.Logger
	// MaxConns bounds the connection pool (0: pgxpool's default, at
	// least 4).
	MaxConns int32
	// Tracer, if set, sees every query and batch (tests count the round
	// trips of a unit of work with it).
	Tracer pgx.QueryTracer
}

// Store is core.Store and core.Notifier on PostgreSQL.
type Store struct {
	pool   *pgxpool.Pool
	log    *slog.Logger
	origin string // this process, to skip its own notifications
	where  string // host and database, for messages (never a password)

	cache    *teamCache  // what this replica's units of work committed (cache.go)
	tokens   *tokenCache // what this replica's token lookups found (tokens.go)
	archives archiveMemo // the archives this replica read (archive.go)
	notify   chan []byte
	stopOnce sync.Once
	stop     chan struct{}
	wg       sync.WaitGroup
}

var (
	_ core.Store    = (*Store)(nil)
	_ core.Notifier = (*Store)(nil)
)

// Describe names the host and database of url, never its password, for
// messages. An unparsable url is described without its content.
func Describe(url string) string {
	cfg, err := pgconn.ParseConfig(url)
	if err != nil {
		return "an unparsable database URL"
	}
	return fmt.Sprintf("database %q on %s", cfg.Database, net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.Port)))
}

// Open connects to the database at url, checks that it answers and
// applies the embedded migrations. Its errors name host and database and
// never the password.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgx's parse errors may quote the URL: say only what is wrong.
		return nil, errors.New("the database URL cannot be parsed (want postgres://user:password@host:port/database)")
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	} else if cfg.MaxConns < 8 {
		cfg.MaxConns = 8
	}
	if opts.Tracer != nil {
		cfg.ConnConfig.Tracer = opts.Tracer
	}
	where := fmt.Sprintf("database %q on %s", cfg.ConnConfig.Database, net.JoinHostPort(cfg.ConnConfig.Host, fmt.Sprint(cfg.ConnConfig.Port)))
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %s", where, safeErr(err, cfg.ConnConfig.Password))
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("cannot reach %s: %s", where, safeErr(err, cfg.ConnConfig.Password))
	}
	if err := migrate(ctx, pool, log); err != nil {
		pool.Close()
		return nil, fmt.Errorf("migrate %s: %s", where, safeErr(err, cfg.ConnConfig.Password))
	}
	s := &Store{
		pool:   pool,
		log:    log,
		origin: randomID(),
		where:  where,
		cache:  newTeamCache(),
		tokens: newTokenCache(),
		notify: make(chan []byte, 4096),
		stop:   make(chan struct{}),
	}
	s.wg.Add(1)
	go s.sendLoop()
	return s, nil
}

// safeErr is err's text with the password, if it appears, removed.
func safeErr(err error, password string) string {
	msg := err.Error()
	if password != "" {
		msg = strings.ReplaceAll(msg, password, "********")
	}
	return msg
}

func randomID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// migrate applies the embedded migrations under goose's session advisory
// lock: a replica starting beside another waits for it instead of racing.
func migrate(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) error {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return err
	}
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return err
	}
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, sub,
		goose.WithSessionLocker(locker), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return err
	}
	res, err := p.Up(ctx)
	for _, r := range res {
		log.Info("database migration applied", "version", r.Source.Version, "duration", r.Duration.String())
	}
	return err
}

// Where names the store's host and database.
func (s *Store) Where() string { return s.where }

// Pool is the connection pool, for tests and the import command.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Close stops the notification loops and closes the pool.
func (s *Store) Close() error {
	s.stopOnce.Do(func() { close(s.stop) })
	s.wg.Wait()
	s.pool.Close()
	return nil
}

// unavailable reports whether err means the database cannot be reached
// now (down, restarting, connection lost), as opposed to a refused write.
func unavailable(err error) bool {
	if err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case strings.HasPrefix(pgErr.Code, "08"), // connection exception
			pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03", // shutdown, crash, cannot connect now
			pgErr.Code == "53300": // too many connections
			return true
		}
		return false
	}
	var connErr *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connErr) || errors.As(err, &netErr) || pgconn.SafeToRetry(err) ||
		errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "conn closed") ||
		strings.Contains(err.Error(), "unexpected EOF")
}

// storeErr maps a database error to core's codes: a domain error passes
// unchanged, an unreachable database is storage_unavailable, anything else
// storage_failed. ctx's own cancellation passes unchanged.
func storeErr(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if lostDatabase(err) {
		return &core.Error{Code: core.CodeStorageUnavailable, Message: "The database cannot be reached; nothing was stored. Try again shortly.", Err: err}
	}
	var ce *core.Error
	if errors.As(err, &ce) {
		return err
	}
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return err
	}
	if unavailable(err) {
		return &core.Error{Code: core.CodeStorageUnavailable, Message: "The database cannot be reached; nothing was stored. Try again shortly.", Err: err}
	}
	return core.StorageError(err)
}

// withTx runs fn in one transaction and commits it when fn returns nil.
func (s *Store) withTx(ctx context.Context, opts pgx.TxOptions, fn func(pgx.Tx) error) error {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	tx, err := s.pool.BeginTx(ctx, opts)
	if err != nil {
		return storeErr(ctx, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after a commit it is a no-op
	if err := fn(tx); err != nil {
		return storeErr(ctx, err)
	}
	return storeErr(ctx, tx.Commit(ctx))
}

// CreateTeam implements core.Store.
func (s *Store) CreateTeam(ctx context.Context, st *core.TeamState) error {
	return s.withTx(ctx, pgx.TxOptions{}, func(tx pgx.Tx) error {
		state, err := encodeState(st)
		if err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `INSERT INTO teams (name, created_at, state) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING`,
			st.Name, st.CreatedAt, state)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return core.Errorf(core.CodeTeamExists, "A team with this name exists.")
		}
		for _, m := range st.Members {
			if _, err := tx.Exec(ctx, `INSERT INTO members (team, name, token_hash) VALUES ($1, $2, $3)`, st.Name, m.Name, m.TokenHash); err != nil {
				return err
			}
		}
		return syncChildren(ctx, tx, st, &loaded{})
	})
}

// DeleteTeam implements core.Store: one DELETE, the rest follows by
// cascade in the same transaction. The team's tokens are forgotten once
// it is over, whatever the outcome: a lookup whose query read them before
// the deletion committed began before, so it cannot add them again
// (tokens.go).
func (s *Store) DeleteTeam(ctx context.Context, name string) error {
	s.cache.forget(name)
	defer s.tokens.forgetTeam(name)
	return s.withTx(ctx, pgx.TxOptions{}, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM teams WHERE name = $1`, name)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return core.Errorf(core.CodeNotFound, "No such team.")
		}
		return nil
	})
}

// ListTeams implements core.Store.
func (s *Store) ListTeams(ctx context.Context) ([]core.TeamSummary, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT t.name, t.created_at, (SELECT count(*) FROM members m WHERE m.team = t.name) FROM teams t`)
	if err != nil {
		return nil, storeErr(ctx, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (core.TeamSummary, error) {
		var ts core.TeamSummary
		err := r.Scan(&ts.Name, &ts.CreatedAt, &ts.Members)
		ts.CreatedAt = ts.CreatedAt.UTC()
		return ts, err
	})
	if err != nil {
		return nil, storeErr(ctx, err)
	}
	if out == nil {
		out = []core.TeamSummary{}
	}
	return out, nil
}

// CountTeams implements core.Store.
func (s *Store) CountTeams(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM teams`).Scan(&n); err != nil {
		return 0, storeErr(ctx, err)
	}
	return n, nil
}

// WakeMembers implements core.WakeLister: the members with wake set,
// from members.wake (migration 00009), without reading any team.
func (s *Store) WakeMembers(ctx context.Context) ([]core.MemberRef, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT team, name FROM members WHERE wake`)
	if err != nil {
		return nil, storeErr(ctx, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (core.MemberRef, error) {
		var r core.MemberRef
		err := row.Scan(&r.Team, &r.Member)
		return r, err
	})
	if err != nil {
		return nil, storeErr(ctx, err)
	}
	return out, nil
}

// LookupToken implements core.Store: from what this replica's lookups
// found (tokens.go), or a plain read, which never waits for a team's row
// lock.
func (s *Store) LookupToken(ctx context.Context, tokenHash string) (string, string, error) {
	ref, ok, gen := s.tokens.get(tokenHash)
	if ok {
		return ref.team, ref.member, nil
	}
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	err := s.pool.QueryRow(ctx, `SELECT team, name FROM members WHERE token_hash = $1`, tokenHash).Scan(&ref.team, &ref.member)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", core.Errorf(core.CodeNotFound, "No member has this token.")
	}
	if err != nil {
		return "", "", storeErr(ctx, err)
	}
	s.tokens.put(tokenHash, ref, gen)
	return ref.team, ref.member, nil
}

// PutRun implements core.RunStore. A run with a result is stored without
// a lease.
func (s *Store) PutRun(ctx context.Context, run core.RunDoc) error {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	var result, holder, expires any
	if run.Result != nil {
		result = string(run.Result)
	} else if run.Lease != nil {
		holder, expires = run.Lease.Holder, run.Lease.Expires
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO runs (id, result, holder, expires_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (id) DO UPDATE SET result = EXCLUDED.result, holder = EXCLUDED.holder,
			expires_at = EXCLUDED.expires_at, updated_at = now()`, run.ID, result, holder, expires)
	return storeErr(ctx, err)
}

// GetRun implements core.RunStore.
func (s *Store) GetRun(ctx context.Context, id string) (core.RunDoc, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	var result, holder *string
	var expires *time.Time
	err := s.pool.QueryRow(ctx, `SELECT result, holder, expires_at FROM runs WHERE id = $1`, id).Scan(&result, &holder, &expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return core.RunDoc{}, core.Errorf(core.CodeNotFound, "No such run.")
	}
	if err != nil {
		return core.RunDoc{}, storeErr(ctx, err)
	}
	doc := core.RunDoc{ID: id}
	switch {
	case result != nil:
		doc.Result = json.RawMessage(*result)
	case holder != nil && expires != nil:
		doc.Lease = &core.Lease{Holder: *holder, Expires: *expires}
	}
	return doc, nil
}

// RenewRun implements core.RunStore: one conditional update, so that a
// renewal never revives the lease of a run whose result was stored.
func (s *Store) RenewRun(ctx context.Context, id string, lease core.Lease) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	tag, err := s.pool.Exec(ctx, `UPDATE runs SET expires_at = $3, updated_at = now()
		WHERE id = $1 AND result IS NULL AND holder = $2`, id, lease.Holder, lease.Expires)
	if err != nil {
		return false, storeErr(ctx, err)
	}
	return tag.RowsAffected() == 1, nil
}

// ListRuns implements core.RunStore.
func (s *Store) ListRuns(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT id FROM runs`)
	if err != nil {
		return nil, storeErr(ctx, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, storeErr(ctx, err)
	}
	if ids == nil {
		ids = []string{}
	}
	return ids, nil
}

// DeleteRun implements core.RunStore.
func (s *Store) DeleteRun(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	_, err := s.pool.Exec(ctx, `DELETE FROM runs WHERE id = $1`, id)
	return storeErr(ctx, err)
}
