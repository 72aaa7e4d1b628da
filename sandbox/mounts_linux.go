package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// systemDirs are bound read-only from the host: programs and libraries.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// etcEntries are the host /etc entries a program needs and that hold no
// secrets: TLS trust, the dynamic linker, time zones, alternatives. The
// rest of /etc is generated.
var etcEntries = []string{"ssl", "ca-certificates", "ca-certificates.conf", "pki", "alternatives", "localtime", "ld.so.cache",
	"ld.so.conf", "ld.so.conf.d", "os-release", "mime.types", "protocols", "services", "gai.conf", "nodejs", "java-17-openjdk"}

// devices are bound from the host /dev; nothing else exists in /dev.
var devices = []string{"null", "zero", "full", "random", "urandom"}

// buildRoot makes the sandbox's filesystem by allowlist on a tmpfs and
// pivots into it: read-only system folders, a generated /etc, the
// integration folder and runtime read-only, one writable state folder, a
// tmpfs HOME and /tmp, a minimal /dev and a fresh /proc. There is no host
// /run, /var, /home or /sys, no audit log and no key material.
func buildRoot(spec Spec) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return step("make mounts private", err)
	}
	// Open every source before the staging tmpfs hides anything: an
	// integration folder may well live under /tmp.
	var sources []string
	sources = append(sources, systemDirs...)
	for _, e := range etcEntries {
		sources = append(sources, filepath.Join("/etc", e))
	}
	for _, d := range devices {
		sources = append(sources, "/dev/"+d)
	}
	sources = append(append(sources, spec.ReadOnly...), spec.StateDir)
	if spec.TrustBundle != "" {
		sources = append(sources, spec.TrustBundle)
	}
	if err := openSources(sources); err != nil {
		return err
	}
	if err := checkFolder(spec.Dir, spec.DirID); err != nil {
		return err
	}
	if _, ok := opened[spec.TrustBundle]; spec.TrustBundle != "" && !ok {
		return step("open the trust bundle", fmt.Errorf("%s: %w", spec.TrustBundle, os.ErrNotExist))
	}
	// The new root lives on a tmpfs mounted over /tmp in this mount
	// namespace only, so nothing is created on the host.
	if err := unix.Mount("tmpfs", "/tmp", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=64m"); err != nil {
		return step("tmpfs root", err)
	}
	root := "/tmp/root"
	if err := os.Mkdir(root, 0o755); err != nil {
		return step("tmpfs root", err)
	}
	if err := unix.Mount("tmpfs", root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=64m"); err != nil {
		return step("tmpfs root", err)
	}
	for _, d := range systemDirs {
		if err := bindSystem(root, d); err != nil {
			return step("bind "+d, err)
		}
	}
	if err := buildEtc(root, spec.TrustBundle); err != nil {
		return err
	}
	// The tmpfs folders first: an integration folder under /tmp is bound
	// on top of the sandbox's own /tmp, not hidden by it.
	for d, sizeMB := range map[string]int{"/tmp": spec.Limits.TmpMB, Home: spec.Limits.HomeMB} {
		if err := mkdirMount(root, d, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, spec.Limits.tmpfsOptions(sizeMB)); err != nil {
			return step("tmpfs "+d, err)
		}
	}
	for _, p := range spec.ReadOnly {
		if err := bind(root, p, p, true); err != nil {
			return step("bind "+p, err)
		}
	}
	if err := bind(root, spec.StateDir, StateDir, false); err != nil {
		return step("bind state folder", err)
	}
	if err := remountNoSuidNoDev(filepath.Join(root, StateDir)); err != nil {
		return step("state folder nosuid,nodev", err)
	}
	if err := buildDev(root); err != nil {
		return err
	}
	if err := mountProc(root); err != nil {
		return err
	}
	if err := pivot(root); err != nil {
		return err
	}
	closeSources()
	return nil
}

// bindSystem binds a system folder, or recreates it as the symlink it is
// on merged-/usr systems.
func bindSystem(root, dir string) error {
	st, err := os.Lstat(dir)
	if _, ok := opened[dir]; errors.Is(err, os.ErrNotExist) || !ok {
		return nil
	}
	if err != nil {
		return err
	}
	if st.Mode()&os.ModeSymlink != 0 {
		target, err := os.Readlink(dir)
		if err != nil {
			return err
		}
		return os.Symlink(target, filepath.Join(root, dir))
	}
	return bind(root, dir, dir, true)
}

// opened holds O_PATH fds of the bind sources, opened before the staging
// tmpfs went over /tmp. The init is single-purpose, so a package variable
// is its whole state.
var opened = map[string]source{}

// source is a bind source: an O_PATH fd opened here, or a detached mount
// the supervisor cloned (open_tree) and passed in.
type source struct {
	fd       int
	detached bool
}

func openSources(paths []string) error {
	for _, p := range paths {
		if _, ok := opened[p]; ok {
			continue // passed by the supervisor
		}
		fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			return step("open "+p, err)
		}
		opened[p] = source{fd: fd}
	}
	return nil
}

// checkFolder refuses to bind the integration folder unless the source
// opened for dir is the folder the supervisor opened before it read the
// manifest: the author may have pointed the path elsewhere since. A
// detached mount the supervisor cloned is that folder by construction.
func checkFolder(dir string, want FileID) error {
	s, ok := opened[dir]
	if !ok || s.detached {
		return nil // absent: bind fails on it; detached: cloned from the descriptor
	}
	got, err := fileID(s.fd)
	if err != nil {
		return step("check the integration folder", err)
	}
	if got != want {
		return step("check the integration folder", fmt.Errorf("%s is no longer the folder whose manifest was read (the path was pointed elsewhere)", dir))
	}
	return nil
}

// sourcePath is where src can still be reached: its fd.
func sourcePath(src string) (string, source, error) {
	s, ok := opened[src]
	if !ok {
		return "", s, fmt.Errorf("%s: %w", src, os.ErrNotExist)
	}
	return "/proc/self/fd/" + strconv.Itoa(s.fd), s, nil
}

// bind mounts host path src at dst inside root, read-only if asked. A
// read-only remount must keep the flags the kernel locked on the source
// (nosuid, nodev, noexec, atime) or a user namespace may not remount it.
func bind(root, src, dst string, readOnly bool) error {
	from, s, err := sourcePath(src)
	if err != nil {
		return err
	}
	st, err := os.Stat(from)
	if err != nil {
		return err
	}
	target := filepath.Join(root, dst)
	if _, lerr := os.Lstat(target); lerr == nil {
		// A file to mount over already (a system trust bundle inside a
		// read-only /etc/ssl, where creating it would fail).
	} else if st.IsDir() {
		err = os.MkdirAll(target, 0o755)
	} else {
		if err = os.MkdirAll(filepath.Dir(target), 0o755); err == nil {
			var f *os.File
			if f, err = os.OpenFile(target, os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
				f.Close()
			}
		}
	}
	if err != nil {
		return err
	}
	if s.detached {
		err = unix.MoveMount(s.fd, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH)
	} else {
		err = unix.Mount(from, target, "", unix.MS_BIND|unix.MS_REC, "")
	}
	if err != nil {
		return err
	}
	if !readOnly {
		return nil
	}
	var sfs unix.Statfs_t
	if err := unix.Statfs(target, &sfs); err != nil {
		return err
	}
	flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY)
	for st, ms := range map[int64]uintptr{unix.ST_NOSUID: unix.MS_NOSUID, unix.ST_NODEV: unix.MS_NODEV, unix.ST_NOEXEC: unix.MS_NOEXEC,
		unix.ST_NOATIME: unix.MS_NOATIME, unix.ST_NODIRATIME: unix.MS_NODIRATIME, unix.ST_RELATIME: unix.MS_RELATIME} {
		if sfs.Flags&st != 0 {
			flags |= ms
		}
	}
	if err := unix.Mount("", target, "", flags, ""); err != nil {
		return err
	}
	return readOnlyBelow(target)
}

// readOnlyBelow makes every mount at or under target read-only, nosuid and
// nodev. MS_REMOUNT acts on the top mount only: a host mount nested in a
// bound folder (a node_modules volume) stayed writable from inside. It
// fails closed where the kernel lacks mount_setattr.
func readOnlyBelow(target string) error {
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	if err := unix.MountSetattr(unix.AT_FDCWD, target, unix.AT_RECURSIVE|unix.AT_SYMLINK_NOFOLLOW, attr); err != nil {
		return fmt.Errorf("read-only below %s: %w", target, err)
	}
	return nil
}

func mkdirMount(root, dir, fstype string, flags uintptr, data string) error {
	target := filepath.Join(root, dir)
	if err := os.MkdirAll(target, 0o755); err != nil {
		return err
	}
	return unix.Mount(fstype, target, fstype, flags, data)
}

// buildEtc generates /etc: DNS through the sandbox resolver only, no
// search list, localhost in hosts, and the few host entries in etcEntries.
func buildEtc(root, trustBundle string) error {
	etc := filepath.Join(root, "etc")
	if err := os.MkdirAll(etc, 0o755); err != nil {
		return step("generate /etc", err)
	}
	files := map[string]string{
		"resolv.conf":   "nameserver " + strings.Split(DNSAddr, ":")[0] + "\noptions edns0\n",
		"hosts":         "127.0.0.1 localhost\n",
		"nsswitch.conf": "passwd: files\ngroup: files\nhosts: files dns\n",
		"passwd":        "root:x:0:0:root:/root:/bin/sh\nsandbox:x:0:0:sandbox:" + Home + ":/bin/sh\nnobody:x:65534:65534:nobody:/:/usr/sbin/nologin\n",
		"group":         "root:x:0:\nnogroup:x:65534:\n",
		"hostname":      "sandbox\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(etc, name), []byte(content), 0o644); err != nil {
			return step("generate /etc/"+name, err)
		}
	}
	for _, e := range etcEntries {
		src := filepath.Join("/etc", e)
		if _, ok := opened[src]; !ok {
			continue
		}
		if st, err := os.Lstat(src); err != nil || !worldReadable(st.Mode()) {
			continue
		}
		if err := bind(root, src, src, true); err != nil {
			return step("bind "+src, err)
		}
		if err := hideRestricted(root, filepath.Join(root, src)); err != nil {
			return step("hide restricted entries under "+src, err)
		}
	}
	if err := bindTrustBundle(root, trustBundle); err != nil {
		return step("bind the trust bundle", err)
	}
	return step("read-only /etc", remountReadOnly(etc))
}

// worldReadable says whether anyone on the host may read m: a file with
// o+r, a folder with o+rx. Symlinks resolve inside the sandbox's own tree.
func worldReadable(m os.FileMode) bool {
	switch {
	case m&os.ModeSymlink != 0:
		return true
	case m.IsDir():
		return m.Perm()&0o005 == 0o005
	}
	return m.Perm()&0o004 != 0
}

// hideRestricted covers every entry under the bound folder dir that is not
// world-readable (/etc/ssl/private, 0710 group ssl-cert): a non-root
// launcher's supplementary groups still count inside, so group-only
// secrets would be readable. A folder gets an empty tmpfs over it, a file
// an empty file; an entry the walk cannot read is covered too.
func hideRestricted(root, dir string) error {
	empty := filepath.Join(root, "etc", ".egressd-hidden")
	if err := os.WriteFile(empty, nil, 0o444); err != nil {
		return err
	}
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if p == dir {
			return err
		}
		var info fs.FileInfo
		if err == nil {
			info, err = d.Info()
		}
		switch {
		case err == nil && worldReadable(info.Mode()):
			return nil
		case d != nil && d.IsDir():
			if err := unix.Mount("tmpfs", p, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k,mode=0755"); err != nil {
				return err
			}
			return fs.SkipDir
		}
		return unix.Mount(empty, p, "", unix.MS_BIND, "")
	})
}

func remountReadOnly(dir string) error {
	if err := unix.Mount(dir, dir, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return err
	}
	if err := unix.Mount("", dir, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return err
	}
	return readOnlyBelow(dir)
}

// buildDev makes a /dev with the harmless devices only: no tty, no disks.
func buildDev(root string) error {
	if err := mkdirMount(root, "/dev", "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755,size=64k,nr_inodes=64"); err != nil {
		return step("tmpfs /dev", err)
	}
	for _, d := range devices {
		if err := bind(root, "/dev/"+d, "/dev/"+d, false); err != nil {
			return step("bind /dev/"+d, err)
		}
	}
	for name, target := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
		if err := os.Symlink(target, filepath.Join(root, "dev", name)); err != nil {
			return step("/dev/"+name, err)
		}
	}
	return nil
}

// pivot makes root the filesystem root and detaches the host's.
func pivot(root string) error {
	old := filepath.Join(root, ".oldroot")
	if err := os.Mkdir(old, 0o700); err != nil {
		return step("pivot_root", err)
	}
	if err := unix.PivotRoot(root, old); err != nil {
		return step("pivot_root", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return step("pivot_root", err)
	}
	if err := unix.Unmount("/.oldroot", unix.MNT_DETACH); err != nil {
		return step("detach the host root", err)
	}
	if err := os.Remove("/.oldroot"); err != nil {
		return step("detach the host root", err)
	}
	return step("read-only root", unix.Mount("", "/", "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_BIND, ""))
}
