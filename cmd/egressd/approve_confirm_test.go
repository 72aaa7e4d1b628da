package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// approveOnTerminal runs the built egressd approve with args on a real
// pseudo-terminal (stdin, stdout and stderr), answers the prompt, and
// returns everything the terminal showed and the exit status.
func approveOnTerminal(t *testing.T, answer string, args ...string) (string, int) {
	t.Helper()
	return askedApproval{answer: answer}.run(t, args...)
}

// askedApproval is one egressd approve that asks on a real
// pseudo-terminal: answer is typed once the question is on the terminal,
// after meanwhile (if set) has run, as another process would while the
// operator reads; stdout, if set, takes approve's standard output instead
// of the terminal (a redirect).
type askedApproval struct {
	answer    string
	meanwhile func()
	stdout    *os.File
}

// run runs approve with args and returns everything the terminal showed
// and the exit status.
func (q askedApproval) run(t *testing.T, args ...string) (string, int) {
	t.Helper()
	master, slave := openPTY(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, egressdBinary(t), append([]string{"approve"}, args...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	if q.stdout != nil {
		cmd.Stdout = q.stdout
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	chunks := make(chan string)
	go func() {
		defer close(chunks)
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			if n > 0 {
				chunks <- string(buf[:n])
			}
			if err != nil {
				return // EIO once the last holder of the terminal exits
			}
		}
	}()
	var shown strings.Builder
	for !strings.Contains(shown.String(), "[y/N]") {
		c, ok := <-chunks
		if !ok {
			cmd.Wait()
			t.Fatalf("approve on a terminal exited without asking:\n%s", shown.String())
		}
		shown.WriteString(c)
	}
	if q.meanwhile != nil {
		q.meanwhile()
	}
	if _, err := master.Write([]byte(q.answer + "\n")); err != nil {
		t.Fatal(err)
	}
	for c := range chunks {
		shown.WriteString(c)
	}
	cmd.Wait()
	return shown.String(), cmd.ProcessState.ExitCode()
}

// TestApproveShowsWhatItAddsAndAsksBeforeApproving is issue 13 (f13o item
// 4): egressd approve printed the hosts a pending version widens to only
// after it had approved them, so the operator learned what they had let
// through too late. It shows what it adds first; on a terminal it asks
// (y/N) and approves only on yes; with stdin not a terminal it refuses,
// in one line naming --yes, unless --yes is given.
func TestApproveShowsWhatItAddsAndAsksBeforeApproving(t *testing.T) {
	state, dir := t.TempDir(), t.TempDir()
	loadAsServe(t, state, erpFolder(t, dir, "com.acme.erp", "1.0.0", "erp.acme.example"))
	loadAsServe(t, state, erpFolder(t, dir, "com.acme.erp", "1.1.0", "erp.acme.example", "exfil.attacker.example"))
	args := []string{"--state", state, "--digest", digestOf(t, dir), "com.acme.erp", "1.1.0"}
	stillPending := func(when string) {
		t.Helper()
		if list := stateList(t, state); !strings.Contains(list, "1.1.0 pending") || strings.Contains(list, "approved 1.1.0") {
			t.Fatalf("%s: the widening was approved:\n%s", when, list)
		}
	}

	out, errs, code := runBinary(t, append([]string{"approve"}, args...)...)
	if code != exitUsage || !strings.Contains(out, "adds over com.acme.erp 1.0.0: exfil.attacker.example") || strings.Contains(out, "approved ") ||
		strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "--yes") {
		t.Fatalf("approve with stdin not a terminal, no --yes: exit %d\n%s%s", code, out, errs)
	}
	stillPending("stdin not a terminal")

	shown, code := approveOnTerminal(t, "n", args...)
	if code != exitFail || !strings.Contains(shown, "exfil.attacker.example") || strings.Contains(shown, "approved com.acme.erp") {
		t.Fatalf("approve on a terminal answered n: exit %d\n%s", code, shown)
	}
	stillPending("answered n")

	shown, code = approveOnTerminal(t, "y", args...)
	adds, asked, done := strings.Index(shown, "adds over com.acme.erp 1.0.0: exfil.attacker.example"), strings.Index(shown, "[y/N]"), strings.Index(shown, "approved com.acme.erp 1.1.0")
	if code != exitOK || adds < 0 || asked < adds || done < asked {
		t.Fatalf("approve on a terminal answered y: exit %d; what it adds must come before the question, the approval after:\n%s", code, shown)
	}
	if list := stateList(t, state); !strings.Contains(list, "1.1.0 approved, applies at the next load") {
		t.Fatalf("answered y, not approved:\n%s", list)
	}

	// An id change is shown as one before it is approved, and --yes
	// approves without asking.
	erpFolder(t, dir, "com.acme.erp2", "1.0.0", "erp.acme.example", "other.example")
	loadAsServe(t, state, dir)
	out, errs, code = runBinary(t, "approve", "--state", state, "--manifest", dir)
	if code != exitUsage || !strings.Contains(out, "the id change of "+dir+" from com.acme.erp") || !strings.Contains(out, "other.example") || strings.Contains(out, "approved ") {
		t.Fatalf("approve --manifest of an id change without --yes: exit %d\n%s%s", code, out, errs)
	}
	out, errs, code = runBinary(t, "approve", "--state", state, "--manifest", dir, "--yes")
	if code != exitOK || !strings.Contains(out, "approved com.acme.erp2 1.0.0") {
		t.Fatalf("approve --manifest --yes: exit %d\n%s%s", code, out, errs)
	}
	// A first list refused for want of --yes leaves no state folder
	// behind: nothing is written before the approval is confirmed.
	fresh := filepath.Join(t.TempDir(), "state")
	if out, errs, code := runBinary(t, "approve", "--state", fresh, "--new-id", "--manifest", dir); code != exitUsage || !strings.Contains(out, "to approve: com.acme.erp2 1.0.0") {
		t.Fatalf("approve --new-id without --yes: exit %d\n%s%s", code, out, errs)
	}
	if _, err := os.Stat(fresh); !os.IsNotExist(err) {
		t.Fatalf("an unconfirmed first list left %s behind (%v)", fresh, err)
	}
}
