package main

import (
	"os"
	"strings"
	"testing"
)

// TestAKeyedLogBrokenAtItsFirstLineIsNotCalledUnkeyed is issue 13's
// leftover from session 9: a keyed log whose first line was cut off or
// replaced verified as BROKEN "…, unkeyed (SHA-256)", which tells a
// reviewer the key is not needed. With no chain read, verify says it
// cannot tell.
func TestAKeyedLogBrokenAtItsFirstLineIsNotCalledUnkeyed(t *testing.T) {
	state, dir, key := t.TempDir(), erpFolder(t, t.TempDir(), "com.acme.erp", "1.0.0", "erp.acme.example"), testKey(t)
	file := unsandboxedRuns(t, state, dir, key, 1)[0]
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(data), "\n")
	for _, c := range []struct{ what, log string }{
		{"its genesis cut off", rest},
		{"its genesis replaced", "{\"seq\":1,\"junk\":true}\n" + rest},
	} {
		writeFile(t, file, c.log)
		out, errs, code := runBinary(t, "audit", "verify", "--key", key, file)
		if code != exitFail || !strings.HasPrefix(out, "BROKEN: ") || strings.Contains(out, "unkeyed") || !strings.Contains(out, "keyed or not: unknown") {
			t.Errorf("%s: exit %d\n%s%s", c.what, code, out, errs)
		}
	}
}
