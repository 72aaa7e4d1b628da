package audit

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/egressd/egressd/internal/safefile"
)

// runFileRest is what follows "STEM." in the name of a file of egressd
// run's: PID.log or PID.N.log (its own file), then a rotated suffix, if
// any: .1 (logrotate's rename), -DATE (logrotate's dateext) or
// .<timestamp> (audit.max_size_mb). A pid is digits, so the glob
// STEM.*.log also matched another integration whose id is STEM.x.
var runFileRest = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?\.log(\.[0-9]+|-[0-9]{8,10}|\.[0-9]{8}T[0-9]{6}\.[0-9]{9}Z)?$`)

// RunFiles finds the files of egressd run's runs of one integration, given
// as STATE/audit/STEM (STEM the id, or ID@claim), and orders them as
// verify wants them: by the time of each file's first line, its genesis
// (a run's start, or the moment a rotation continued it). An id may hold
// digit-only parts (com.acme.7), so a name alone may be another id's:
// a file whose genesis names another integration is left out. Files of
// egressd before genesis named one are chosen by name alone.
func RunFiles(prefix string) ([]string, error) {
	dir, stem := filepath.Dir(prefix), filepath.Base(prefix)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	type found struct {
		path string
		at   time.Time
	}
	var files []found
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), stem+".")
		if !ok || !runFileRest.MatchString(rest) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		name, at, err := firstLine(path)
		if err != nil {
			return nil, err
		}
		if name != "" && name != stem {
			continue
		}
		files = append(files, found{path, at})
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no run files (%s.PID.log) there", dir, stem)
	}
	sort.SliceStable(files, func(i, j int) bool {
		if !files[i].at.Equal(files[j].at) {
			return files[i].at.Before(files[j].at)
		}
		return files[i].path < files[j].path
	})
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = f.path
	}
	return out, nil
}

// firstLine reads the genesis that begins a run file: the integration it
// names and its time. A file that does not begin with one is an error
// naming it: verify would fail on it, and the operator must see which.
func firstLine(path string) (string, time.Time, error) {
	f, err := safefile.OpenRegular(path)
	if err != nil {
		return "", time.Time{}, err
	}
	defer f.Close()
	line, err := bufio.NewReaderSize(f, 64<<10).ReadSlice('\n')
	if len(line) == 0 && err != nil {
		return "", time.Time{}, fmt.Errorf("%s: is empty: no run wrote to it (an egressd before 0.x left one when a run was refused at audit start); look, then remove it", path)
	}
	if err != nil {
		return "", time.Time{}, fmt.Errorf("%s: its first line is not a whole audit line (an empty file, or not egressd's): %v", path, err)
	}
	var g struct {
		Event, Action, Msg, Time string
	}
	if json.Unmarshal(line, &g) != nil || g.Event != string(Lifecycle) || g.Action != "genesis" {
		return "", time.Time{}, fmt.Errorf("%s: its first line is not a genesis record", path)
	}
	at, err := time.Parse(time.RFC3339Nano, g.Time)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("%s: its genesis time %q: %v", path, g.Time, err)
	}
	return msgField(g.Msg, "integration"), at, nil
}
