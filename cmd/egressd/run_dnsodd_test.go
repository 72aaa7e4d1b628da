package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// oddDNSQueries sends the sandbox resolver a class CH query, a NOTIFY and
// a query with two questions, each naming an unlisted host, and prints
// each answer's rcode (or that none came).
const oddDNSQueries = `import socket, struct
def name(n): return b"".join(bytes([len(l)]) + l.encode() for l in n.split(".")) + b"\0"
def q(n, qclass=1, flags=0x0100, extra=b"", qd=1):
    return struct.pack("!HHHHHH", 0x1234, flags, qd, 0, 0, 0) + name(n) + struct.pack("!HH", 1, qclass) + extra
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(10)
for label, m in [("ch", q("ch-secret.one.example", qclass=3)),
                 ("notify", q("notify-secret.two.example", flags=4 << 11)),
                 ("qd2", q("qd2-secret.three.example", qd=2, extra=name("api.allowed.example") + struct.pack("!HH", 1, 1)))]:
    s.sendto(m, ("127.0.0.53", 53))
    try: print(label, "rcode", s.recv(600)[3] & 15, flush=True)
    except OSError as e: print(label, "no answer", e, flush=True)
`

// TestRunSandboxDNSAuditsTheOddQueriesItRefuses is issue 18's sixth
// review, end to end: inside egressd run, queries for unlisted names of
// class CH, with opcode NOTIFY, or with two questions were refused with no
// audit line, so a program could spell a secret into them unseen. Each is
// refused and in the run's audit log with the names it carried.
func TestRunSandboxDNSAuditsTheOddQueriesItRefuses(t *testing.T) {
	e := newSandboxEnv(t)
	if err := os.WriteFile(filepath.Join(e.dir, "odd.py"), []byte(oddDNSQueries), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errs, code := e.run(`exec /usr/bin/python3 odd.py`)
	if code != 0 || !strings.Contains(out, "ch rcode 5") || !strings.Contains(out, "notify rcode 4") || !strings.Contains(out, "qd2 rcode 1") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	log := e.auditLog()
	for _, want := range []string{
		`"reason":"bad_request","host":"ch-secret.one.example","host_raw":"ch-secret.one.example.","msg":"DNS query of class CH refused: only class IN is answered"`,
		`"reason":"bad_request","host":"notify-secret.two.example","host_raw":"notify-secret.two.example.","msg":"DNS message with opcode NOTIFY refused: only QUERY is answered"`,
		`"reason":"bad_request","host_raw":"qd2-secret.three.example. api.allowed.example.","msg":"DNS query with 2 questions refused: one question per query"`,
	} {
		if !strings.Contains(log, `"event":"dns"`) || !strings.Contains(log, want) {
			t.Fatalf("no %s in the audit log:\n%s", want, log)
		}
	}
}
