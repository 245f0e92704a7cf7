package mail

import (
	"io/fs"
	"os"
	"syscall"
	"time"
	"unsafe"
)

// sigOf is the identity of a file as Lstat or Fstat report it.
func sigOf(fi fs.FileInfo) fileSig {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileSig{size: fi.Size(), mtime: fi.ModTime().UnixNano(), ctime: fi.ModTime().UnixNano()}
	}
	return fileSig{
		dev:   st.Dev,
		ino:   st.Ino,
		size:  st.Size,
		mtime: st.Mtim.Nano(),
		ctime: st.Ctim.Nano(),
	}
}

// utimeOmit is UTIME_OMIT from <sys/stat.h>: leave this timestamp alone.
const utimeOmit = (1 << 30) - 2

// setModTime is futimens(fd, {UTIME_OMIT, t}), which is utimensat with a
// NULL path. Package syscall has no wrapper for it; going through the
// descriptor (not the path) keeps a file swapped in meanwhile out of reach.
func setModTime(f *os.File, t time.Time) error {
	ts := [2]syscall.Timespec{{Nsec: utimeOmit}, syscall.NsecToTimespec(t.UnixNano())}
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall6(syscall.SYS_UTIMENSAT, fd, 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
	}); err != nil {
		return err
	}
	if errno != 0 {
		return &os.PathError{Op: "futimens", Path: f.Name(), Err: errno}
	}
	return nil
}

// datasync is fdatasync(2): the data and what is needed to read it back
// (the size), not the times. The log needs no more.
func datasync(f *os.File) error {
	var err error
	for {
		err = syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return &fs.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
	}
	return nil
}
