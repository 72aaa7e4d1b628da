package selftest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// ProbeArg makes the egressd binary run the inner half. Only "egressd
// selftest" passes it.
const ProbeArg = "__egressd-selftest-probes"

// probeTimeout bounds one network attempt. Inside a working sandbox every
// attempt fails at once; a timeout means nothing refused it.
const probeTimeout = 1500 * time.Millisecond

// probe is one attack. It returns its result; the runner fills in the name
// and layer.
type probe struct {
	name  string
	layer string
	run   any // a check or a netCheck
}

type (
	check    = func(ctx context.Context, c *Config) (verdict, detail string)
	netCheck = func(ctx context.Context, c *Config) (verdict, detail string, reached []string)
)

func closed(format string, a ...any) (string, string)  { return Closed, fmt.Sprintf(format, a...) }
func opened(format string, a ...any) (string, string)  { return Open, fmt.Sprintf(format, a...) }
func skipped(format string, a ...any) (string, string) { return Skipped, fmt.Sprintf(format, a...) }

// battery is every probe but the last-resort signal to the init, which
// runs alone after the results are written.
func battery() []probe {
	var all []probe
	for _, group := range [][]probe{networkProbes(), fsProbes(), procProbes(), kernelProbes(), hostPoolProbes()} {
		all = append(all, group...)
	}
	return all
}

// workers bounds how many probes run at once: a sandbox with a small
// process limit counts threads too, and the battery must not trip it.
const workers = 8

// RunAll runs the probes concurrently and returns the results in battery
// order. A probe that panics is reported OPEN: a broken probe proves
// nothing closed.
func RunAll(ctx context.Context, c *Config) []Result {
	ps := battery()
	out := make([]Result, len(ps))
	var wg sync.WaitGroup
	slots := make(chan struct{}, workers)
	for i, p := range ps {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			defer func() {
				if r := recover(); r != nil {
					out[i] = Result{Name: p.name, Layer: p.layer, Result: Open, Detail: fmt.Sprintf("the probe itself failed: %v", r)}
				}
			}()
			r := Result{Name: p.name, Layer: p.layer}
			switch run := p.run.(type) {
			case netCheck:
				r.Result, r.Detail, r.Reached = run(ctx, c)
			case check:
				r.Result, r.Detail = run(ctx, c)
			default:
				r.Result, r.Detail = Open, "the probe has no check: nothing can be said to be closed"
			}
			out[i] = r
		}()
	}
	wg.Wait()
	return out
}

// inner is what the inner half writes: its results and the bounds it saw.
type inner struct {
	Probes []Result `json:"probes"`
	Bounds Bounds   `json:"bounds"`
	Done   bool     `json:"done"` // the signal-to-init probe ran and the sandbox survived it
}

// ProbeMain is the inner half: egressd __egressd-selftest-probes CONFIG.
// It writes its results to standard output, which egressd run passes to
// the program whatever the sandbox does with the state folder, then
// signals the sandbox's init last (a dead init takes the sandbox with it,
// which the outer half sees as a missing final line).
func ProbeMain(args []string) int {
	if len(args) == 2 && args[0] == "sleep" {
		time.Sleep(10 * time.Second) // a ptrace target
		return 0
	}
	if len(args) == 1 && args[0] == "noop" {
		return 0
	}
	if len(args) == 2 && args[0] == "killable" {
		return runKillableChild(args[1])
	}
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "selftest probes: want one JSON argument")
		return 2
	}
	var c Config
	if err := json.Unmarshal([]byte(args[0]), &c); err != nil {
		fmt.Fprintln(os.Stderr, "selftest probes:", err)
		return 2
	}
	noteInherited(c.LeakedFDs) // first, before any probe opens a descriptor
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	res := inner{Probes: RunAll(ctx, &c), Bounds: readBounds()}
	if err := writeResults(os.Stdout, res); err != nil {
		fmt.Fprintln(os.Stderr, "selftest probes:", err)
		return 1
	}
	res.Probes = append(res.Probes, signalInit(c.Sandboxed))
	res.Done = true
	if err := writeResults(os.Stdout, res); err != nil {
		fmt.Fprintln(os.Stderr, "selftest probes:", err)
		return 1
	}
	return 0
}

// resultsPrefix starts each results line: the outer half judges the last
// such line, and ignores anything else the program printed.
const resultsPrefix = "egressd-selftest-results "

// writeResults writes one results line in a single write, so that a line
// is never interleaved with another writer's bytes.
func writeResults(w io.Writer, in inner) error {
	data, err := json.Marshal(in)
	if err != nil {
		return err
	}
	_, err = w.Write(append(append([]byte(resultsPrefix), data...), '\n'))
	return err
}

// lastResults is the last complete results line in output: a line cut
// short by the program's death (no newline) does not count.
func lastResults(output []byte) (inner, error) {
	var in inner
	var line []byte
	lines := bytes.Split(output, []byte("\n"))
	for _, l := range lines[:len(lines)-1] {
		if bytes.HasPrefix(l, []byte(resultsPrefix)) {
			line = l[len(resultsPrefix):]
		}
	}
	if line == nil {
		return in, errors.New("no results line on its standard output")
	}
	return in, json.Unmarshal(line, &in)
}

// signalInit sends SIGQUIT to the sandbox's init, as a program that wants
// it dead would. Only an egressd init is signalled: outside a sandbox pid
// 1 is the host's init, which this probe never touches.
func signalInit(sandboxed bool) Result {
	r := Result{Name: "signal-init-sigquit", Layer: LayerPID}
	if why := initIsEgressds(sandboxed); why != "" {
		r.Result, r.Detail = skipped("%s: the host's init is never signalled", why)
		return r
	}
	// An init that forwards the signal to the program must not make the
	// program's own death look like the init's.
	signal.Ignore(unix.SIGQUIT)
	if err := unix.Kill(1, unix.SIGQUIT); err != nil {
		r.Result, r.Detail = closed("kill(1, SIGQUIT): %v", err)
		return r
	}
	// A dying init takes this process with it; surviving a while means
	// the signal was dropped or handled.
	time.Sleep(300 * time.Millisecond)
	r.Result, r.Detail = closed("the init ignored SIGQUIT")
	return r
}

// initIsEgressds says why pid 1 is not known to be egressd's init, or ""
// when it is: the parent of this process, and either named egressd-init or
// hidden from this process (hidepid) in a run egressd says is sandboxed.
func initIsEgressds(sandboxed bool) string {
	if os.Getppid() != 1 {
		return "pid 1 is not this program's parent (no pid namespace?)"
	}
	cmdline, err := os.ReadFile("/proc/1/cmdline")
	if err == nil && !hasPrefix(string(cmdline), "egressd-init") {
		return "pid 1 is not egressd's init (no pid namespace?)"
	}
	if err != nil && !sandboxed {
		return "pid 1 is hidden and egressd started no sandbox"
	}
	return ""
}

func hasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }

// errnoOf is the errno inside err, or 0.
func errnoOf(err error) unix.Errno {
	var e unix.Errno
	if errors.As(err, &e) {
		return e
	}
	return 0
}

func sortedKeys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func limit(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], fmt.Sprintf("and %d more", len(s)-n))
	}
	return s
}
