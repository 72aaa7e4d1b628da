package proxy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/egressd/egressd/allowlist"
	"github.com/egressd/egressd/internal/bounded"
	"github.com/egressd/egressd/internal/safefile"
	"github.com/egressd/egressd/internal/workdir"
	"github.com/fsnotify/fsnotify"
)

// WatchSet is what a live reload depends on: Files, whose every change
// means reload (the config file, each manifest file), and Roots, folders of
// integration folders, where a folder appearing, going or being renamed
// means reload.
//
// It names files rather than whole folders because egressd's own output
// often sits beside them: an audit log next to its config file would
// otherwise reload the policy after every audited connection, and each
// reload's own audit line would trigger the next, four times a second,
// forever.
//
// A file is followed through every symbolic link on its path: a Kubernetes
// ConfigMap volume (manifest.json -> ..data/manifest.json, ..data ->
// ..2026_11_30_…), an "ln -sfn" deploy (current -> releases/v2) and an
// editor's rename all change what the path resolves to without writing the
// file itself. Each link on the way is watched, by name, in its folder.
type WatchSet struct {
	Files []string
	Roots []string

	resolved []string          // paths(), kept by a Watcher between checks
	watchKey map[string]string // folder -> its bounded key (watchKeys), with resolved
}

// WatchSetFor is the watch set of a config loaded from configFile ("" when
// the integrations came from flags). A manifest given as a folder stands
// for both manifest file names in it.
func WatchSetFor(manifests, roots []string, configFile string) WatchSet {
	var w WatchSet
	for _, m := range manifests {
		st, err := bounded.Run(context.Background(), &watchReads, "stat "+m, watchReadTimeout, func() statResult {
			st, err := os.Stat(m)
			return statResult{st, err}
		})
		if err == nil && st.err == nil && st.info.IsDir() {
			w.Files = append(w.Files, filepath.Join(m, allowlist.VoiceOSFile), filepath.Join(m, allowlist.SollarFile))
			continue
		}
		w.Files = append(w.Files, m)
	}
	if configFile != "" {
		w.Files = append(w.Files, configFile)
	}
	w.Roots = roots
	return w
}

// watchReads bounds each path walk and read of the watcher, as
// policy.Registry bounds manifest reads: a manifest linked into a file
// system that never answers must not stop the watcher (nor, at start,
// egressd) from following every other integration's files. A path that
// does not answer in time sums as unresolvable, as a missing file does,
// and is not walked again until its walk returns.
var watchReads bounded.Reads

// watchReadTimeout is how long the watcher waits for one walk or read.
const watchReadTimeout = 2 * time.Second

// notAnswering is what a walk or read that did not finish sums as: the
// same text every time, so a path that stays stuck is no change.
const notAnswering = "does not answer"

type listing struct {
	entries []os.DirEntry
	err     error
}

type statResult struct {
	info os.FileInfo
	err  error
}

// resolution is what each of a watch set's files resolves to, taken once
// per check: the fingerprint, the names relevant() keeps and the folders
// to watch all come from it.
type resolution []linkChain

// resolve follows each file's links, within resolveChain's bounds.
func (w WatchSet) resolve() resolution {
	out := make(resolution, len(w.Files))
	for i, f := range w.Files {
		c, err := bounded.Run(context.Background(), &watchReads, "walk "+f, watchReadTimeout, func() linkChain { return resolveChain(f) })
		if err != nil {
			c = linkChain{final: f, tooDeep: notAnswering}
		}
		out[i] = c
	}
	return out
}

// paths are the names whose change may change what Files resolve to: each
// file as named, each link on its way, and where it ends (where the walk
// stopped, for a path past the bounds).
func (w WatchSet) paths(r resolution) []string {
	var out []string
	for i, f := range w.Files {
		abs, err := workdir.Abs(f)
		if err != nil {
			abs = f
		}
		out = append(out, filepath.Clean(abs), r[i].final)
		out = append(out, r[i].links...)
	}
	return out
}

// watchKeys keys each folder's bounded inotify_add_watch. A folder where
// a link leads or a walk ends is the integration's choice, so it is keyed
// by the watched file and its place on the chain, not by its name: links
// to ever new folders in a mount that does not answer must not each leave
// a stuck thread behind (one per file and place at most). A folder the
// operator named (a watched file's own, a root) keeps its own name, and
// wins when both lead to it, so no integration's stuck call holds up the
// watch of a folder it shares with others.
func (w WatchSet) watchKeys(r resolution) map[string]string {
	keys := map[string]string{}
	for _, f := range w.Files {
		abs, err := workdir.Abs(f)
		if err != nil {
			abs = f
		}
		d := filepath.Dir(filepath.Clean(abs))
		keys[d] = "watch " + d
	}
	for _, root := range w.Roots {
		d := filepath.Clean(root)
		keys[d] = "watch " + d
	}
	for i, f := range w.Files {
		chosen := append([]string{r[i].final}, r[i].links...)
		for j, p := range chosen {
			d := filepath.Dir(p)
			if _, named := keys[d]; !named {
				keys[d] = fmt.Sprintf("watch %s (the folder at place %d of its link chain)", f, j) // never d: that is the integration's to vary
			}
		}
	}
	return keys
}

// dirs are the folders to watch. It watches folders, not files: editors
// save by writing a new file and renaming it over the old one, which a
// watch on the old file would miss.
func (w WatchSet) dirs() []string {
	var dirs []string
	for _, p := range w.resolved {
		dirs = append(dirs, filepath.Dir(p))
	}
	for _, r := range w.Roots {
		dirs = append(dirs, filepath.Clean(r))
	}
	slices.Sort(dirs)
	return slices.Compact(dirs)
}

// relevant reports whether an event on name should cause a reload check.
func (w WatchSet) relevant(name string, op fsnotify.Op) bool {
	name = filepath.Clean(name)
	paths := w.resolved
	if paths == nil {
		paths = w.paths(w.resolve())
	}
	if slices.Contains(paths, name) {
		return true
	}
	if !op.Has(fsnotify.Create) && !op.Has(fsnotify.Remove) && !op.Has(fsnotify.Rename) {
		return false // a write inside a root is some file's content, not a folder coming or going
	}
	dir := filepath.Dir(name)
	for _, r := range w.Roots {
		if dir == filepath.Clean(r) {
			return true
		}
	}
	return false
}

// fingerprint sums what the watch set resolves to: each file's final path
// and content, and each root's entries. A reload happens only when it
// changes, so a touched file or a link swapped for an identical one costs
// nothing. Files are opened without blocking and only regular files are
// read (at most maxWatchedFile bytes), so a FIFO cannot stall the watcher.
// A path past resolveChain's bounds is not opened at all: it sums as
// unresolvable, as a missing file does, until it resolves again.
func (w WatchSet) fingerprint(r resolution) string {
	h := sha256.New()
	for i, c := range r {
		io.WriteString(h, c.final+"\x00")
		if c.tooDeep != "" {
			io.WriteString(h, "unresolvable: "+c.tooDeep+"\x00")
			continue
		}
		// Keyed by the watched name, not where it leads: links to ever new
		// names must not each leave a stuck read behind.
		sum, err := bounded.Run(context.Background(), &watchReads, "read "+w.Files[i], watchReadTimeout, func() string { return contentSum(c.final) })
		if err != nil {
			sum = notAnswering
		}
		io.WriteString(h, sum+"\x00")
	}
	for _, r := range w.Roots {
		ls, err := bounded.Run(context.Background(), &watchReads, "list "+r, watchReadTimeout, func() listing {
			entries, err := safefile.ReadDir(r) // no terminal, no FIFO: only a folder
			return listing{entries, err}
		})
		io.WriteString(h, r+"\x00")
		switch {
		case err != nil:
			io.WriteString(h, notAnswering+"\x00")
		case ls.err != nil:
			io.WriteString(h, "unreadable\x00")
		}
		for _, e := range ls.entries {
			io.WriteString(h, e.Name()+"\x00")
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

const maxWatchedFile = 4 << 20

// contentSum sums what path resolves to through safefile, which opens
// only a regular file, never blocking (a FIFO) and never with a terminal
// becoming egressd's controlling one: an integration linked its manifest
// to a pty it held, and egressd, a session leader without a terminal under
// systemd, took it, so the integration's ^C stopped every integration.
func contentSum(path string) string {
	f, err := safefile.OpenRegular(path)
	if err != nil {
		return "not a regular file: " + err.Error()
	}
	defer f.Close()
	h := sha256.New()
	io.Copy(h, io.LimitReader(f, maxWatchedFile))
	return hex.EncodeToString(h.Sum(nil))
}

// Watcher calls reload after what its watch set resolves to changes, once
// changes have settled for the debounce period. It also re-checks every
// poll period, so a change made where no watch could see it (a folder
// above the watched ones swapped) is picked up within that period.
type Watcher struct {
	fw      *folderWatch
	current func() WatchSet
	set     WatchSet
	print   string
	watched []string
	settle  time.Duration
	poll    time.Duration
}

// watchPoll is how often the watch set is re-checked without an event.
const watchPoll = 10 * time.Second

// NewWatcher takes the first fingerprint of current(); Run adds the
// folders' watches. current is asked again after each reload, since a
// reload can add integrations.
//
// No watch is added here: inotify_add_watch walks a path the integration
// chose, which can lead into a file system that never answers, and a
// caller waiting on it (serve, before its listeners opened) waited
// forever. Every watch is added by follow, bounded, on Run's goroutine.
func NewWatcher(current func() WatchSet, settle time.Duration) (*Watcher, error) {
	fw, err := newFolderWatch()
	if err != nil {
		return nil, err
	}
	w := &Watcher{fw: fw, current: current, set: current(), settle: settle, poll: watchPoll}
	r := w.set.resolve()
	w.set.resolved = w.set.paths(r)
	w.print = w.set.fingerprint(r)
	return w, nil
}

// AssumeChanged makes Run's first check reload whatever the files hold:
// for a watcher whose first fingerprint may have been taken after the
// first load read the files, so that a change made in between is not
// missed (at worst one reload too many).
func (w *Watcher) AssumeChanged() { w.print = "" }

// StuckWatches names the watcher's file-system calls (walks, reads,
// listings, inotify watches) that have not returned within their
// deadline: the paths whose changes are not followed until they do.
func StuckWatches() []string { return watchReads.Stuck(watchReadTimeout) }

// Close releases a watch that will not Run.
func (w *Watcher) Close() { w.fw.Close() }

// Run calls reload after each settled change until ctx is done, then
// releases the watch.
func (w *Watcher) Run(ctx context.Context, reload func()) {
	defer w.fw.Close()
	timer := time.NewTimer(w.settle)
	timer.Stop()
	defer timer.Stop()
	poll := time.NewTicker(w.poll)
	defer poll.Stop()
	// The watches first, then a check against NewWatcher's fingerprint:
	// a change made before a folder's watch was added is seen by the
	// check, one made after by the watch.
	w.follow()
	w.check(reload)
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.fw.Events():
			if !ok {
				return
			}
			if w.set.relevant(ev.Name, ev.Op) {
				timer.Reset(w.settle)
			}
		case <-timer.C:
			w.check(reload)
		case <-poll.C:
			w.check(reload)
		case <-w.fw.Errors():
		}
	}
}

// check reloads if what the watch set resolves to changed, then follows
// the (possibly new) set: links swapped, folders added or gone.
//
// The fingerprint kept is the one taken before the reload read the files,
// so a change made while it reads is seen at the next check (at worst one
// reload too many, never one too few). Only when the reload changed the
// set itself is the new set's fingerprint taken afresh. Each check
// resolves each file once (three times before: one integration's link
// chains then cost three bounded walks where one does).
func (w *Watcher) check(reload func()) {
	r := w.set.resolve()
	print := w.set.fingerprint(r)
	if print != w.print {
		reload()
	}
	next := w.current()
	if !slices.Equal(next.Files, w.set.Files) || !slices.Equal(next.Roots, w.set.Roots) {
		r = next.resolve()
		print = next.fingerprint(r)
	}
	w.set, w.print = next, print
	w.set.resolved = w.set.paths(r)
	w.set.watchKey = w.set.watchKeys(r)
	w.follow()
}

// follow watches the folders of the current set and stops watching the
// others. Each inotify_add_watch is bounded like every other call on a
// path an integration controls: one that does not return in time leaves
// that folder unwatched (the poll still sees its changes) and is not
// tried again until it returns, and the other folders are still watched.
func (w *Watcher) follow() {
	dirs := w.set.dirs()
	for _, d := range w.watched {
		if !slices.Contains(dirs, d) {
			w.fw.Remove(d)
		}
	}
	var watched []string
	for _, d := range dirs {
		// Added again each time: a no-op for a folder still watched, and
		// it watches anew a folder removed and made again.
		key := w.set.watchKey[d]
		if key == "" {
			key = "watch " + d
		}
		err, stuck := bounded.Run(context.Background(), &watchReads, key, watchReadTimeout, func() error { return w.fw.Add(d) })
		if stuck == nil && err == nil {
			watched = append(watched, d) // a missing folder is tried at the next check
		}
	}
	w.watched = watched
}
