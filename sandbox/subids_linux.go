package sandbox

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// idRange is the host ids [start, end): a range the admin delegates to a
// user, or one a user namespace maps. Ranges, not sets: one delegation
// may hold 2^32 ids.
type idRange struct{ start, end uint64 }

// idRanges are ranges no sandbox uid may come from.
type idRanges []idRange

// holding returns the range that holds id, if any.
func (rs idRanges) holding(id int) (idRange, bool) {
	for _, r := range rs {
		if uint64(id) >= r.start && uint64(id) < r.end {
			return r, true
		}
	}
	return idRange{}, false
}

// rangeOf is [start, start+count), the end held at 2^64-1 rather than
// wrapped.
func rangeOf(start, count uint64) idRange {
	end := start + count
	if end < start {
		end = ^uint64(0)
	}
	return idRange{start, end}
}

// subordinateFiles are where the admin delegates id ranges to users
// (shadow-utils' newuidmap and newgidmap read them).
var subordinateFiles = []string{"/etc/subuid", "/etc/subgid"}

// subordinateRanges returns the ranges subordinateFiles delegate
// ("name:start:count" lines), read as shadow reads them: each line is a C
// string, so it ends at its first NUL ("bob:START:COUNT\0" with no newline
// is a delegation to newuidmap). A missing file delegates nothing; one
// that cannot be read fails closed.
func subordinateRanges() (idRanges, error) {
	var ranges idRanges
	for _, path := range subordinateFiles {
		data, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
		for _, line := range strings.Split(string(data), "\n") {
			line, _, _ = strings.Cut(line, "\x00")
			f := strings.Split(strings.TrimSpace(line), ":")
			if len(f) < 3 { // shadow reads the first three fields and ignores the rest
				continue
			}
			start, ok1 := parseULong(f[1])
			count, ok2 := parseULong(f[2])
			if ok1 && ok2 {
				ranges = append(ranges, rangeOf(start, count))
			}
		}
	}
	return ranges, nil
}

// parseULong reads a number as shadow-utils' newuidmap does (strtoul with
// base 0, the whole field): leading blanks, "0x" hex, a leading 0 for
// octal, else decimal. A parser stricter than newuidmap's would miss a
// delegation newuidmap honours ("a12u:0x7805af25:1").
func parseULong(field string) (uint64, bool) {
	f := strings.TrimLeft(field, " \t\n\v\f\r")
	neg := strings.HasPrefix(f, "-") // strtoul negates in unsigned arithmetic: "-N" is 2^64-N
	f = strings.TrimPrefix(strings.TrimPrefix(f, "+"), "-")
	base := 10
	switch {
	case len(f) > 2 && (f[:2] == "0x" || f[:2] == "0X"):
		f, base = f[2:], 16
	case len(f) > 1 && f[0] == '0':
		f, base = f[1:], 8
	}
	if f == "" || strings.ContainsAny(f, "_+-") {
		return 0, false
	}
	n, err := strconv.ParseUint(f, base, 64)
	if neg {
		n = -n
	}
	return n, err == nil
}

// nsswitchPath is where shadow's libsubid (newuidmap, newgidmap, 4.13+)
// learns which source serves subordinate ids. Tests point it at a file
// they write.
var nsswitchPath = "/etc/nsswitch.conf"

// subidsFromFilesOnly fails unless subordinate ids come from
// subordinateFiles alone. A "subid: NAME" line in nsswitch.conf makes
// newuidmap ask libsubid_NAME.so (SSSD, FreeIPA) which ranges a user may
// map, and such a source cannot be asked which user, if any, holds a
// given uid: egressd could not tell whether a sandbox uid is delegated,
// so it refuses to pick one. Read more strictly than shadow does (any
// such line, leading blanks allowed, case ignored, up to a NUL): a line
// shadow skips refuses a pick it need not, never the other way round.
func subidsFromFilesOnly() error {
	data, err := os.ReadFile(nsswitchPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // shadow reads files then
	}
	if err != nil {
		return fmt.Errorf("read %s: %w (egressd cannot tell where subordinate ids come from)", nsswitchPath, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, len(data)+1)
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "\x00")
		line = strings.TrimLeft(line, " \t\v\f\r")
		if len(line) < len("subid:") || !strings.EqualFold(line[:len("subid:")], "subid:") {
			continue
		}
		sources := strings.Fields(line[len("subid:"):])
		if len(sources) == 0 || sources[0] == "files" { // shadow uses the first source only
			continue
		}
		return fmt.Errorf("%s:%d: %q serves subordinate ids through libsubid_%s.so, which cannot be asked who holds a uid, so egressd cannot give a root sandbox a uid no user can map; serve them from /etc/subuid and /etc/subgid (subid: files), or run egressd as a normal user",
			nsswitchPath, n, strings.TrimSpace(line), sources[0])
	}
	return sc.Err()
}
