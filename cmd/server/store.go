package main

import (
	"context"
	"fmt"
	"log/slog"

	"mailroom/internal/core"
	"mailroom/internal/mail"
	"mailroom/internal/pgstore"
)

// openStore opens the configured backend: the data directory's file store,
// or PostgreSQL (whose schema is created or upgraded here). closeStore is
// called once the HTTP server has stopped. A database that cannot be
// reached is an error naming its host and database, never its password.
func openStore(ctx context.Context, cfg config, dataDir string, log *slog.Logger) (store core.Store, closeStore func() error, err error) {
	switch cfg.store {
	case storePostgres:
		s, err := pgstore.Open(ctx, cfg.databaseURL, pgstore.Options{Logger: log})
		if err != nil {
			return nil, nil, fmt.Errorf("refusing to start: %w", err)
		}
		log.Info("store", "backend", storePostgres, "database", s.Where())
		return s, s.Close, nil
	default:
		s, err := mail.Open(dataDir, mail.WithLogger(log))
		if err != nil {
			return nil, nil, fmt.Errorf("open data directory %s: %w", dataDir, err)
		}
		return s, s.Close, nil
	}
}
