package lint

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

// TestMain lets the test binary act, re-executed, as the probes the fence
// test runs inside its namespaces under the app's and the sidecar's uids.
func TestMain(m *testing.M) {
	if mode := os.Getenv("FENCE_MODE"); mode != "" {
		os.Exit(probe(mode, os.Args[1:]))
	}
	os.Exit(m.Run())
}

// probe modes:
//
//	listen ADDR...   TCP and UDP on each ADDR; prints "ready", then "tcp TAG" / "udp TAG" for each arrival
//	dial tcp|udp ADDR TAG   sends TAG; prints "ok" or "err ..."
//	serve ADDR       accepts one TCP connection, answers "pong" to a line; prints "ready"
func probe(mode string, args []string) int {
	switch mode {
	case "listen":
		for _, a := range args {
			ln, err := net.Listen("tcp", a)
			if err != nil {
				fmt.Println("err", err)
				return 1
			}
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					go func() {
						defer c.Close()
						line, _ := bufio.NewReader(c).ReadString('\n')
						fmt.Println("tcp", strings.TrimSpace(line))
					}()
				}
			}()
			pc, err := net.ListenPacket("udp", a)
			if err != nil {
				fmt.Println("err", err)
				return 1
			}
			go func() {
				buf := make([]byte, 512)
				for {
					n, _, err := pc.ReadFrom(buf)
					if err != nil {
						return
					}
					fmt.Println("udp", string(buf[:n]))
				}
			}()
		}
		fmt.Println("ready")
		io.Copy(io.Discard, os.Stdin) // until the test closes stdin
		return 0
	case "dial":
		c, err := net.DialTimeout(args[0], args[1], 10*time.Second)
		if err != nil {
			fmt.Println("err", err)
			return 0
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := fmt.Fprintln(c, args[2]); err != nil {
			fmt.Println("err", err)
			return 0
		}
		if args[0] == "tcp" && len(args) > 3 { // expect an answer
			line, err := bufio.NewReader(c).ReadString('\n')
			if err != nil {
				fmt.Println("err", err)
				return 0
			}
			fmt.Println("ok", strings.TrimSpace(line))
			return 0
		}
		fmt.Println("ok")
		return 0
	case "serve":
		ln, err := net.Listen("tcp", args[0])
		if err != nil {
			fmt.Println("err", err)
			return 1
		}
		fmt.Println("ready")
		c, err := ln.Accept()
		if err != nil {
			return 1
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		bufio.NewReader(c).ReadString('\n')
		fmt.Fprintln(c, "pong")
		return 0
	}
	return 2
}

// fenceSpec reads the example's fence script and the two uids.
func fenceSpec(t *testing.T) (script string, appUID, sidecarUID int64) {
	for name, doc := range documents(t) {
		var d appsv1.Deployment
		if err := yaml.Unmarshal(doc, &d); err != nil || d.Kind != "Deployment" {
			continue
		}
		spec := d.Spec.Template.Spec
		for _, c := range spec.InitContainers {
			if c.Name == "egress-fence" {
				script = c.Args[0]
			}
		}
		for _, c := range spec.Containers {
			if c.Name == "egressd" {
				sidecarUID = *c.SecurityContext.RunAsUser
			} else {
				appUID = *c.SecurityContext.RunAsUser
			}
		}
		if script == "" {
			t.Fatalf("%s: no egress-fence script", name)
		}
		return script, appUID, sidecarUID
	}
	t.Fatal("no Deployment")
	return
}

func need(t *testing.T, tools ...string) {
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil || os.Geteuid() != 0 {
			if os.Getenv("CI") == "true" {
				t.Fatalf("the fence test needs root and %s in CI", tool)
			}
			t.Skipf("needs root and %s", tool)
		}
	}
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}

// TestFenceDropsTheAppsOwnTrafficAndPassesRepliesAndTheSidecar runs the
// example's egress-fence script for real, in a pod network namespace the
// test creates, joined by a veth pair to a peer namespace that stands for
// the node and the rest of the network (192.0.2.2, 2001:db8:1::2). Under
// the app's uid: TCP, UDP (DNS) and IPv6 out are refused; under the
// sidecar's uid they pass; and an inbound connection to the app (an
// integration that serves) gets its replies. Each refusal is checked by an
// event: the sidecar's marker, sent after the app's probe on the same
// path, arrives and the app's does not.
func TestFenceDropsTheAppsOwnTrafficAndPassesRepliesAndTheSidecar(t *testing.T) {
	need(t, "ip", "iptables", "ip6tables", "setpriv")
	script, appUID, sidecarUID := fenceSpec(t)
	suffix := strconv.Itoa(os.Getpid())
	pod, peer := "fence-pod-"+suffix, "fence-peer-"+suffix
	for _, ns := range []string{pod, peer} {
		run(t, "ip", "netns", "add", ns)
		t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
		run(t, "ip", "-n", ns, "link", "set", "lo", "up")
	}
	run(t, "ip", "-n", pod, "link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns", peer)
	for ns, last := range map[string]string{pod: "1", peer: "2"} {
		run(t, "ip", "-n", ns, "addr", "add", "192.0.2."+last+"/24", "dev", "eth0")
		run(t, "ip", "-n", ns, "addr", "add", "2001:db8:1::"+last+"/64", "dev", "eth0", "nodad")
		run(t, "ip", "-n", ns, "link", "set", "eth0", "up")
	}
	run(t, "ip", "netns", "exec", pod, "sh", "-c", script)

	// The probes run as other uids: the binary must be theirs to execute.
	dir, err := os.MkdirTemp("", "fence-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	bin := filepath.Join(dir, "probe")
	self, _ := os.ReadFile(os.Args[0])
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	as := func(ns string, uid int64, mode string, args ...string) *exec.Cmd {
		u := strconv.FormatInt(uid, 10)
		cmd := exec.Command("ip", append([]string{"netns", "exec", ns, "setpriv", "--reuid", u, "--regid", u, "--clear-groups", "--", bin}, args...)...)
		cmd.Env = append(os.Environ(), "FENCE_MODE="+mode)
		return cmd
	}

	// The peer listens on TCP and UDP, IPv4 and IPv6, port 53 (DNS) and 443.
	listener := exec.Command("ip", "netns", "exec", peer, bin, "192.0.2.2:53", "[2001:db8:1::2]:53", "192.0.2.2:443", "[2001:db8:1::2]:443")
	listener.Env = append(os.Environ(), "FENCE_MODE=listen")
	stdin, _ := listener.StdinPipe()
	stdout, _ := listener.StdoutPipe()
	if err := listener.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); listener.Wait() })
	arrivals := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			arrivals <- sc.Text()
		}
		close(arrivals)
	}()
	if first := <-arrivals; first != "ready" {
		t.Fatalf("peer listener: %s", first)
	}
	var arrived []string
	waitArrival := func(want string) {
		t.Helper()
		for {
			select {
			case a, ok := <-arrivals:
				if !ok {
					t.Fatalf("the peer listener ended before %q arrived", want)
				}
				arrived = append(arrived, a)
				if a == want {
					return
				}
			case <-time.After(30 * time.Second): // a failsafe, not a measure
				t.Fatalf("%q never arrived; arrived: %v", want, arrived)
			}
		}
	}
	dial := func(uid int64, network, addr, tag string) string {
		out, _ := as(pod, uid, "dial", network, addr, tag).CombinedOutput()
		return strings.TrimSpace(string(out))
	}

	for i, c := range []struct{ network, addr string }{
		{"tcp", "192.0.2.2:443"}, {"tcp", "[2001:db8:1::2]:443"}, // the node and the network, IPv4 and IPv6
		{"udp", "192.0.2.2:53"}, {"udp", "[2001:db8:1::2]:53"}, // DNS of its own
	} {
		appTag, sideTag := fmt.Sprintf("app-%d", i), fmt.Sprintf("sidecar-%d", i)
		appOut := dial(appUID, c.network, c.addr, appTag)
		if c.network == "tcp" && strings.HasPrefix(appOut, "ok") {
			t.Errorf("the app's own %s to %s connected: %s", c.network, c.addr, appOut)
		}
		if out := dial(sidecarUID, c.network, c.addr, sideTag); !strings.HasPrefix(out, "ok") {
			t.Fatalf("the sidecar's %s to %s: %s", c.network, c.addr, out)
		}
		waitArrival(c.network + " " + sideTag)
		for _, a := range arrived {
			if a == c.network+" "+appTag {
				t.Errorf("the app's own %s to %s arrived", c.network, c.addr)
			}
		}
	}

	// An integration that serves: a peer connects in, the app answers.
	server := as(pod, appUID, "serve", "192.0.2.1:8080")
	srvOut, _ := server.StdoutPipe()
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Process.Kill(); server.Wait() })
	if line, _ := bufio.NewReader(srvOut).ReadString('\n'); strings.TrimSpace(line) != "ready" {
		t.Fatalf("app server: %q", line)
	}
	in := exec.Command("ip", "netns", "exec", peer, bin, "tcp", "192.0.2.1:8080", "ping", "answer")
	in.Env = append(os.Environ(), "FENCE_MODE=dial")
	out, _ := in.CombinedOutput()
	if got := strings.TrimSpace(string(out)); got != "ok pong" {
		t.Fatalf("a connection into the app got no reply through the fence: %s", got)
	}
}
