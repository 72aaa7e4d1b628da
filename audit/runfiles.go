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
)

// runFileRest is what follows "STEM." in the name of a file of egressd
// run's: PID.log or PID.N.log (its own file), then a rotated suffix, if
// any: .1 (logrotate's rename), -DATE (logrotate's dateext) or
// .<timestamp> (audit.max_size_mb), and .gz after it (logrotate's
// compress; see openLog). A pid is digits, so the glob
// STEM.*.log also matched another integration whose id is STEM.x.
var runFileRest = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?\.log(\.[0-9]+|-[0-9]{8,10}|\.[0-9]{8}T[0-9]{6}\.[0-9]{9}Z)?(\.gz)?$`)

// RunFiles finds the files of egressd run's runs of one integration, given
// as STATE/audit/STEM (STEM the id, or ID@claim), and orders them as
// verify wants them: runs in the order they started, each run's files in
// the order it wrote them (by the time of each file's first line, its
// genesis: a run's start, or the moment a rotation continued it). Runs of
// one id may overlap, so a run rotated after the next one started still
// has all its files before the next run's. An id may hold
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
		path, chain string
		at          time.Time
	}
	var files []found
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), stem+".")
		if !ok || !runFileRest.MatchString(rest) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		g, err := firstLine(path)
		if err != nil {
			return nil, err
		}
		if g.name != "" && g.name != stem {
			continue
		}
		files = append(files, found{path, g.chain, g.at})
	}
	started := map[string]time.Time{} // each run's start: its first genesis
	for _, f := range files {
		if t, ok := started[f.chain]; !ok || f.at.Before(t) {
			started[f.chain] = f.at
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no run files (%s.PID.log) there", dir, stem)
	}
	sort.SliceStable(files, func(i, j int) bool {
		si, sj := started[files[i].chain], started[files[j].chain]
		if !si.Equal(sj) {
			return si.Before(sj)
		}
		if files[i].chain != files[j].chain {
			return files[i].chain < files[j].chain
		}
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

// runGenesis is what RunFiles reads of a file's first line.
type runGenesis struct {
	name, chain string // the integration it names, its chain
	at          time.Time
}

// firstLine reads the genesis that begins a run file. A file that does not
// begin with one is an error naming it: verify would fail on it, and the
// operator must see which.
func firstLine(path string) (runGenesis, error) {
	f, err := openLog(path)
	if err != nil {
		return runGenesis{}, err
	}
	defer f.Close()
	line, err := bufio.NewReaderSize(f, 64<<10).ReadSlice('\n')
	if len(line) == 0 && err != nil {
		return runGenesis{}, fmt.Errorf("%s: is empty: no run wrote to it (an egressd before 0.x left one when a run was refused at audit start); look, then remove it", path)
	}
	if err != nil {
		return runGenesis{}, fmt.Errorf("%s: its first line is not a whole audit line (an empty file, or not egressd's): %v", path, err)
	}
	var g struct {
		Event, Action, Msg, Time string
	}
	if json.Unmarshal(line, &g) != nil || g.Event != string(Lifecycle) || g.Action != "genesis" {
		return runGenesis{}, fmt.Errorf("%s: its first line is not a genesis record", path)
	}
	at, err := time.Parse(time.RFC3339Nano, g.Time)
	if err != nil {
		return runGenesis{}, fmt.Errorf("%s: its genesis time %q: %v", path, g.Time, err)
	}
	return runGenesis{msgField(g.Msg, "integration"), msgField(g.Msg, "chain"), at}, nil
}

// OneIntegration is the integration every chain verified names, or "" when
// they name none or several. A prune receipt names it too, so the receipt
// and the files kept still verify with a journal shared with other
// integrations (see ofOtherIntegration, which needs every chain named).
func (v Verdict) OneIntegration() string {
	name := ""
	for i, c := range v.Chains {
		if c.Integration == "" || (i > 0 && c.Integration != name) {
			return ""
		}
		name = c.Integration
	}
	return name
}
