package proxy

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"unsafe"

	"github.com/fsnotify/fsnotify"
	"golang.org/x/sys/unix"
)

// folderMask is what a watched folder reports: entries coming, going,
// renamed or re-permissioned, and a file closed after writing. Not
// IN_MODIFY: that fires on every write(2) to any file in the folder, so
// an audit log kept beside the config (which the README allows) would
// wake the watcher twice per connection, for nothing relevant() keeps.
// An edit in place ends with a close, which IN_CLOSE_WRITE reports; a
// writer that never closes is seen by the Watcher's poll.
const folderMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_DELETE_SELF | unix.IN_MOVED_TO | unix.IN_MOVED_FROM |
	unix.IN_MOVE_SELF | unix.IN_ATTRIB | unix.IN_CLOSE_WRITE

// folderWatch is an inotify instance watching folders with folderMask, its
// events translated to fsnotify's ops so WatchSet.relevant reads them as
// it reads fsnotify's. fsnotify itself always asks for IN_MODIFY.
type folderWatch struct {
	f      *os.File // non-blocking: reads wait in the runtime's poller
	fd     int      // f's descriptor, kept: f.Fd() would make f blocking
	events chan fsnotify.Event
	errors chan error
	done   chan struct{} // closed by Close: read stops sending
	once   sync.Once

	mu   sync.Mutex
	dirs map[int]string // watch descriptor -> folder
}

func newFolderWatch() (*folderWatch, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, os.NewSyscallError("inotify_init1", err)
	}
	w := &folderWatch{f: os.NewFile(uintptr(fd), "inotify"), fd: fd, events: make(chan fsnotify.Event), errors: make(chan error, 1), done: make(chan struct{}), dirs: map[int]string{}}
	go w.read()
	return w, nil
}

func (w *folderWatch) Events() <-chan fsnotify.Event { return w.events }
func (w *folderWatch) Errors() <-chan error          { return w.errors }

// Add watches dir; adding a folder already watched is a no-op.
func (w *folderWatch) Add(dir string) error {
	wd, err := unix.InotifyAddWatch(w.fd, dir, folderMask)
	if err != nil {
		return &os.PathError{Op: "inotify_add_watch", Path: dir, Err: err}
	}
	w.mu.Lock()
	w.dirs[wd] = dir
	w.mu.Unlock()
	return nil
}

// Remove stops watching dir.
func (w *folderWatch) Remove(dir string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for wd, d := range w.dirs {
		if d == dir {
			delete(w.dirs, wd)
			_, err := unix.InotifyRmWatch(w.fd, uint32(wd))
			return err
		}
	}
	return nil
}

// Close releases the instance; the event channel closes.
func (w *folderWatch) Close() error {
	w.once.Do(func() { close(w.done) })
	return w.f.Close()
}

func (w *folderWatch) read() {
	defer close(w.events)
	buf := make([]byte, 64<<10)
	for {
		n, err := w.f.Read(buf)
		if err != nil {
			if !errors.Is(err, os.ErrClosed) {
				w.report(err)
			}
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			raw := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := buf[off+unix.SizeofInotifyEvent : min(n, off+unix.SizeofInotifyEvent+int(raw.Len))]
			off += unix.SizeofInotifyEvent + int(raw.Len)
			if raw.Mask&unix.IN_Q_OVERFLOW != 0 {
				w.report(fsnotify.ErrEventOverflow) // the Watcher's poll catches up
				continue
			}
			if ev, ok := w.event(int(raw.Wd), raw.Mask, name); ok {
				select {
				case w.events <- ev:
				case <-w.done:
					return
				}
			}
		}
	}
}

// event names the path an inotify event is about and its fsnotify op.
func (w *folderWatch) event(wd int, mask uint32, name []byte) (fsnotify.Event, bool) {
	w.mu.Lock()
	dir, ok := w.dirs[wd]
	if mask&unix.IN_IGNORED != 0 {
		delete(w.dirs, wd)
	}
	w.mu.Unlock()
	if !ok {
		return fsnotify.Event{}, false
	}
	var op fsnotify.Op
	for _, m := range []struct {
		mask uint32
		op   fsnotify.Op
	}{
		{unix.IN_CREATE | unix.IN_MOVED_TO, fsnotify.Create},
		{unix.IN_CLOSE_WRITE, fsnotify.Write},
		{unix.IN_DELETE | unix.IN_DELETE_SELF, fsnotify.Remove},
		{unix.IN_MOVED_FROM | unix.IN_MOVE_SELF, fsnotify.Rename},
		{unix.IN_ATTRIB, fsnotify.Chmod},
	} {
		if mask&m.mask != 0 {
			op |= m.op
		}
	}
	if op == 0 {
		return fsnotify.Event{}, false
	}
	path := dir
	if i := indexNUL(name); i > 0 {
		path = filepath.Join(dir, string(name[:i]))
	}
	return fsnotify.Event{Name: path, Op: op}, true
}

func (w *folderWatch) report(err error) {
	select {
	case w.errors <- err:
	default:
	}
}

func indexNUL(b []byte) int {
	for i, c := range b {
		if c == 0 {
			return i
		}
	}
	return len(b)
}
