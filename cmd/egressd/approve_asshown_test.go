package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/egressd/egressd/policy"
)

// TestApprovingAnIDChangeToAnIDAnotherFolderHoldsShowsThatFoldersListBeforeAsking
// is round 27's f7c: folder p (com.acme.old: api) changes its id to
// com.acme.fresh, which a hostile folder x already holds with api and
// evil.example. approve's preview and state list said the change "adds
// over com.acme.old 1.0.0: cdn.acme.example", but once approved x's list
// is in force for p; evil.example showed only in the line printed after
// approving. The preview now says what will be in force for p at its next
// load, and what that adds over what is in force for p now.
func TestApprovingAnIDChangeToAnIDAnotherFolderHoldsShowsThatFoldersListBeforeAsking(t *testing.T) {
	state, p, x := t.TempDir(), t.TempDir(), t.TempDir()
	loadAsServe(t, state, erpFolder(t, p, "com.acme.old", "1.0.0", "api.acme.example"))
	loadAsServe(t, state, erpFolder(t, x, "com.acme.fresh", "0.1.0", "api.acme.example", "evil.example"))
	if o := loadAsServe(t, state, erpFolder(t, p, "com.acme.fresh", "1.0.0", "api.acme.example", "cdn.acme.example")); o.Result != policy.Pending {
		t.Fatalf("p's id change: %+v", o)
	}
	inForce := "in force at the next load: com.acme.fresh 0.1.0 (api.acme.example evil.example)"
	adds := "adds over com.acme.old 1.0.0: evil.example\n"
	out, errs, code := runBinary(t, "approve", "--state", state, "--manifest", p)
	if code != exitUsage || !strings.Contains(out, inForce) || !strings.Contains(out, adds) || strings.Contains(out, "adds over com.acme.old 1.0.0: cdn") {
		t.Fatalf("the preview does not show what comes into force for p: exit %d\n%s%s", code, out, errs)
	}
	if list := stateList(t, state); !strings.Contains(list, inForce) || !strings.Contains(list, adds) || strings.Contains(list, "adds over com.acme.old 1.0.0: cdn") {
		t.Fatalf("state list understates p's change:\n%s", list)
	}
	out, errs, code = runBinary(t, "approve", "--state", state, "--manifest", p, "--yes")
	if code != exitOK || !strings.Contains(out, "approved com.acme.fresh 1.0.0") || !strings.Contains(out, inForce) || !strings.Contains(out, adds) {
		t.Fatalf("approve --yes: exit %d\n%s%s", code, out, errs)
	}
	loadAsServe(t, state, p)
	out, errs, code = runBinary(t, "explain", "--state", state, "--manifest", p, "evil.example")
	if code != exitOK || !strings.Contains(out, "evil.example is allowed for com.acme.fresh 0.1.0") {
		t.Fatalf("explain does not name the version whose list is in force: exit %d\n%s%s", code, out, errs)
	}
}

// TestApproveBindsNothingWhenVersionMemoryChangedWhileTheOperatorRead is
// round 27's f7 and f7b: while the y/N question waited on the terminal, a
// hostile folder loaded the id the operator's folder was about to take,
// and "y" then bound what was never shown (the folder's claim of the
// hostile folder's id, under its list). Now approve binds only what it
// showed: if version memory would bind anything else, nothing is written
// and it says so in one line.
func TestApproveBindsNothingWhenVersionMemoryChangedWhileTheOperatorRead(t *testing.T) {
	for _, c := range []struct {
		name  string
		setUp func(t *testing.T, state, mine string) []string // approve's arguments
	}{
		{"a first list (--new-id)", func(t *testing.T, state, mine string) []string {
			loadAsServe(t, state, erpFolder(t, t.TempDir(), "com.acme.seed", "1.0.0", "seed.acme.example"))
			erpFolder(t, mine, "com.acme.fresh", "1.0.0", "api.acme.example", "cdn.acme.example")
			return []string{"--state", state, "--new-id", "--manifest", mine}
		}},
		{"an id change", func(t *testing.T, state, mine string) []string {
			loadAsServe(t, state, erpFolder(t, mine, "com.acme.old", "1.0.0", "api.acme.example"))
			if o := loadAsServe(t, state, erpFolder(t, mine, "com.acme.fresh", "1.0.0", "api.acme.example", "cdn.acme.example")); o.Result != policy.Pending {
				t.Fatalf("id change: %+v", o)
			}
			return []string{"--state", state, "--manifest", mine}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			state, mine, hostile := t.TempDir(), t.TempDir(), t.TempDir()
			args := c.setUp(t, state, mine)
			erpFolder(t, hostile, "com.acme.fresh", "0.1.0", "api.acme.example", "evil.example")
			var before []byte
			shown, code := askedApproval{answer: "y", meanwhile: func() {
				loadAsServe(t, state, hostile)
				var err error
				if before, err = os.ReadFile(filepath.Join(state, "versions.json")); err != nil {
					t.Fatal(err)
				}
			}}.run(t, args...)
			if strings.Contains(shown[:strings.Index(shown, "[y/N]")], "evil.example") {
				t.Fatalf("the race was lost before the question: the preview already shows the hostile list:\n%s", shown)
			}
			answered := shown[strings.Index(shown, "[y/N]"):]
			if code != exitFail || !strings.Contains(answered, "version memory changed while you were reading; run the command again") ||
				strings.Count(strings.TrimSpace(answered), "\n") != 1 || strings.Contains(answered, "approved ") {
				t.Fatalf("approve after version memory changed under the question: exit %d\n%s", code, shown)
			}
			after, err := os.ReadFile(filepath.Join(state, "versions.json"))
			if err != nil || string(after) != string(before) {
				t.Fatalf("approve wrote version memory although it changed under the question (%v):\nbefore %s\nafter  %s", err, before, after)
			}
		})
	}
}

// TestApproveAsksOnlyAfterShowingOnTheTerminalWhatItAsksAbout is round
// 27's third finding: with stdout redirected to a file, approve asked y/N
// on the terminal without having shown the preview there, so the operator
// answered a question about something they never saw.
func TestApproveAsksOnlyAfterShowingOnTheTerminalWhatItAsksAbout(t *testing.T) {
	state, dir := t.TempDir(), t.TempDir()
	loadAsServe(t, state, erpFolder(t, dir, "com.acme.erp", "1.0.0", "erp.acme.example"))
	loadAsServe(t, state, erpFolder(t, dir, "com.acme.erp", "1.1.0", "erp.acme.example", "exfil.attacker.example"))
	redirect, err := os.Create(filepath.Join(t.TempDir(), "approve.out"))
	if err != nil {
		t.Fatal(err)
	}
	defer redirect.Close()
	shown, code := askedApproval{answer: "n", stdout: redirect}.run(t, "--state", state, "--digest", digestOf(t, dir), "com.acme.erp", "1.1.0")
	adds, asked := strings.Index(shown, "adds over com.acme.erp 1.0.0: exfil.attacker.example"), strings.Index(shown, "[y/N]")
	if code != exitFail || adds < 0 || asked < adds || !strings.Contains(shown, "to approve: com.acme.erp 1.1.0") {
		t.Fatalf("the terminal asked without showing what it asks about: exit %d\n%s", code, shown)
	}
	if list := stateList(t, state); !strings.Contains(list, "1.1.0 pending") {
		t.Fatalf("answered n, yet approved:\n%s", list)
	}
}
