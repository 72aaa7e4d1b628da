package selftest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/egressd/egressd/internal/termsafe"
)

// fixes say what to do about an OPEN, by layer.
var fixes = map[string]string{
	LayerNetNS: "The program reached a network outside its own namespace. Run egressd run where it can create " +
		"namespaces (as root, or with unprivileged user namespaces allowed) and never with --insecure-env-only for code you do not trust.",
	LayerCapture: "A DNS-over-HTTPS server was reachable: check the config's exemptions (allow_private, allow_port, widen) and the " +
		"manifest's list; if neither names it, report this output as a bug.",
	LayerDNS: "A name the policy denies reached the upstream resolver (DNS exfiltration). Report this output as a bug.",
	LayerFS: "A host file, folder or socket is visible or writable inside the sandbox. Check what the manifest's command and " +
		"the config bind; if nothing should, report this output as a bug.",
	LayerLandlock: "Landlock is missing or off on this kernel (it needs Linux 5.13+ and \"landlock\" in the lsm= boot list). " +
		"Enable it: until then the mount namespace is the only filesystem layer.",
	LayerSeccomp: "A kernel interface the seccomp filter must close was reachable. Report this output (it names the kernel and " +
		"architecture) as a bug; meanwhile prefer a kernel without 32-bit emulation (ia32_emulation=0).",
	LayerCaps: "The program holds capabilities or may gain them. Report this output as a bug.",
	LayerEnv: "A launcher variable the manifest does not declare crossed. Remove it from env_passthrough and --env, or " +
		"unset it in the service's environment.",
	LayerFD:       "A descriptor leaked to egressd reached the program. Report this output as a bug; meanwhile have the launcher close its descriptors.",
	LayerPID:      "The program can reach another process (its descriptors, memory, variables, or signals). Report this output as a bug.",
	LayerUTS:      "The host's hostname is visible inside the sandbox. Report this output as a bug.",
	LayerCgroupNS: "The host's cgroup paths (the launcher's group, egressd's host pid) are visible inside the sandbox. Report this output as a bug.",
	LayerAudit: "The program's attempts to get out left no trace in egressd's audit log, so a reviewer cannot see them. " +
		"Report this output as a bug.",
	LayerTTY: "The program can reconfigure the terminal it shares with the user while it runs (echo, line discipline, output flow, " +
		"window size), or left it broken after egressd exited (run \"stty sane\" or \"reset\" to recover). " +
		"Run egressd run with its input not a terminal (</dev/null) until this is fixed, and report this output as a bug.",
}

// Fix says what to do about an OPEN probe.
func Fix(r Result) string {
	if r.Result != Open {
		return ""
	}
	if f, ok := fixes[r.Layer]; ok {
		return f
	}
	return "Nothing can be said to be closed: rerun with --json and report the output."
}

// WriteTable prints the report for a person.
func WriteTable(w io.Writer, r Report) {
	q := termsafe.String // what the probes saw may name anything: nothing paints or reorders the terminal
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROBE\tLAYER\tRESULT\tDETAIL")
	for _, p := range r.Probes {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", q(p.Name), q(p.Layer), q(p.Result), q(p.Detail))
	}
	tw.Flush()
	h := r.Host
	fmt.Fprintf(w, "\nhost: kernel %s %s, Landlock ABI %d, %s, root %v, mode %s\n", q(h.Kernel), q(h.Arch), h.LandlockABI, q(h.UserNS), h.Root, q(h.Mode))
	b := r.Bounds
	fmt.Fprintf(w, "bounds seen inside: processes %s, open files %s, address space %s, file size %s, stack %s, locked memory %s, nice %s, cgroup pids %s, cgroup memory %s\n",
		q(b.Processes), q(b.OpenFiles), q(b.AddrSpace), q(b.FileSize), q(b.Stack), q(b.LockedMem), q(b.Nice), q(b.CgroupPids), q(b.CgroupMem))
	var open []Result
	for _, p := range r.Probes {
		if p.Result == Open {
			open = append(open, p)
		}
	}
	if len(open) == 0 {
		fmt.Fprintln(w, "\nnothing is open.")
		return
	}
	fmt.Fprintf(w, "\n%d OPEN. What to do:\n", len(open))
	if h.Mode == "insecure-env-only" {
		fmt.Fprintln(w, "  --insecure-env-only runs the program with no sandbox: every OPEN above is what it allows.")
	}
	said := map[string]bool{}
	for _, p := range open {
		if !said[p.Layer] {
			said[p.Layer] = true
			fmt.Fprintf(w, "  %s: %s\n", q(p.Layer), q(Fix(p)))
		}
	}
}

// jsonResult adds the fix to a result for --json.
type jsonResult struct {
	Result
	Fix string `json:"fix,omitempty"`
}

// WriteJSON prints the report for CI and review records.
func WriteJSON(w io.Writer, r Report) error {
	out := struct {
		Probes []jsonResult `json:"probes"`
		Host   Host         `json:"host"`
		Bounds Bounds       `json:"bounds"`
		Open   int          `json:"open"`
	}{Host: r.Host, Bounds: r.Bounds}
	for _, p := range r.Probes {
		out.Probes = append(out.Probes, jsonResult{Result: p, Fix: Fix(p)})
		if p.Result == Open {
			out.Open++
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return err
	}
	_, err := w.Write(termsafe.JSON(buf.Bytes())) // a detail's bidi override as \u202e, as the table escapes it
	return err
}
