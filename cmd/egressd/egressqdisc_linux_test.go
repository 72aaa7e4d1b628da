package main

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
)

// TestRunDatagramFloodOverflowIsNotDroppedWhereNoCounterSees: CI's run of
// TestRunDatagramFloodPastEgressQueueIsCounted, on a loaded machine, found
// 1,472 of 40,000 datagrams neither audited nor counted. A TUN comes with a
// pfifo_fast qdisc in front of its own queue: what that qdisc drops is not
// in egress0's drop counter (and sendto still reports success), and what it
// still holds when egressd drains egress0 arrives after the drain. egress0
// has no qdisc now, so a packet is in the TUN's queue or counted dropped.
// The loss shows only under load, so this looks at the cause: the
// sandbox's egress0, seen from the host, has noqueue at its root.
func TestRunDatagramFloodOverflowIsNotDroppedWhereNoCounterSees(t *testing.T) {
	e := newSandboxEnv(t)
	cmd := e.command(`readlink /proc/self/ns/net; read x`)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "net:[") {
		t.Fatalf("the program's network namespace: %q %v", line, err)
	}
	ns := sandboxNetns(t, strings.TrimSpace(line))
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	link, err := h.LinkByName("egress0")
	if err != nil {
		t.Fatal(err)
	}
	qs, err := h.QdiscList(link)
	if err != nil {
		t.Fatal(err)
	}
	var roots []string
	for _, q := range qs {
		if q.Attrs().Parent == netlink.HANDLE_ROOT {
			roots = append(roots, q.Type())
		}
	}
	if len(roots) != 1 || roots[0] != "noqueue" {
		t.Fatalf("egress0's root qdiscs: %v, want only noqueue", roots)
	}
}

// sandboxNetns opens the network namespace a process of the sandbox
// names as want ("net:[inode]"), found through the host's /proc.
func sandboxNetns(t *testing.T, want string) vnetns.NsHandle {
	t.Helper()
	paths, _ := filepath.Glob("/proc/[0-9]*/ns/net")
	for _, p := range paths {
		if got, err := os.Readlink(p); err == nil && got == want {
			if ns, err := vnetns.GetFromPath(p); err == nil {
				return ns
			}
		}
	}
	t.Fatalf("no host process in %s", want)
	return 0
}
