package proxy

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/egressd/egressd/allowlist"
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
type WatchSet struct {
	Files []string
	Roots []string
}

// WatchSetFor is the watch set of a config loaded from configFile ("" when
// the integrations came from flags). A manifest given as a folder stands
// for both manifest file names in it.
func WatchSetFor(manifests, roots []string, configFile string) WatchSet {
	var w WatchSet
	for _, m := range manifests {
		if st, err := os.Stat(m); err == nil && st.IsDir() {
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

// dirs are the folders to watch. It watches folders, not files: editors
// save by writing a new file and renaming it over the old one, which a
// watch on the old file would miss.
func (w WatchSet) dirs() []string {
	seen := map[string]bool{}
	var dirs []string
	add := func(d string) {
		if d = filepath.Clean(d); !seen[d] {
			seen[d] = true
			dirs = append(dirs, d)
		}
	}
	for _, f := range w.Files {
		add(filepath.Dir(f))
	}
	for _, r := range w.Roots {
		add(r)
	}
	return dirs
}

// relevant reports whether an event on name should cause a reload.
func (w WatchSet) relevant(name string, op fsnotify.Op) bool {
	name = filepath.Clean(name)
	for _, f := range w.Files {
		if name == filepath.Clean(f) {
			return true
		}
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

// Watcher calls reload after anything in its watch set changes, once
// changes have settled for the debounce period.
type Watcher struct {
	fw      *fsnotify.Watcher
	current func() WatchSet
	set     WatchSet
	settle  time.Duration
}

// NewWatcher starts watching the folders of current(). current is asked
// again after each reload, since a reload can add integrations.
func NewWatcher(current func() WatchSet, settle time.Duration) (*Watcher, error) {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	w := &Watcher{fw: fw, current: current, set: current(), settle: settle}
	for _, d := range w.set.dirs() {
		if err := fw.Add(d); err != nil {
			fw.Close()
			return nil, err
		}
	}
	return w, nil
}

// Run calls reload after each settled change until ctx is done, then
// releases the watch.
func (w *Watcher) Run(ctx context.Context, reload func()) {
	defer w.fw.Close()
	timer := time.NewTimer(w.settle)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.fw.Events:
			if !ok {
				return
			}
			if w.set.relevant(ev.Name, ev.Op) {
				timer.Reset(w.settle)
			}
		case <-timer.C:
			reload()
			w.set = w.current()
			for _, d := range w.set.dirs() {
				w.fw.Add(d) // a folder already watched is a no-op; a missing one is tried at the next reload
			}
		case <-w.fw.Errors:
		}
	}
}
