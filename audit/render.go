package audit

import (
	"embed"
	"fmt"
	"html/template"
	"io"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/egressd/egressd/internal/termsafe"
)

// WriteText renders the report for a terminal. Every string that came
// from the log (hosts, versions, reasons, policy details) is escaped: a log
// is written from what an integration and its manifest chose, and a control
// sequence in it must be shown, never obeyed.
func WriteText(w io.Writer, rep Report) error {
	q := termsafe.String
	if _, err := fmt.Fprintf(w, "%s\n\n", q(rep.Verification.Headline())); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	for _, ir := range rep.Integrations {
		versions := make([]string, len(ir.Versions))
		for i, v := range ir.Versions {
			versions[i] = q(v)
		}
		if ir.Claim != "" {
			fmt.Fprintf(tw, "== unapproved claim of %s from %s (versions %s): not that integration until the operator approves it\n", q(ir.ID), termsafe.ShellWord(ir.Claim), strings.Join(versions, ", "))
		} else {
			fmt.Fprintf(tw, "== %s (versions %s)\n", q(ir.ID), strings.Join(versions, ", "))
		}
		fmt.Fprintf(tw, "span:\t%s – %s\n", ir.First.Format(time.RFC3339), ir.Last.Format(time.RFC3339))
		fmt.Fprintln(tw, "\nreached:\thost\trule\tconnections\tbytes up\tbytes down")
		for _, u := range ir.Reached {
			fmt.Fprintf(tw, "\t%s\t%s\t%d\t%d\t%d\n", q(u.Host), q(u.Rule), u.Connections, u.BytesUp, u.BytesDown)
		}
		if len(ir.WouldDeny) > 0 {
			fmt.Fprintln(tw, "\nreached only because audit mode was on (would_deny):")
			for _, u := range ir.WouldDeny {
				fmt.Fprintf(tw, "\t%s\t\t%d\t%d\t%d\n", q(u.Host), u.Connections, u.BytesUp, u.BytesDown)
			}
		}
		if len(ir.ReachedThenRefused) > 0 {
			fmt.Fprintln(tw, "\nreached, then refused (bytes reached the origin before the refusal):\thost\trule\treason\tconnections\tsent only a ClientHello\tbytes up\tbytes down")
			for _, u := range ir.ReachedThenRefused {
				fmt.Fprintf(tw, "\t%s\t%s\t%s\t%d\t%d\t%d\t%d\n", q(u.Host), q(u.Rule), q(u.Reason), u.Connections, u.HelloOnly, u.BytesUp, u.BytesDown)
			}
		}
		writeUnused(tw, ir)
		if len(ir.Secrets) > 0 {
			fmt.Fprintln(tw, "\nsecrets added:\tsecret\thost\trequests")
			for _, u := range ir.Secrets {
				fmt.Fprintf(tw, "\t%s\t%s\t%d\n", q(u.Secret), q(u.Host), u.Requests)
			}
		}
		fmt.Fprintln(tw, "\nrefused:\tkind\treason\thost\tcount\tfirst\tlast")
		for _, f := range ir.Refused {
			fmt.Fprintf(tw, "\t%s\t%s\t%s\t%d\t%s\t%s\n", q(f.Kind), q(f.Reason), q(f.Host), f.Count, f.First.Format(time.RFC3339), f.Last.Format(time.RFC3339))
		}
		fmt.Fprintln(tw, "\npolicy:\ttime\tversion\tresult\tdetail")
		for _, c := range ir.Policy {
			detail := c.Error
			if c.Pending != "" {
				detail = "pending " + c.Pending + " awaits approval"
			}
			fmt.Fprintf(tw, "\t%s\t%s\t%s\t%s\n", c.Time.Format(time.RFC3339), q(c.Version), q(c.Action), q(detail))
		}
		fmt.Fprintln(tw)
	}
	writeUnattributed(tw, rep.Unattributed)
	return tw.Flush()
}

// writeUnused separates entries nothing asked for (remove them) from
// entries asked for that never connected (look into why).
func writeUnused(w io.Writer, ir IntegrationReport) {
	q := termsafe.String
	switch {
	case ir.Claim != "":
		fmt.Fprintln(w, "\nunused entries:\t(an unapproved claim: its manifest is not the id's list)")
		return
	case ir.Declared == nil:
		fmt.Fprintln(w, "\nunused entries:\t(manifest not found: pass --manifest)")
		return
	}
	if ir.DeclaredFrom != "" {
		fmt.Fprintf(w, "\njudged by:\t%s", q(ir.DeclaredFrom))
	}
	switch {
	case len(ir.Unused) == 0:
		fmt.Fprintln(w, "\nunused entries:\tnone: every declared entry was tried")
	default:
		unused := make([]string, len(ir.Unused))
		for i, e := range ir.Unused {
			unused[i] = q(e)
		}
		fmt.Fprintf(w, "\nunused entries:\t%s  (never tried; least privilege: remove them from the manifest)\n", strings.Join(unused, " "))
	}
	for _, t := range ir.TriedNeverConnected {
		reasons := make([]string, 0, len(t.Reasons))
		for r, n := range t.Reasons {
			reasons = append(reasons, fmt.Sprintf("%s ×%d", q(r), n))
		}
		sort.Strings(reasons)
		fmt.Fprintf(w, "tried, never connected:\t%s  (%d attempt(s): %s; every attempt failed, so this is not a removal finding)\n", q(t.Entry), t.Attempts, strings.Join(reasons, ", "))
	}
}

//go:embed report.html.tmpl
var templates embed.FS

// reportTemplate is parsed on first use, not at start-up: every egressd
// process (the sandbox's init included) would otherwise pay for it.
var reportTemplate = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("report.html.tmpl").Funcs(template.FuncMap{
		"timefmt": func(t time.Time) string { return t.Format("2006-01-02 15:04:05Z07:00") },
		"join":    strings.Join,
	}).ParseFS(templates, "report.html.tmpl"))
})

// WriteHTML renders the report as one self-contained page: inline CSS and
// SVG, no script, no remote load, under a Content-Security-Policy that
// forbids both. Every host name came from the integration's side and is
// escaped by html/template as text.
func WriteHTML(w io.Writer, rep Report) error {
	type bar struct {
		X, Y, W, H float64
		Label      string
		Value      int64
	}
	type view struct {
		IntegrationReport
		Traffic  []bar // allowed bars
		Refusals []bar // refused bars, stacked on allowed
		Reasons  []bar
		ChartH   float64
		ReasonsH int
	}
	var views []view
	for _, ir := range rep.Integrations {
		v := view{IntegrationReport: ir, ChartH: 120}
		var peak int64 = 1
		for _, b := range ir.Timeline {
			peak = max(peak, b.Allowed+b.Refused)
		}
		bw := 600.0 / float64(len(ir.Timeline))
		for i, b := range ir.Timeline {
			ha := 100 * float64(b.Allowed) / float64(peak)
			hr := 100 * float64(b.Refused) / float64(peak)
			x := float64(i) * bw
			v.Traffic = append(v.Traffic, bar{X: x, Y: 110 - ha, W: bw - 2, H: ha, Label: b.Start.Format(time.RFC3339), Value: b.Allowed})
			v.Refusals = append(v.Refusals, bar{X: x, Y: 110 - ha - hr, W: bw - 2, H: hr, Label: b.Start.Format(time.RFC3339), Value: b.Refused})
		}
		byReason := map[string]int64{}
		for _, f := range ir.Refused {
			byReason[f.Reason] += f.Count
		}
		reasons := make([]string, 0, len(byReason))
		var rpeak int64 = 1
		for r, n := range byReason {
			reasons = append(reasons, r)
			rpeak = max(rpeak, n)
		}
		sort.Strings(reasons)
		for i, r := range reasons {
			v.Reasons = append(v.Reasons, bar{X: 160, Y: float64(i*22 + 4), W: 400 * float64(byReason[r]) / float64(rpeak), H: 16, Label: r, Value: byReason[r]})
		}
		v.ReasonsH = len(reasons)*22 + 8
		views = append(views, v)
	}
	// Every name in the page came from the integration's side: besides
	// html/template's escaping, each rune the text report escapes (a bidi
	// override that reverses a folder name, a zero-width space) is written
	// as the text report writes it. The template itself holds none.
	page := termsafe.Text(w)
	if err := reportTemplate().Execute(page, map[string]any{"Report": rep, "Views": views}); err != nil {
		return err
	}
	return page.Flush()
}
