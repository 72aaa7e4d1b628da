package main

import (
	"os"
	"path/filepath"
	"testing"
)

// Host state a sandbox reached past its namespaces: the host's hugetlb
// pool, the page cache of the host files bound into it, and socket
// families through socketpair.

// TestRunHugeTLBCannotDrainTheHostsPool is issue 12's ninth attacker,
// finding 2: MAP_HUGETLB took every page of the host's hugetlb pool, which
// neither RLIMIT_DATA nor the v1 memory group counts, and the host's own
// services got ENOMEM. Each way in is refused as a kernel that will not
// give huge pages answers: mmap and shmget EPERM, memfd_create EINVAL.
func TestRunHugeTLBCannotDrainTheHostsPool(t *testing.T) {
	e := newSandboxEnv(t)
	out, errs, _ := runCmd(t, e.configuredProbe("", "hugetlb"))
	wantLines(t, out+errs, "mmap(MAP_HUGETLB): EPERM", "mmap(MAP_HUGETLB|1<<32): EPERM", "shmget(SHM_HUGETLB): EPERM",
		"shmget(SHM_HUGETLB|1<<32): EPERM", "memfd_create(MFD_HUGETLB): EINVAL", "memfd_create(MFD_HUGETLB|1<<32): EINVAL", "rc=0")
}

// TestRunProgramCannotWatchHostReadsThroughThePageCache is issue 12's
// ninth attacker, finding 3: fadvise(DONTNEED) evicted a bound host file's
// pages and preadv2(RWF_NOWAIT) then said, without blocking, whether a
// host process had read it since (EAGAIN if not): inotify's signal again.
// A read that must not block is EOPNOTSUPP (ENOTSUP, the same number)
// whether the file is cached or not, so its answer says nothing; the
// evictions succeed and do nothing; cachestat is ENOSYS. On main the read
// after fadvise said EAGAIN: evicted, and not read since. KSM opt-in
// (prctl(PR_SET_MEMORY_MERGE), madvise(MADV_MERGEABLE)) answers EINVAL, as
// a kernel without KSM does (round 20 sandbox attacker's observation).
func TestRunProgramCannotWatchHostReadsThroughThePageCache(t *testing.T) {
	e := newSandboxEnv(t)
	// Written through to the disk: dirty pages are not evicted.
	f, err := os.Create(filepath.Join(e.dir, "watched"))
	if err == nil {
		_, err = f.Write(make([]byte, 1<<20))
	}
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = f.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	out, errs, _ := runCmd(t, e.configuredProbe("", "pagecache", "watched"))
	wantLines(t, out+errs, "preadv2(RWF_NOWAIT) cached: ENOTSUP", "preadv2(RWF_NOWAIT|1<<32) cached: ENOTSUP",
		"fadvise(DONTNEED): allowed", "preadv2(RWF_NOWAIT) after fadvise: ENOTSUP", "preadv2(0) after fadvise: allowed",
		"madvise(MADV_PAGEOUT): allowed", "preadv2(RWF_NOWAIT) after MADV_PAGEOUT: ENOTSUP",
		"madvise(MADV_COLD): allowed", "preadv2(RWF_NOWAIT) after MADV_COLD: ENOTSUP", "cachestat: ENOSYS",
		"prctl(PR_SET_MEMORY_MERGE): EINVAL", "madvise(MADV_MERGEABLE): EINVAL", "rc=0")
}

// TestRunSocketpairIsHeldToUnixLikeSocket is issue 12's ninth attacker,
// finding 5: socket() is held to AF_UNIX, AF_INET and AF_INET6, but
// socketpair() took any family to the kernel (which loads a family's
// module on demand). It is held to AF_UNIX, on the low word as socket is.
func TestRunSocketpairIsHeldToUnixLikeSocket(t *testing.T) {
	e := newSandboxEnv(t)
	out, errs, _ := runCmd(t, e.configuredProbe("", "socketpair"))
	wantLines(t, out+errs, "socketpair(AF_UNIX): allowed", "socketpair(AF_UNIX|1<<32): allowed", "socketpair(AF_VSOCK): EAFNOSUPPORT",
		"socketpair(AF_NETLINK): EAFNOSUPPORT", "socketpair(AF_INET): EAFNOSUPPORT", "socketpair(AF_TIPC): EAFNOSUPPORT",
		"socketpair(AF_TIPC|1<<32): EAFNOSUPPORT", "rc=0")
}
