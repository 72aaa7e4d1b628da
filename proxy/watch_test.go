package proxy

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
)

// An audit log or version memory beside the config file must not reload the
// policy: each reload writes an audit line, which would trigger the next.
func TestWatchIgnoresEgressdsOwnOutputBesideTheConfig(t *testing.T) {
	dir := t.TempDir()
	integ := filepath.Join(dir, "weather")
	root := filepath.Join(dir, "integrations")
	os.MkdirAll(integ, 0o755)
	w := WatchSetFor([]string{integ}, []string{root}, filepath.Join(dir, "egressd.yaml"))
	for _, tc := range []struct {
		name string
		op   fsnotify.Op
		want bool
	}{
		{"egressd.yaml", fsnotify.Write, true},
		{"egressd.yaml", fsnotify.Create, true}, // an editor's rename lands as a create
		{"weather/manifest.json", fsnotify.Rename, true},
		{"weather/voiceos.integration.json", fsnotify.Write, true},
		{"integrations/new-app", fsnotify.Create, true},
		{"integrations/old-app", fsnotify.Remove, true},
		{"audit.log", fsnotify.Write, false},
		{"audit.log.1", fsnotify.Create, false},
		{"state/versions.json", fsnotify.Write, false},
		{".egressd.yaml.swp", fsnotify.Write, false},
		{"weather/audit.log", fsnotify.Write, false},
		{"integrations/notes.txt", fsnotify.Write, false},
	} {
		if got := w.relevant(filepath.Join(dir, tc.name), tc.op); got != tc.want {
			t.Errorf("%s %v: relevant = %v, want %v", tc.name, tc.op, got, tc.want)
		}
	}
}

// Editors save by writing a temporary file and renaming it over the
// manifest; a new integration folder in a manifests root is a reload too.
func TestWatchReloadsOnAnEditorsRenameAndANewFolder(t *testing.T) {
	dir := t.TempDir()
	integ := filepath.Join(dir, "weather")
	root := filepath.Join(dir, "integrations")
	os.MkdirAll(integ, 0o755)
	os.MkdirAll(root, 0o755)
	manifest := filepath.Join(integ, "manifest.json")
	os.WriteFile(manifest, []byte("{}"), 0o600)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reloads := make(chan struct{}, 4)
	w, err := NewWatcher(func() WatchSet { return WatchSetFor([]string{integ}, []string{root}, "") }, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	go w.Run(ctx, func() { reloads <- struct{}{} })
	wait := func(what string) {
		t.Helper()
		select {
		case <-reloads:
		case <-time.After(10 * time.Second):
			t.Fatalf("no reload after %s", what)
		}
	}
	os.WriteFile(filepath.Join(dir, "audit.log"), []byte("line\n"), 0o600) // ignored
	tmp := filepath.Join(integ, ".manifest.json.tmp")
	os.WriteFile(tmp, []byte(`{"v":2}`), 0o600)
	os.Rename(tmp, manifest)
	wait("an editor's rename")
	os.Mkdir(filepath.Join(root, "new-app"), 0o755)
	wait("a new integration folder")
	select {
	case <-reloads:
		t.Fatal("one change reloaded twice")
	default:
	}
}

// The README allows an audit log beside the config file. egressd holds it
// open and writes it once per audited line, twice per connection: the
// watcher must not wake for those writes (with fsnotify, which always asks
// for IN_MODIFY, every line was an event to read and judge), and must
// still see the config edited in place.
func TestWatchSleepsThroughAuditLinesWrittenBesideTheConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "egressd.yaml")
	os.WriteFile(cfg, []byte("a: 1\n"), 0o600)
	audit, err := os.OpenFile(filepath.Join(dir, "audit.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer audit.Close()
	w, err := NewWatcher(func() WatchSet { return WatchSetFor(nil, nil, cfg) }, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.follow() // Run's first step: the folders' watches
	for range 100 {
		audit.Write([]byte(`{"event":"connect"}` + "\n"))
	}
	os.WriteFile(cfg, []byte("a: 2\n"), 0o600) // an edit in place, after the lines: inotify keeps the order
	for {
		select {
		case ev := <-w.fw.Events():
			if ev.Name != cfg {
				t.Fatalf("woken by %s (%v) before the config edit", ev.Name, ev.Op)
			}
			if !w.set.relevant(ev.Name, ev.Op) {
				t.Fatalf("the config edit (%v) is not relevant", ev.Op)
			}
			return
		case <-time.After(10 * time.Second):
			t.Fatal("the config edited in place was not seen")
		}
	}
}

// Every reload test and every egressd serve makes a Watcher; closing it
// must end its reader, or each one leaks a goroutine and an inotify
// descriptor blocked in read(2).
func TestAClosedWatcherLetsGoOfItsInotify(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "egressd.yaml")
	os.WriteFile(cfg, []byte("a: 1\n"), 0o600)
	w, err := NewWatcher(func() WatchSet { return WatchSetFor(nil, nil, cfg) }, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case _, open := <-w.fw.Events():
			if !open {
				return
			}
		case <-deadline:
			t.Fatal("the watcher's reader is still running after Close")
		}
	}
}

// TestLinksToEverNewFoldersShareOneWatchKey: the folder a link leads to
// is the integration's choice. Keyed by its name, each swap to a new
// folder in a mount that does not answer left one more stuck
// inotify_add_watch thread behind; keyed by the watched file and its
// place on the chain, the stuck call of one place refuses the next at
// once. A folder the operator named keeps its own key even when a link
// also leads there.
func TestLinksToEverNewFoldersShareOneWatchKey(t *testing.T) {
	dir := t.TempDir()
	manifest := filepath.Join(dir, "evil", "manifest.json")
	other := filepath.Join(dir, "acme", "manifest.json")
	set := WatchSet{Files: []string{manifest, other}}
	keyOf := func(final string) (string, string) {
		keys := set.watchKeys(resolution{{final: final}, {final: other}})
		return keys[filepath.Dir(final)], keys[filepath.Dir(other)]
	}
	k1, _ := keyOf("/mnt/evil/a1/m.json")
	k2, _ := keyOf("/mnt/evil/a2/m.json")
	if k1 == "" || k1 != k2 {
		t.Fatalf("links to two new folders: keys %q and %q, want one", k1, k2)
	}
	shared, own := keyOf(other) // the hostile's link leads into the neighbour's folder
	if want := "watch " + filepath.Dir(other); shared != want || own != want {
		t.Fatalf("the neighbour's folder: %q / %q, want %q", shared, own, want)
	}
}
