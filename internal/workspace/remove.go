package workspace

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// trashPrefix names a directory being deleted. Remove first renames the
// directory to trashPrefix + its name + a random suffix in the same parent
// and fsyncs the parent: that rename is the moment the directory is gone.
// Only then are its files removed; whatever a crash or a stubborn file
// leaves is trash, which RemoveTrash removes at the next start. The
// leading dot keeps trash out of every listing (names start with a
// letter). docs/durability.md tells the whole story.
const trashPrefix = ".trash-"

// removeAll removes a renamed-aside tree; a variable so that a test can
// make it fail as a stubborn file would.
var removeAll = os.RemoveAll

// Remove deletes the directory at path with everything in it, all or
// nothing across a crash (see trashPrefix). The deletion has happened
// once the rename is durable: a failure to remove the files afterwards is
// returned as left (for the caller to log), never as a failed deletion,
// and the next start's RemoveTrash removes them. A missing directory is
// not an error.
func Remove(path string) (left error, err error) {
	parent, name := filepath.Dir(path), filepath.Base(path)
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix) // crypto/rand.Read never fails on supported platforms
	trash := filepath.Join(parent, trashPrefix+name+"-"+hex.EncodeToString(suffix))
	if err := os.Rename(path, trash); err != nil {
		return nil, fmt.Errorf("workspace: move %s aside: %w", name, err)
	}
	if err := syncDir(parent); err != nil {
		// Not durable: undo, so that the caller can report the deletion
		// as not done.
		if rerr := os.Rename(trash, path); rerr == nil {
			_ = syncDir(parent)
		}
		return nil, fmt.Errorf("workspace: sync directory after moving %s aside: %w", name, err)
	}
	if err := removeAll(trash); err != nil {
		return fmt.Errorf("workspace: remove %s: %w", filepath.Base(trash), err), nil
	}
	return nil, nil
}

// RemoveTrash removes the trash that interrupted or half-done Remove calls
// left in dir and returns the names it removed. A missing dir holds none.
// Each trash directory was renamed away before any of its files was
// removed, so nothing that still exists under its own name is lost.
func RemoveTrash(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), trashPrefix) {
			continue
		}
		if err := removeAll(filepath.Join(dir, e.Name())); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, e.Name())
	}
	return removed, errors.Join(errs...)
}

// syncDir makes the entries of dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
