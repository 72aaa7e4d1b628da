//go:build !linux

package proxy

import "github.com/fsnotify/fsnotify"

// folderWatch is fsnotify's watcher where egressd has no inotify of its
// own (see folderwatch_linux.go).
type folderWatch struct{ *fsnotify.Watcher }

func newFolderWatch() (*folderWatch, error) {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	return &folderWatch{fw}, nil
}

func (w *folderWatch) Events() <-chan fsnotify.Event { return w.Watcher.Events }
func (w *folderWatch) Errors() <-chan error          { return w.Watcher.Errors }
