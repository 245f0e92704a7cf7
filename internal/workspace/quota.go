package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"mailroom/internal/core"
)

// A workspace holds at most its team's limits.workspace_bytes bytes (the
// sizes of its regular files) in at most limits.workspace_files entries
// (files, directories, links: every name below the workspace). An upload
// that would pass either is refused whole (PutFile); a run that ends past
// either keeps nothing it added (Runner.Run). docs/api.md, "Workspace
// quota".

// Quota bounds a workspace; a zero field bounds nothing.
type Quota struct {
	Bytes int64
	Files int
}

// QuotaOf is the quota a team's limits set.
func QuotaOf(l core.Limits) Quota {
	return Quota{Bytes: l.WorkspaceBytes, Files: l.WorkspaceFiles}
}

// holds reports whether u is within q.
func (q Quota) holds(u usage) bool {
	return (q.Bytes <= 0 || u.bytes <= q.Bytes) && (q.Files <= 0 || u.files <= q.Files)
}

func (q Quota) String() string {
	return fmt.Sprintf("limits.workspace_bytes %d, limits.workspace_files %d", q.Bytes, q.Files)
}

// ErrFull is returned by PutFile for a file the workspace has no room for.
var ErrFull = errors.New("workspace: the workspace is full")

// usage is what a workspace holds.
type usage struct {
	bytes int64
	files int
}

func (u usage) String() string {
	return fmt.Sprintf("%d bytes in %d files", u.bytes, u.files)
}

// entry is one name of a workspace as lstat saw it.
type entry struct {
	name  string // slash-separated, relative to the workspace
	mode  fs.FileMode
	size  int64
	uid   int
	gid   int
	nlink uint64
}

func entryOf(name string, fi fs.FileInfo) entry {
	e := entry{name: name, mode: fi.Mode(), size: fi.Size()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		e.uid, e.gid, e.nlink = int(st.Uid), int(st.Gid), uint64(st.Nlink)
	}
	return e
}

// snapshot is a workspace's names, parents before their children, and
// its own directory's mode and owner.
type snapshot struct {
	top     entry
	entries []entry
	byName  map[string]entry
	use     usage
}

// scan lists the workspace root. A directory it may not read (a server
// that is not root, whose program took its own rights away) is given
// back its owner's rights first, so that nothing is out of reach.
func scan(root *os.Root) (snapshot, error) {
	fi, err := root.Lstat(".")
	if err != nil {
		return snapshot{}, err
	}
	s := snapshot{top: entryOf(".", fi), byName: map[string]entry{}}
	var walk func(dir string) error
	walk = func(dir string) error {
		names, err := readNames(root, dir)
		if errors.Is(err, fs.ErrPermission) {
			if fi, serr := root.Lstat(dir); serr == nil {
				_ = root.Chmod(dir, fi.Mode().Perm()|0o700)
			}
			names, err = readNames(root, dir)
		}
		if err != nil {
			return err
		}
		for _, n := range names {
			name := n
			if dir != "." {
				name = dir + "/" + n
			}
			fi, err := root.Lstat(name)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return err
			}
			e := entryOf(name, fi)
			s.entries = append(s.entries, e)
			s.byName[name] = e
			s.use.files++
			if e.mode.IsRegular() {
				s.use.bytes += e.size
			}
			if e.mode.IsDir() {
				if err := walk(name); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk("."); err != nil {
		return snapshot{}, err
	}
	return s, nil
}

// readNames lists dir inside root, sorted.
func readNames(root *os.Root, dir string) ([]string, error) {
	f, err := root.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	return names, nil
}

// putMu makes the check and the write of an upload one step: two uploads
// at once cannot both take the last room.
var putMu sync.Mutex

// PutFile is WriteFile within q: when the workspace, with name replaced
// by data (and the directories it needs made), would hold more than q,
// nothing is written and the error is ErrFull, saying what it holds.
func PutFile(root *os.Root, name string, data []byte, q Quota) error {
	putMu.Lock()
	defer putMu.Unlock()
	s, err := scan(root)
	if err != nil {
		return err
	}
	use := s.use
	use.bytes += int64(len(data))
	if old, ok := s.byName[name]; ok && old.mode.IsRegular() {
		use.bytes -= old.size
	} else {
		// The file and each missing directory on its way are new names.
		use.files++
		for d := path.Dir(name); d != "."; d = path.Dir(d) {
			if _, ok := s.byName[d]; !ok {
				use.files++
			}
		}
	}
	if !q.holds(use) {
		return fmt.Errorf("%w: with this file it would hold %s (%s)", ErrFull, use, q)
	}
	return WriteFile(root, name, data)
}

// Identity is a user and a group id: the one run_main's program has when
// the server is root.
type Identity struct {
	UID int `json:"uid"`
	GID int `json:"gid"`
}

// DefaultUser is the program's identity unless configured: nobody and
// nogroup on most systems. An id that no other process uses is better
// still (see docs/api.md, "run_main's sandbox").
var DefaultUser = Identity{UID: 65534, GID: 65534}

func (u Identity) String() string { return fmt.Sprintf("%d:%d", u.UID, u.GID) }

// ParseIdentity parses the --sandbox-user flag's value, "UID" or
// "UID:GID" (the group defaults to the user's number). Root (0) is
// refused: the point is not to be root.
func ParseIdentity(s string) (Identity, error) {
	uidText, gidText, hasGID := strings.Cut(strings.TrimSpace(s), ":")
	if !hasGID {
		gidText = uidText
	}
	uid, err1 := strconv.ParseUint(uidText, 10, 32)
	gid, err2 := strconv.ParseUint(gidText, 10, 32)
	if err1 != nil || err2 != nil || uid == 0 || gid == 0 || uid == 1<<32-1 || gid == 1<<32-1 {
		return Identity{}, fmt.Errorf("sandbox user %q: want UID or UID:GID, numbers other than 0 (root)", s)
	}
	return Identity{UID: int(uid), GID: int(gid)}, nil
}

// handOver gives the workspace to u for a run: its directory and every
// directory and singly linked regular file in it that the server owns.
// A file with other links is left alone, since one of them may lie
// outside the workspace.
func handOver(root *os.Root, s snapshot, u Identity) error {
	if err := root.Lchown(".", u.UID, u.GID); err != nil {
		return err
	}
	me := os.Geteuid()
	for _, e := range s.entries {
		if e.uid != me || !(e.mode.IsDir() || e.mode.IsRegular() && e.nlink == 1) {
			continue
		}
		if err := root.Lchown(e.name, u.UID, u.GID); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// settle puts the workspace in order after a run whose snapshot was
// before: no setuid or setgid bit anywhere (the bits are removed, the
// files kept), what u owns given back to the server (when u is set), the
// workspace directory's mode and owner as before. When it then holds
// more than q, what the run added is removed and what it grew is cut
// back to its size before (trim), and full is true.
func settle(root *os.Root, before snapshot, u *Identity, q Quota) (full bool, err error) {
	after, err := scan(root)
	if err != nil {
		return false, err
	}
	me, myGroup := os.Geteuid(), os.Getegid()
	var errs []error
	for _, e := range after.entries {
		if e.mode&(fs.ModeSetuid|fs.ModeSetgid) != 0 && (e.mode.IsRegular() || e.mode.IsDir()) {
			errs = append(errs, root.Chmod(e.name, e.mode&(fs.ModePerm|fs.ModeSticky)))
		}
		if u != nil && e.uid == u.UID {
			errs = append(errs, root.Lchown(e.name, me, myGroup))
		}
	}
	errs = append(errs,
		root.Chmod(".", before.top.mode&(fs.ModePerm|fs.ModeSticky)),
		root.Lchown(".", before.top.uid, before.top.gid))
	if err := errors.Join(errs...); err != nil {
		return false, err
	}
	if q.holds(after.use) {
		return false, nil
	}
	return true, trim(root, before, after)
}

// trim undoes what a run added to the workspace: every name that was not
// there before (or is now of another type) is removed, and a regular file
// that grew is cut back to its size before. What remains is then at most
// what was there before, in names and in bytes.
func trim(root *os.Root, before, after snapshot) error {
	var removed []string
	var errs []error
	for _, e := range after.entries {
		if slices.ContainsFunc(removed, func(d string) bool { return strings.HasPrefix(e.name, d+"/") }) {
			continue
		}
		old, ok := before.byName[e.name]
		if !ok || old.mode.Type() != e.mode.Type() {
			errs = append(errs, root.RemoveAll(e.name))
			removed = append(removed, e.name)
			continue
		}
		if e.mode.IsRegular() && e.size > old.size {
			f, err := root.OpenFile(e.name, os.O_WRONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			errs = append(errs, f.Truncate(old.size), f.Close())
		}
	}
	return errors.Join(errs...)
}
