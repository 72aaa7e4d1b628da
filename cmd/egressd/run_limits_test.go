package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/egressd/egressd/sandbox"
)

// configured is egressd run with an operator config holding yaml.
func (e *sandboxEnv) configured(yaml, script string) *exec.Cmd {
	cfg := filepath.Join(e.t.TempDir(), "egressd.yaml")
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		e.t.Fatal(err)
	}
	cmd := e.command(script)
	cmd.Args = append(cmd.Args[:2], append([]string{"--config", cfg}, cmd.Args[2:]...)...)
	return cmd
}

func runCmd(t *testing.T, cmd *exec.Cmd) (string, string, int) {
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// smallLimits are bounds low enough for bounded bombs to hit quickly.
const smallLimits = `sandbox_limits:
  processes: 48
  open_files: 64
  memory_mb: 128
  file_size_mb: 8
  tmp_mb: 4
  home_mb: 4
  tmpfs_inodes: 100
  state_mb: 16
`

// TestRunBombsHitTheirBoundsNotTheHost runs one bounded bomb per bound. Each
// bomb stops by itself at a size well past its bound, so the test, not the
// machine, is what stops; the bound must stop it first.
func TestRunBombsHitTheirBoundsNotTheHost(t *testing.T) {
	e := newSandboxEnv(t)
	cases := []struct {
		name, script string
		check        func(t *testing.T, out, errs string, code int)
	}{
		{"limits_in_force", `grep -E '^Max (processes|open files|data size|file size|core file size)' /proc/self/limits | tr -s ' '`,
			func(t *testing.T, out, errs string, code int) {
				for _, want := range []string{"Max processes 48 48", "Max open files 64 64", "Max data size 134217728 134217728",
					"Max file size 8388608 8388608", "Max core file size 1 1"} {
					if !strings.Contains(out, want) {
						t.Errorf("want %q in:\n%s", want, out)
					}
				}
			}},
		{"fork_bomb", `i=0; while [ $i -lt 400 ]; do sleep 1000 & i=$((i+1)); printf '%d ' $i; done`,
			func(t *testing.T, out, errs string, code int) {
				f := strings.Fields(out)
				n := 0
				if len(f) > 0 {
					n, _ = strconv.Atoi(f[len(f)-1])
				}
				if n == 0 || n >= 48 || code == 0 || !strings.Contains(strings.ToLower(errs), "fork") {
					t.Errorf("forked %d of 400 (bound 48), exit %d, stderr %q", n, code, errs)
				}
			}},
		{"memory_hog", `/usr/bin/python3 -c 'b = bytearray(512 << 20); print("allocated")'`,
			func(t *testing.T, out, errs string, code int) {
				if code == 0 || strings.Contains(out, "allocated") || !strings.Contains(errs, "MemoryError") {
					t.Errorf("exit %d, stdout %q, stderr %q", code, out, errs)
				}
			}},
		{"tmpfs_full", `head -c 16m /dev/zero > /tmp/big; echo tmp=$?; head -c 16m /dev/zero > ~/big; echo home=$?; du -sk /tmp ~`,
			func(t *testing.T, out, errs string, code int) {
				if !strings.Contains(out, "tmp=1") || !strings.Contains(out, "home=1") || strings.Count(errs, "No space left on device") != 2 {
					t.Errorf("stdout %q, stderr %q", out, errs)
				}
			}},
		{"tmpfs_inodes", `i=0; while [ $i -lt 1000 ]; do printf '' > /tmp/f$i || break; i=$((i+1)); done; echo files=$i`,
			func(t *testing.T, out, errs string, code int) {
				m := regexp.MustCompile(`files=(\d+)`).FindStringSubmatch(out)
				if n, _ := strconv.Atoi(m[1]); m == nil || n >= 100 || !strings.Contains(errs, "No space left on device") {
					t.Errorf("stdout %q, stderr %q", out, errs)
				}
			}},
		{"state_folder_file", `head -c 64m /dev/zero > /var/lib/integration/big; echo state=$?`,
			func(t *testing.T, out, errs string, code int) {
				if strings.Contains(out, "state=0") || !strings.Contains(errs, "File size limit exceeded") {
					t.Errorf("stdout %q, stderr %q", out, errs)
				}
				if host := e.stateOnHost(t); host > 16<<20 {
					t.Errorf("the state takes %d bytes on the host disk", host)
				}
			}},
		{"open_files", `/usr/bin/python3 -c 'import os; fds = [os.open("/dev/null", 0) for _ in range(1000)]; print("opened")'`,
			func(t *testing.T, out, errs string, code int) {
				if code == 0 || strings.Contains(out, "opened") || !strings.Contains(errs, "Too many open files") {
					t.Errorf("exit %d, stdout %q, stderr %q", code, out, errs)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, errs, code := runCmd(t, e.configured(smallLimits, tc.script))
			tc.check(t, out, errs, code)
		})
	}
	if log := e.auditLog(); !strings.Contains(log, `"action":"limits","msg":"processes 48, open files 64 per process, memory 128 MB per process`) {
		t.Errorf("the audit log does not state the bounds in force:\n%s", log)
	}
}

// TestRunNISDomainnameOfTheHostDoesNotLeak: the new UTS namespace got a
// hostname but kept the host's NIS domain name, which getdomainname(2) and
// /proc/sys/kernel/domainname showed inside. egressd runs here in a UTS
// namespace of the test's own, whose domain name is set to a marker.
func TestRunNISDomainnameOfTheHostDoesNotLeak(t *testing.T) {
	e := newSandboxEnv(t)
	const marker = "host-nis.example"
	cmd := e.command(`cat /proc/sys/kernel/domainname; /usr/bin/python3 -c 'import ctypes; b = ctypes.create_string_buffer(65); ctypes.CDLL(None).getdomainname(b, 65); print(b.value.decode())'`)
	inner := append([]string{}, cmd.Args...)
	cmd.Path, cmd.Args = "/bin/sh", append([]string{"sh", "-c", `printf ` + marker + ` > /proc/sys/kernel/domainname && exec "$@"`, "sh"}, inner...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUTS}
	out, errs, code := runCmd(t, cmd)
	if code != 0 || out != "(none)\n(none)\n" {
		t.Fatalf("exit %d, stdout %q (the host's is %q), stderr %q", code, out, marker, errs)
	}
}

func TestRunHostnameIsTheSandboxs(t *testing.T) {
	e := newSandboxEnv(t)
	host, _ := os.Hostname()
	out, errs, code := e.run(`uname -n; cat /proc/sys/kernel/hostname`)
	if code != 0 || out != "sandbox\nsandbox\n" {
		t.Fatalf("exit %d, stdout %q (host %q), stderr %q", code, out, host, errs)
	}
}

// TestRunChildCannotKillItsInitWithSignals sends pid 1 every signal the init
// does not forward. The Go runtime crashes on SIGQUIT (with a goroutine dump)
// and exits on most others unless the init takes them all.
func TestRunChildCannotKillItsInitWithSignals(t *testing.T) {
	e := newSandboxEnv(t)
	var sigs []string
	for s := 1; s <= 64; s++ {
		switch syscall.Signal(s) {
		case syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP: // forwarded to the program, by design
		case 32, 33: // not valid for kill(1) in every shell
		default:
			sigs = append(sigs, strconv.Itoa(s))
		}
	}
	out, errs, code := e.run(`for s in ` + strings.Join(sigs, " ") + `; do kill -$s 1 || echo failed=$s; done; echo survived; exit 7`)
	if code != 7 || !strings.Contains(out, "survived") || strings.Contains(out, "failed=") || strings.Contains(errs, "goroutine") {
		t.Fatalf("exit %d\nstdout %q\nstderr %q", code, out, errs)
	}
	if log := e.auditLog(); !strings.Contains(log, `"msg":"exit status 7"`) {
		t.Fatalf("audit log:\n%s", log)
	}
}

// TestRunProgramIgnoringSIGTERMIsKilledAfterTheGrace: a program that ignores
// the forwarded SIGTERM must not keep egressd up.
func TestRunProgramIgnoringSIGTERMIsKilledAfterTheGrace(t *testing.T) {
	e := newSandboxEnv(t)
	marker := strconv.Itoa(1000+os.Getpid()) + ".5" // a sleep no one else runs
	cmd := e.configured("timeouts:\n  stop_grace: 200ms\n", `trap '' TERM; echo ready; exec sleep `+marker)
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 6)
	if _, err := stdout.Read(buf); err != nil || string(buf) != "ready\n" {
		t.Fatalf("program did not start: %q %v", buf, err)
	}
	waitForProcess(t, marker, true)
	cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 128+int(syscall.SIGKILL) {
		t.Fatalf("egressd: %v, want exit 137", err)
	}
	waitForProcess(t, marker, false)
	if log := e.auditLog(); !strings.Contains(log, `killed: still running 200ms after the forwarded signal`) {
		t.Fatalf("audit log:\n%s", log)
	}
}

// TestRunAuditSaysWhenTheInitDied: the init killed from outside takes the
// program with it; the audit log must say so rather than report the
// program's "exit status 137".
func TestRunAuditSaysWhenTheInitDied(t *testing.T) {
	e := newSandboxEnv(t)
	cmd := e.command(`echo ready; exec sleep 1000`)
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 6)
	if _, err := stdout.Read(buf); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(e.auditLog(), `"action":"start"`); { // the supervisor knows the program runs
		if time.Now().After(deadline) {
			t.Fatalf("no start event:\n%s", e.auditLog())
		}
		time.Sleep(10 * time.Millisecond)
	}
	children, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/task/" + strconv.Itoa(cmd.Process.Pid) + "/children")
	var init int
	for _, tid := range mustTasks(t, cmd.Process.Pid) {
		data, _ := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/task/" + tid + "/children")
		children = append(children, data...)
	}
	for _, f := range strings.Fields(string(children)) {
		if cmdline, _ := os.ReadFile("/proc/" + f + "/cmdline"); strings.HasPrefix(string(cmdline), "egressd-init\x00") {
			init, _ = strconv.Atoi(f)
		}
	}
	if init == 0 || err != nil {
		t.Fatalf("no init among egressd's children %q: %v", children, err)
	}
	syscall.Kill(init, syscall.SIGKILL)
	cmd.Wait()
	if log := e.auditLog(); !strings.Contains(log, `the sandbox's init died (exit status 137)`) {
		t.Fatalf("audit log:\n%s", log)
	}
}

func mustTasks(t *testing.T, pid int) []string {
	entries, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, en := range entries {
		out = append(out, en.Name())
	}
	return out
}

// TestRunStateFolderStaysWritableAcrossRootRuns: as root, each run used a
// new uid (2,000,000,000+pid), so the second run could not write what the
// first one made. An integration keeps one uid, and no other integration
// shares it.
func TestRunStateFolderStaysWritableAcrossRootRuns(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the per-integration uid is root's")
	}
	e := newSandboxEnv(t)
	// Folders an earlier version left, named after the id alone and owned
	// by per-process uids, which two integrations could share: this one's
	// content moves into its state (version memory binds the id to this
	// folder), writable, under a uid no other integration has.
	e.bindID()
	legacy := filepath.Join(e.state, "sandbox", "com.test.sandboxed")
	other := filepath.Join(e.state, "sandbox", "com.test.other")
	os.MkdirAll(legacy, 0o700)
	os.MkdirAll(other, 0o700)
	os.WriteFile(filepath.Join(legacy, "legacy"), []byte("old\n"), 0o600)
	oldUID := 2_000_000_000 + os.Getpid()
	for _, p := range []string{legacy, filepath.Join(legacy, "legacy"), other} {
		os.Chown(p, oldUID, oldUID)
	}
	script := `cd /var/lib/integration && echo x >> legacy && mkdir -p sub && echo x >> counter && echo x >> sub/counter && wc -l < counter && head -1 legacy`
	for run := 1; run <= 2; run++ {
		out, errs, code := e.run(script)
		if code != 0 || out != strconv.Itoa(run)+"\nold\n" {
			t.Fatalf("run %d: exit %d, stdout %q, stderr %q", run, code, out, errs)
		}
	}
	if _, err := os.Lstat(legacy); !os.IsNotExist(err) {
		t.Fatalf("the id-only folder was not moved: %v", err)
	}
	mine, _ := os.Stat(e.stateFolder("com.test.sandboxed"))
	if uid := mine.Sys().(*syscall.Stat_t).Uid; uid == uint32(oldUID) || uid < 2_000_000_000 {
		t.Fatalf("the integration runs as uid %d, shared with another integration or not a sandbox uid", uid)
	}
}

// TestRunStateFolderIsNosuidNodevAndKeepsNoSetuidFile: the program can make
// a setuid file in its state folder; it means nothing inside (nosuid), and
// egressd clears the bit after the run, so no setuid file owned by a
// sandbox uid stays on the host.
func TestRunStateFolderIsNosuidNodevAndKeepsNoSetuidFile(t *testing.T) {
	e := newSandboxEnv(t)
	out, errs, code := e.run(`grep ' /var/lib/integration ' /proc/self/mountinfo | cut -d' ' -f6; cp /bin/true /var/lib/integration/suid && chmod 6755 /var/lib/integration/suid && stat -c %a /var/lib/integration/suid`)
	opts := strings.Split(strings.Fields(out + " ")[0], ",")
	if code != 0 || !contains(opts, "nosuid") || !contains(opts, "nodev") || !strings.Contains(out, "6755") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
	st, err := os.Stat(filepath.Join(e.stateFolder("com.test.sandboxed"), "suid"))
	switch {
	case os.Geteuid() == 0 && !os.IsNotExist(err): // root: the file is inside the image, never on the host's tree
		t.Fatalf("after the run, on the host: %v", err)
	case os.Geteuid() != 0 && (err != nil || st.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0):
		t.Fatalf("after the run: %v %v", st, err)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// stateOnHost is what the integration's state takes on the host disk: its
// image (root) or its folder (a normal user), in allocated bytes.
func (e *sandboxEnv) stateOnHost(t *testing.T) int64 {
	var total int64
	base := e.stateFolder("com.test.sandboxed")
	image := filepath.Join(e.state, "sandbox-images", sandbox.StateImageName(filepath.Base(base)))
	for _, p := range []string{image, base} {
		filepath.Walk(p, func(_ string, fi os.FileInfo, err error) error {
			if err == nil {
				total += fi.Sys().(*syscall.Stat_t).Blocks * 512
			}
			return nil
		})
	}
	return total
}

// TestRunStateFolderCannotOutgrowItsBound: one run wrote 1 GB into the state
// folder, which stayed on the host. As root the state is an ext4 image of
// state_mb: the program gets ENOSPC. As a normal user (no loop device) each
// file is bounded by file_size_mb and the total is checked: over state_mb,
// egressd warns and the next run does not start.
func TestRunStateFolderCannotOutgrowItsBound(t *testing.T) {
	e := newSandboxEnv(t)
	fill := `for i in 1 2 3; do head -c 7m /dev/urandom > /var/lib/integration/f$i; done; echo wrote`
	out, errs, code := runCmd(t, e.configured(smallLimits, fill))
	if os.Geteuid() == 0 {
		if code != 0 || out != "wrote\n" || !strings.Contains(errs, "No space left on device") {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
		}
		if host := e.stateOnHost(t); host > 16<<20 || host < 14<<20 {
			t.Fatalf("the state takes %d bytes on the host disk, want the 16 MB image nearly full", host)
		}
		return
	}
	if code != 0 || out != "wrote\n" || !strings.Contains(errs, "over sandbox_limits.state_mb (16 MB)") {
		t.Fatalf("run 1: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	out, errs, code = runCmd(t, e.configured(smallLimits, `echo ran`))
	if code == 0 || out != "" || !strings.Contains(errs, "the state folder holds 21 MB in 3 files, over sandbox_limits.state_mb (16 MB)") {
		t.Fatalf("run 2: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// TestRunConcurrentRunsOfOneIntegrationShareItsState: two runs of one
// integration at once (an MCP host may start two) must both start and see
// one state, never mount the same filesystem twice.
func TestRunConcurrentRunsOfOneIntegrationShareItsState(t *testing.T) {
	e := newSandboxEnv(t)
	first := e.command(`echo one > /var/lib/integration/one; echo ready; i=0; ` +
		`while [ ! -e /var/lib/integration/two ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; echo first sees: $(ls /var/lib/integration)`)
	stdout, _ := first.StdoutPipe()
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	defer first.Process.Kill()
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || lines.Text() != "ready" {
		t.Fatalf("first run: %q", lines.Text())
	}
	second := e.command(`echo second sees: $(ls /var/lib/integration); echo two > /var/lib/integration/two`)
	for i, a := range second.Args {
		if a == e.audit {
			second.Args[i] = e.audit + ".second" // one audit file per process
		}
	}
	out, errs, code := runCmd(t, second)
	if code != 0 || !strings.Contains(out, "second sees: lost+found one") && !strings.Contains(out, "second sees: one") {
		t.Fatalf("second run: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if !lines.Scan() || !strings.Contains(lines.Text(), "one two") {
		t.Fatalf("first run: %q", lines.Text())
	}
	if err := first.Wait(); err != nil {
		t.Fatal(err)
	}
}

// TestRunStdoutIntoAFileStopsAtTheFileSizeBound is issue 19's fifth
// attacker, finding 6: the program's own writes stop at file_size_mb
// (SIGXFSZ), but through ">> out.log" egressd's relay wrote 400 MB, with no
// cap. The relay now writes at most file_size_mb into a regular file and
// then closes the pipe, so the program's next write fails.
func TestRunStdoutIntoAFileStopsAtTheFileSizeBound(t *testing.T) {
	e := newSandboxEnv(t)
	cmd := e.configured("sandbox_limits:\n  file_size_mb: 1\n", `head -c 3000000 /dev/zero; echo "rc=$?" >&2`)
	out, err := os.Create(filepath.Join(t.TempDir(), "out.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	var errs lockedBuffer
	cmd.Stdout, cmd.Stderr = out, &errs
	runErr := cmd.Run()
	st, _ := out.Stat()
	if st.Size() != 1<<20 || strings.Contains(errs.String(), "rc=0") {
		t.Fatalf("egressd: %v; the file holds %d bytes (want exactly 1 MiB) and the program's write %s:\n%s", runErr, st.Size(), "did not fail", errs.String())
	}
}
