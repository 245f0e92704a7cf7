package pgstore

import (
	"context"
	"fmt"
	"strings"

	"mailroom/internal/core"
)

var _ core.Searcher = (*Store)(nil)

// SearchLetters implements core.Searcher with PostgreSQL's full-text
// search over letters.search (migration 00011): every term is a
// phraseto_tsquery of its words (a word alone is a phrase of one), the
// terms joined by &&, so that all must match and a phrase's words must
// follow one another. Ranked by ts_rank, ties newest first within an
// inbox.
func (s *Store) SearchLetters(ctx context.Context, q core.SearchQuery) ([]core.Message, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	args := []any{q.Team, q.Viewer, q.From, q.To, q.Limit}
	parts := make([]string, 0, len(q.Terms))
	for _, t := range q.Terms {
		args = append(args, t.Text())
		parts = append(parts, fmt.Sprintf("phraseto_tsquery('simple'::regconfig, $%d)", len(args)))
	}
	sql := `SELECT line FROM letters, (SELECT ` + strings.Join(parts, " && ") + ` AS query) AS t
		WHERE team = $1 AND search @@ t.query
		AND ($2 = '' OR member = $2 OR sender = $2)
		AND ($3 = '' OR sender = $3) AND ($4 = '' OR member = $4)
		ORDER BY ts_rank(search, t.query) DESC, member, seq DESC
		LIMIT $5`
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, storeErr(ctx, err)
	}
	defer rows.Close()
	var out []core.Message
	for rows.Next() {
		var line []byte
		if err := rows.Scan(&line); err != nil {
			return nil, storeErr(ctx, err)
		}
		m, err := core.DecodeLetter(line)
		if err != nil {
			return nil, fmt.Errorf("pgstore: a stored letter of team %q does not decode: %w", q.Team, err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, storeErr(ctx, err)
	}
	return out, nil
}
