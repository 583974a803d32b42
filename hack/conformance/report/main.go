// Command report turns the ginkgo JSON report of a NodeConformance run
// into a per-spec table and a per-area summary:
//
//	report -json report.json -label-filter 'NodeConformance && !Slow' \
//		-focus REGEX -out DIR
//
// It writes DIR/specs.tsv (area, status, spec, first line of the failure
// or skip reason, where it failed) and DIR/summary.md (counts per area,
// then the failed specs per area), and prints the summary. Only the specs
// the run selected (label filter and focus) are counted; one the run did
// not reach before its timeout is "not run". A failure outside any spec
// (the suite's set-up) is reported in area "suite".
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/onsi/ginkgo/v2/types"
)

// Statuses of a spec in the table.
const (
	passed  = "passed"
	failed  = "failed"
	skipped = "skipped"
	notRun  = "not run"
)

// areas in the order of the summary.
var areaOrder = []string{"pods", "probes", "volumes", "container runtime", "security context", "node API", "other", "suite"}

// row is one spec of the table.
type row struct {
	area, status, spec, reason, where string
}

func main() {
	var (
		jsonPath    = flag.String("json", "", "ginkgo JSON report (required)")
		labelFilter = flag.String("label-filter", "", "the run's label filter")
		focus       = flag.String("focus", "", "the run's focus regular expression")
		out         = flag.String("out", "", "directory for specs.tsv and summary.md (required)")
	)
	flag.Parse()
	if *jsonPath == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "report: -json and -out are required")
		os.Exit(2)
	}
	if err := run(*jsonPath, *labelFilter, *focus, *out, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}

func run(jsonPath, labelFilter, focus, out string, stdout io.Writer) error {
	data, err := os.ReadFile(jsonPath)
	if err != nil {
		return err
	}
	var reports []types.Report
	if err := json.Unmarshal(data, &reports); err != nil {
		return fmt.Errorf("%s: %w", jsonPath, err)
	}
	selected := func([]string) bool { return true }
	if labelFilter != "" {
		if selected, err = types.ParseLabelFilter(labelFilter); err != nil {
			return fmt.Errorf("-label-filter: %w", err)
		}
	}
	var focusRE *regexp.Regexp
	if focus != "" {
		if focusRE, err = regexp.Compile(focus); err != nil {
			return fmt.Errorf("-focus: %w", err)
		}
	}
	var rows []row
	for _, r := range reports {
		for _, s := range r.SpecReports {
			if s.LeafNodeType != types.NodeTypeIt {
				// Suite-level nodes matter only when they failed.
				if s.State.Is(types.SpecStateFailureStates) {
					rows = append(rows, row{area: "suite", status: failed, spec: s.LeafNodeType.String(),
						reason: firstLine(s.Failure.Message), where: location(s.Failure.Location)})
				}
				continue
			}
			if !selected(s.Labels()) || (focusRE != nil && !focusRE.MatchString(s.FullText())) {
				continue
			}
			rows = append(rows, classify(s))
		}
	}
	slices.SortFunc(rows, func(a, b row) int {
		if c := slices.Index(areaOrder, a.area) - slices.Index(areaOrder, b.area); c != 0 {
			return c
		}
		if c := strings.Compare(a.status, b.status); c != 0 {
			return c
		}
		return strings.Compare(a.spec, b.spec)
	})

	var tsv bytes.Buffer
	fmt.Fprintln(&tsv, "area\tstatus\tspec\treason\twhere")
	for _, r := range rows {
		fmt.Fprintf(&tsv, "%s\t%s\t%s\t%s\t%s\n", r.area, r.status, clean(r.spec), clean(r.reason), r.where)
	}
	summary := summarize(rows)
	if err := os.WriteFile(filepath.Join(out, "specs.tsv"), tsv.Bytes(), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "summary.md"), []byte(summary), 0o644); err != nil {
		return err
	}
	_, err = io.WriteString(stdout, summary)
	return err
}

// classify gives a spec its area, status and reason.
func classify(s types.SpecReport) row {
	r := row{area: area(s.LeafNodeLocation.FileName, s.FullText()), spec: s.FullText()}
	switch {
	case s.State == types.SpecStatePassed:
		r.status = passed
	case s.State == types.SpecStateSkipped && s.RunTime == 0 && s.Failure.Message == "":
		r.status = notRun
	case s.State == types.SpecStateSkipped || s.State == types.SpecStatePending:
		r.status = skipped
		r.reason = firstLine(s.Failure.Message)
	case s.State.Is(types.SpecStateFailureStates):
		r.status = failed
		r.reason = firstLine(s.Failure.Message)
		if r.reason == "" {
			r.reason = s.State.String()
		}
		r.where = location(s.Failure.Location)
	default:
		r.status = notRun
	}
	return r
}

// area names the part of the node a spec exercises, by the file that
// defines it (test/e2e/common/node/pods.go and the like) and its text.
func area(file, text string) string {
	base := path.Base(filepath.ToSlash(file))
	switch {
	case strings.Contains(filepath.ToSlash(file), "/storage/") || strings.Contains(text, "[sig-storage]"):
		return "volumes"
	case base == "container_probe.go":
		return "probes"
	case slices.Contains([]string{"security_context.go", "privileged.go", "apparmor.go"}, base) || strings.Contains(text, "Security Context"):
		return "security context"
	case slices.Contains([]string{"runtime.go", "runtimeclass.go", "containers.go", "docker_containers.go", "image_credential_provider.go"}, base):
		return "container runtime"
	case slices.Contains([]string{"node_lease.go", "node.go", "events.go"}, base):
		return "node API"
	case strings.Contains(filepath.ToSlash(file), "/common/node/"):
		// pods.go, init_container.go, lifecycle_hook.go, kubelet.go,
		// expansion.go, downwardapi.go, sysctl.go and the other pod specs.
		return "pods"
	}
	return "other"
}

// summarize writes the per-area counts and the failures per area.
func summarize(rows []row) string {
	type counts map[string]int
	per := map[string]counts{}
	total := counts{}
	for _, r := range rows {
		if per[r.area] == nil {
			per[r.area] = counts{}
		}
		per[r.area][r.status]++
		total[r.status]++
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| area | passed | failed | skipped | not run |\n|---|---|---|---|---|\n")
	for _, a := range areaOrder {
		if c, ok := per[a]; ok {
			fmt.Fprintf(&b, "| %s | %d | %d | %d | %d |\n", a, c[passed], c[failed], c[skipped], c[notRun])
		}
	}
	fmt.Fprintf(&b, "| **total** | %d | %d | %d | %d |\n", total[passed], total[failed], total[skipped], total[notRun])
	for _, a := range areaOrder {
		var lines []string
		for _, r := range rows {
			if r.area == a && r.status == failed {
				lines = append(lines, fmt.Sprintf("- %s\n  - %s", clean(r.spec), clean(r.reason)))
			}
		}
		if len(lines) > 0 {
			fmt.Fprintf(&b, "\n## Failed: %s (%d)\n\n%s\n", a, len(lines), strings.Join(lines, "\n"))
		}
	}
	return b.String()
}

// firstLine is the first non-empty line of s, at most 300 characters.
func firstLine(s string) string {
	for l := range strings.SplitSeq(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			if len(l) > 300 {
				l = l[:300] + "…"
			}
			return l
		}
	}
	return ""
}

// location is file:line of a failure, the file relative to the module.
func location(l types.CodeLocation) string {
	if l.FileName == "" {
		return ""
	}
	f := filepath.ToSlash(l.FileName)
	if i := strings.Index(f, "/test/e2e/"); i >= 0 {
		f = f[i+1:]
	}
	return fmt.Sprintf("%s:%d", f, l.LineNumber)
}

// clean keeps a table cell on one line.
func clean(s string) string {
	return strings.NewReplacer("\t", " ", "\n", " ", "|", "/").Replace(s)
}
