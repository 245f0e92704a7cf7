package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"mailroom/internal/mail"
)

// adminTokenFile is the name, inside the data directory, of the file that
// keeps the generated admin token across restarts.
const adminTokenFile = "admin.token"

// loadOrCreateAdminToken returns the admin token kept in dataDir, creating
// it with a fresh random value on first start. The caller holds the data
// directory lock, so no other server writes the file at the same time.
func loadOrCreateAdminToken(dataDir string, log *slog.Logger) (string, error) {
	path := filepath.Join(dataDir, adminTokenFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		tok := strings.TrimSpace(string(b))
		if err := validateAdminToken(tok); err != nil {
			return "", fmt.Errorf("admin token in %s: %w (fix or delete the file)", path, err)
		}
		if err := tightenMode(path, log); err != nil {
			return "", err
		}
		return tok, nil
	case errors.Is(err, fs.ErrNotExist):
		tok := newAdminToken()
		if err := mail.WriteFile(path, []byte(tok+"\n")); err != nil {
			return "", fmt.Errorf("store admin token: %w", err)
		}
		log.Info("generated admin token", "file", path)
		return tok, nil
	default:
		return "", fmt.Errorf("read admin token: %w", err)
	}
}

// tightenMode makes the token file private again if someone widened it,
// since anyone who can read it can administer the server.
func tightenMode(path string, log *slog.Logger) error {
	info, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("stat admin token: %w", err)
	}
	if info.Mode().Perm()&0o077 == 0 {
		return nil
	}
	if err := os.Chmod(path, 0o600); err != nil {
		return fmt.Errorf("restrict admin token file %s to mode 0600: %w", path, err)
	}
	log.Warn("admin token file was readable by others; reset its mode to 0600", "file", path)
	return nil
}

// newAdminToken returns 256 random bits, hex-encoded, with a prefix that
// tells admin tokens apart from member tokens in a paste.
func newAdminToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return "mra_" + hex.EncodeToString(b)
}
