package workspace

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"unsafe"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// What the helper does besides Landlock and the limits (docs/api.md,
// "run_main's sandbox"): when the server is root it gives the program an
// unprivileged identity of its own, and in every case it installs a
// seccomp filter that refuses the calls a program has no business making.

// refusedCalls fail with EPERM in the sandbox; the program goes on. They
// reach kernel surfaces a python program does not need and that were the
// way of many escapes: asynchronous I/O rings, tracing other processes,
// mounts and namespaces, the keyrings, eBPF, performance counters, page
// fault handling, kernel modules and kexec, anonymous executable memory
// files (memfd_create: a program could run code that is in no file of
// the workspace), and the handle- and mount-API calls of containers'
// past escapes.
var refusedCalls = []string{
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	"ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
	"mount", "umount2", "pivot_root", "chroot", "unshare", "setns",
	"open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
	"keyctl", "add_key", "request_key",
	"bpf", "perf_event_open", "userfaultfd",
	"init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
	"memfd_create", "memfd_secret",
	"open_by_handle_at", "name_to_handle_at",
	"swapon", "swapoff", "reboot", "acct", "quotactl", "syslog",
	"settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
	"fanotify_init", "vhangup", "iopl", "ioperm",
}

// namespaceFlags are the clone flags that make a namespace: a clone that
// asks for one is refused as unshare is.
const namespaceFlags = unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWUSER |
	unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWCGROUP | unix.CLONE_NEWTIME

// seccompProgram assembles the sandbox's filter. The policy is compiled by
// go-seccomp-bpf (syscall numbers of this architecture, the x32 ABI
// refused); it is preceded by a check of the calling convention, since a
// call through another one (int 0x80 on x86-64) has other numbers, which
// the policy would let through: such calls fail with ENOSYS. clone3 fails
// with ENOSYS too, its flags being out of the filter's reach: the C
// library then falls back to clone, whose flags are checked.
func seccompProgram() ([]unix.SockFilter, error) {
	info, err := arch.GetInfo("")
	if err != nil {
		return nil, err
	}
	policy := seccomp.Policy{
		DefaultAction: seccomp.ActionAllow,
		Syscalls: []seccomp.SyscallGroup{
			{Action: seccomp.ActionErrno, Names: refusedCalls, NamesWithCondtions: []seccomp.NameWithConditions{
				{Name: "clone", Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.BitsSet, Value: namespaceFlags}}},
			}},
		},
	}
	body, err := policy.Assemble()
	if err != nil {
		return nil, err
	}
	enosys := uint32(seccomp.ActionErrno) | uint32(unix.ENOSYS)
	clone3, ok := info.SyscallNames["clone3"]
	if !ok {
		return nil, errors.New("seccomp: this architecture has no clone3")
	}
	head := []bpf.Instruction{
		bpf.LoadAbsolute{Off: 4, Size: 4}, // seccomp_data.arch
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(info.ID), SkipTrue: 1},
		bpf.RetConstant{Val: enosys},
		bpf.LoadAbsolute{Off: 0, Size: 4}, // seccomp_data.nr
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(clone3 | info.SeccompMask), SkipFalse: 1},
		bpf.RetConstant{Val: enosys},
	}
	raw, err := bpf.Assemble(append(head, body...))
	if err != nil {
		return nil, err
	}
	prog := make([]unix.SockFilter, len(raw))
	for i, in := range raw {
		prog[i] = unix.SockFilter{Code: in.Op, Jt: in.Jt, Jf: in.Jf, K: in.K}
	}
	return prog, nil
}

// loadSeccomp installs the filter on every thread of the helper; the
// program it execs inherits it. no_new_privs must be set already.
func loadSeccomp() error {
	prog, err := seccompProgram()
	if err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if _, _, e := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog))); e != 0 {
		return fmt.Errorf("seccomp: %w", e)
	}
	return nil
}

// exposeDirs makes each directory of rw (read-write) and ro (read-only)
// reachable, under its own path, by the unprivileged identity u that the
// program will have, in the helper's own mount namespace: a directory
// below one that u cannot search (a data directory of mode 0700, root's
// home holding the interpreter) is reached through a small read-only
// tmpfs mounted over the highest such directory, holding only the path
// down to a bind mount of the directory itself. Whatever else that
// directory held stays out of sight. The host's mounts are not touched.
func exposeDirs(u Identity, rw, ro []string) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("private mounts: %w", err)
	}
	type bind struct {
		path string
		ro   bool
		fd   int
	}
	cover := map[string][]bind{} // the hidden directory → what it must show
	var order []string
	for _, d := range append(slices.Clone(rw), ro...) {
		d = filepath.Clean(d)
		h, err := hiddenAncestor(u, d)
		if err != nil {
			return err
		}
		if h == "" {
			continue
		}
		if _, ok := cover[h]; !ok {
			order = append(order, h)
		}
		cover[h] = append(cover[h], bind{path: d, ro: !slices.Contains(rw, d)})
	}
	for _, h := range order {
		binds := cover[h]
		// One bind per directory: those inside another one come with it.
		slices.SortFunc(binds, func(a, b bind) int { return strings.Compare(a.path, b.path) })
		binds = slices.CompactFunc(binds, func(a, b bind) bool { return within(b.path, a.path) })
		// The directories are opened before the tmpfs hides them.
		for i := range binds {
			fd, err := unix.Open(binds[i].path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err != nil {
				return fmt.Errorf("open %s: %w", binds[i].path, err)
			}
			binds[i].fd = fd
		}
		const hide = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
		if err := unix.Mount("tmpfs", h, "tmpfs", hide, "mode=0755,size=64k,nr_inodes=256"); err != nil {
			return fmt.Errorf("cover %s: %w", h, err)
		}
		for _, b := range binds {
			if err := os.MkdirAll(b.path, 0o755); err != nil {
				return err
			}
			if err := unix.Mount(fmt.Sprintf("/proc/self/fd/%d", b.fd), b.path, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
				return fmt.Errorf("bind %s: %w", b.path, err)
			}
			// A remount sets every flag anew: those of the mount the
			// directory is on are kept (a noexec stays noexec).
			var sfs unix.Statfs_t
			if err := unix.Statfs(b.path, &sfs); err != nil {
				return fmt.Errorf("statfs %s: %w", b.path, err)
			}
			const kept = unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC | unix.MS_NOATIME | unix.MS_NODIRATIME | unix.MS_RELATIME
			flags := uintptr(unix.MS_REMOUNT|unix.MS_BIND|unix.MS_NOSUID|unix.MS_NODEV) | uintptr(sfs.Flags)&kept
			if b.ro {
				flags |= unix.MS_RDONLY
			}
			if err := unix.Mount("", b.path, "", flags, ""); err != nil {
				return fmt.Errorf("remount %s: %w", b.path, err)
			}
			_ = unix.Close(b.fd)
		}
		if err := unix.Mount("", h, "", unix.MS_REMOUNT|unix.MS_RDONLY|hide, ""); err != nil {
			return fmt.Errorf("cover %s read-only: %w", h, err)
		}
	}
	return nil
}

// within reports whether path is dir or inside it.
func within(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, strings.TrimSuffix(dir, "/")+"/")
}

// hiddenAncestor returns the highest directory above d that u cannot
// search (by its mode, owner and group), or "" when u reaches d.
func hiddenAncestor(u Identity, d string) (string, error) {
	if !filepath.IsAbs(d) {
		return "", fmt.Errorf("%s: not an absolute path", d)
	}
	parts := strings.Split(strings.TrimPrefix(d, "/"), "/")
	cur := "/"
	for i := 0; i < len(parts); i++ {
		var st unix.Stat_t
		if err := unix.Stat(cur, &st); err != nil {
			return "", fmt.Errorf("stat %s: %w", cur, err)
		}
		if !searchable(u, st) {
			return cur, nil
		}
		cur = filepath.Join(cur, parts[i])
	}
	return "", nil
}

// searchable reports whether u may search the directory st describes,
// by the permission bits that apply to it: the owner's, else the
// group's, else the others'.
func searchable(u Identity, st unix.Stat_t) bool {
	switch {
	case st.Uid == uint32(u.UID):
		return st.Mode&0o100 != 0
	case st.Gid == uint32(u.GID):
		return st.Mode&0o010 != 0
	}
	return st.Mode&0o001 != 0
}

// becomeUser gives the calling thread (the one that will exec the
// program) the identity u with no supplementary groups, which drops every
// capability. It acts on this thread only, as Landlock does: the exec
// that follows ends the others. The parent-death signal, which a change
// of identity clears, is set again.
func becomeUser(u Identity) error {
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, 0, 0, 0); e != 0 {
		return fmt.Errorf("setgroups: %w", e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(u.GID), uintptr(u.GID), uintptr(u.GID)); e != 0 {
		return fmt.Errorf("setresgid: %w", e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(u.UID), uintptr(u.UID), uintptr(u.UID)); e != 0 {
		return fmt.Errorf("setresuid: %w", e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_PRCTL, unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0); e != 0 {
		return fmt.Errorf("parent-death signal: %w", e)
	}
	return nil
}

// perNamespacePIDMax reports whether this kernel keeps a pid_max per PID
// namespace (Linux 6.14 and later). Only then may a helper that is root
// on the host write it: on an older kernel that would be the host's own.
func perNamespacePIDMax() bool {
	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		return false
	}
	var major, minor int
	if _, err := fmt.Sscanf(unix.ByteSliceToString(uts.Release[:]), "%d.%d", &major, &minor); err != nil {
		return false
	}
	return major > 6 || major == 6 && minor >= 14
}
