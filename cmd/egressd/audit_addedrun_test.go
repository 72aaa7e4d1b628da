package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/egressd/egressd/audit"
)

// TestARunAddedBeforeAnIntegrationsRunsFailsVerifyWithCheckpoints is round
// 52's f2 and f3: a whole run forged before an integration's real runs
// (unkeyed and recomputed, or keyed with a retired key), whose first real
// run names no run before it, verified intact once the journal's
// checkpoints were given: they hold the real runs' own, so the broken
// link was only a note, and so was the forged run's lack of a
// checkpoint. With checkpoints given, every chain must have its own or be
// named by a covered run after it, and some chain must have its own.
func TestARunAddedBeforeAnIntegrationsRunsFailsVerifyWithCheckpoints(t *testing.T) {
	for _, keyed := range []bool{false, true} {
		state, dir := t.TempDir(), erpFolder(t, t.TempDir(), "com.acme.erp", "1.0.0", "erp.acme.example")
		var keyArgs []string
		var key []byte
		yaml := "audit:\n  checkpoints: stderr\n"
		if keyed {
			keyFile := testKey(t)
			keyArgs, key = []string{"--audit-key", keyFile}, readKey(t, keyFile)
		}
		cfg := filepath.Join(t.TempDir(), "run.yaml")
		writeFile(t, cfg, yaml)
		keyArgs = append(keyArgs, "--config", cfg)
		var files []string
		var journal strings.Builder
		for i := 0; i < 2; i++ {
			_, errs, code := runBinary(t, append(append([]string{"run", dir, "--insecure-env-only", "--state", state}, keyArgs...), "--", "true")...)
			m := regexp.MustCompile(`egressd run: audit log (\S+)`).FindStringSubmatch(errs)
			if code != 0 || m == nil {
				t.Fatalf("run: exit %d\n%s", code, errs)
			}
			files = append(files, m[1])
			journal.WriteString(errs)
		}
		ckpt := filepath.Join(t.TempDir(), "journal")
		writeFile(t, ckpt, journal.String())
		verifyArgs := []string{"audit", "verify", "--checkpoints", ckpt}
		if keyed {
			verifyArgs = append(verifyArgs, "--key", keyArgs[1]) // the --audit-key file
		}
		if out, errs, code := runBinary(t, append(verifyArgs, files...)...); code != exitOK {
			t.Fatalf("keyed %v: the real runs: exit %d\n%s%s", keyed, code, out, errs)
		}

		forged := filepath.Join(filepath.Dir(files[0]), "com.acme.erp.1.log")
		f, err := audit.OpenFile(forged, 0)
		if err != nil {
			t.Fatal(err)
		}
		log, err := audit.New(f, audit.Options{Key: key, Integration: "com.acme.erp"})
		if err != nil {
			t.Fatal(err)
		}
		log.Write(audit.Event{Kind: audit.Connect, Integration: "com.acme.erp", Decision: "allow", Host: "exfil.attacker.example", Port: 443})
		log.Close()
		f.Close()
		out, errs, code := runBinary(t, append(verifyArgs, append([]string{forged}, files...)...)...)
		if code != exitFail || !strings.Contains(out, "has no checkpoint in those given, and no run after it that the checkpoints cover names its end") {
			t.Fatalf("keyed %v: a run added before the real ones: exit %d\n%s%s", keyed, code, out, errs)
		}
		os.Remove(forged)

		// Round 53's f2: every run replaced by runs that name another
		// integration, so that each real checkpoint is set aside as
		// another integration's, and none is cross-checked.
		relabelled := filepath.Join(t.TempDir(), "com.acme.erp.2.log")
		if f, err = audit.OpenFile(relabelled, 0); err != nil {
			t.Fatal(err)
		}
		if log, err = audit.New(f, audit.Options{Key: key, Integration: "com.acme.erp-old"}); err != nil {
			t.Fatal(err)
		}
		log.Write(audit.Event{Kind: audit.Connect, Integration: "com.acme.erp", Decision: "allow", Host: "exfil.attacker.example", Port: 443})
		log.Close()
		f.Close()
		out, errs, code = runBinary(t, append(verifyArgs, relabelled)...)
		if code != exitFail || !strings.Contains(out, "none of the checkpoints given is of a chain in these files") {
			t.Fatalf("keyed %v: every run replaced by runs of another name: exit %d\n%s%s", keyed, code, out, errs)
		}
	}
}
