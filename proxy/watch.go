package proxy

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// WatchDirs calls reload after files change in any of dirs, once changes
// have settled for the debounce period. It watches folders, not files:
// editors save by writing a new file and renaming it over the old one,
// which a watch on the old file would miss. It returns when ctx is done.
func WatchDirs(ctx context.Context, dirs []string, settle time.Duration, reload func()) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer w.Close()
	for _, d := range dirs {
		if err := w.Add(d); err != nil {
			return err
		}
	}
	var timer *time.Timer
	fire := make(chan struct{}, 1)
	for {
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-w.Events:
			if !ok {
				return nil
			}
			if timer == nil {
				timer = time.AfterFunc(settle, func() {
					select {
					case fire <- struct{}{}:
					default:
					}
				})
			} else {
				timer.Reset(settle)
			}
		case <-fire:
			reload()
		case <-w.Errors:
		}
	}
}

// ManifestDirs returns the folders to watch for the given manifest paths
// (files or folders).
func ManifestDirs(paths []string) []string {
	seen := map[string]bool{}
	var dirs []string
	for _, p := range paths {
		d := p
		if st, err := os.Stat(p); err != nil || !st.IsDir() {
			d = filepath.Dir(p)
		}
		if !seen[d] {
			seen[d] = true
			dirs = append(dirs, d)
		}
	}
	return dirs
}
