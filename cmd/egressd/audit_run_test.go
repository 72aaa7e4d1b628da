package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// dnsFlood is a Python program that sends one A query per random name
// under flood.example to the sandbox's resolver, as fast as it can, with
// metadata.google.internal hidden in the middle, and counts the answers.
const dnsFlood = `
import os, socket, struct, random, sys
ns = [l.split()[1] for l in open("/etc/resolv.conf") if l.startswith("nameserver")][0]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(2)
def q(name, i):
    hdr = struct.pack(">HHHHHH", i & 0xffff, 0x0100, 1, 0, 0, 0)
    body = b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0" + struct.pack(">HH", 1, 1)
    s.sendto(hdr + body, (ns, 53))
N = int(sys.argv[1])
answered = 0
for i in range(N):
    name = "metadata.google.internal" if i == N // 2 else "r%d-%x.flood.example" % (i, random.getrandbits(32))
    q(name, i)
    try:
        s.recv(512)
        answered += 1
    except socket.timeout:
        pass
print("answered=%d" % answered)
`

func TestRandomSubdomainFloodUnderRunFoldsIntoBoundedLines(t *testing.T) {
	e := newSandboxEnv(t)
	if _, err := exec.LookPath("python3"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("python3 is needed for the DNS flood")
		}
		t.Skip("no python3")
	}
	os.WriteFile(e.dir+"/flood.py", []byte(dnsFlood), 0o644)
	const queries = 20000
	start := time.Now()
	out, errs, code := e.run("python3 flood.py 20000")
	elapsed := time.Since(start)
	if code != 0 || !strings.Contains(out, "answered=") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	log := e.auditLog()
	lines, stands := 0, int64(0)
	for _, l := range strings.Split(strings.TrimSpace(log), "\n") {
		var ev map[string]any
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatal(err)
		}
		if ev["event"] != "dns" {
			continue
		}
		lines++
		stands += foldedCountOf(ev)
	}
	// Two classes can flood (not_allowlisted, and limit_exceeded past the
	// rate limit); each writes at most 4 names and one summary per
	// one-second window, plus the first name of each parent domain.
	windows := int(elapsed/time.Second) + 1
	t.Logf("%d queries in %v (%s): %d dns lines standing for %d queries, log %d bytes", queries, elapsed.Round(time.Millisecond), strings.TrimSpace(out), lines, stands, len(log))
	if lines > 2*(5+2)*windows {
		t.Fatalf("%d dns lines over %d window(s)", lines, windows)
	}
	if !strings.Contains(log, `metadata.google.internal`) {
		t.Fatalf("the metadata name hidden in the flood is not in the log")
	}
}

// foldedCountOf is how many queries a line stands for.
func foldedCountOf(ev map[string]any) int64 {
	if n, ok := ev["suppressed"].(float64); ok && n > 0 {
		return int64(n)
	}
	return 1
}
