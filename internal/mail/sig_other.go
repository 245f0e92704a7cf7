//go:build !linux

package mail

import (
	"io/fs"
	"os"
	"time"
)

// sigOf is the identity of a file as Lstat or Fstat report it. Outside
// Linux it is the size and modification time only, which still catches
// every change of size and every write the clock can tell apart.
func sigOf(fi fs.FileInfo) fileSig {
	return fileSig{size: fi.Size(), mtime: fi.ModTime().UnixNano(), ctime: fi.ModTime().UnixNano()}
}

// setModTime is a no-op outside Linux; see sigOf.
func setModTime(*os.File, time.Time) error { return nil }

func datasync(f *os.File) error { return f.Sync() }
