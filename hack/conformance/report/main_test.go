package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/onsi/ginkgo/v2/types"
)

func spec(file, container, text string, labels []string, state types.SpecState, msg string, runTime time.Duration) types.SpecReport {
	return types.SpecReport{
		LeafNodeType:             types.NodeTypeIt,
		ContainerHierarchyTexts:  []string{container},
		LeafNodeText:             text,
		LeafNodeLabels:           labels,
		LeafNodeLocation:         types.CodeLocation{FileName: "k8s.io/kubernetes@v1.37.2/test/e2e/" + file, LineNumber: 10},
		State:                    state,
		RunTime:                  runTime,
		Failure:                  types.Failure{Message: msg, Location: types.CodeLocation{FileName: "k8s.io/kubernetes@v1.37.2/test/e2e/framework/pod/wait.go", LineNumber: 42}},
		ContainerHierarchyLabels: [][]string{{}},
	}
}

// TestReport: the selected specs are counted per area and status, the
// rest left out; a failure's first line and place reach the table.
func TestReport(t *testing.T) {
	nc := []string{"NodeConformance"}
	reports := []types.Report{{SpecReports: types.SpecReports{
		spec("common/node/pods.go", "[sig-node] Pods", "should get a host IP", nc, types.SpecStatePassed, "", time.Second),
		spec("common/node/container_probe.go", "[sig-node] Probing container", "should be restarted", nc, types.SpecStateFailed,
			"Timed out after 300s.\nmore detail", time.Second),
		spec("common/storage/empty_dir.go", "[sig-storage] EmptyDir volumes", "should support (root,0644,default)", nc, types.SpecStateTimedout, "", time.Second),
		spec("common/node/security_context.go", "[sig-node] Security Context", "should run as non-root", nc, types.SpecStateSkipped, "Only supported on Linux\n", time.Millisecond),
		spec("common/node/node_lease.go", "[sig-node] NodeLease", "should have OwnerReferences set", nc, types.SpecStateSkipped, "", 0),
		spec("common/node/runtime.go", "[sig-node] Container Runtime", "is slow", []string{"NodeConformance", "Slow"}, types.SpecStateSkipped, "", 0),
		spec("apps/job.go", "[sig-apps] Job", "is not node conformance", nil, types.SpecStateSkipped, "", 0),
		{LeafNodeType: types.NodeTypeSynchronizedBeforeSuite, State: types.SpecStateFailed, Failure: types.Failure{Message: "no nodes are ready"}},
	}}}
	dir := t.TempDir()
	data, err := json.Marshal(reports)
	if err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(dir, "report.json")
	if err := os.WriteFile(in, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout strings.Builder
	if err := run(in, "NodeConformance && !Slow", "", dir, &stdout); err != nil {
		t.Fatal(err)
	}
	tsv, err := os.ReadFile(filepath.Join(dir, "specs.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"area\tstatus\tspec\treason\twhere",
		"pods\tpassed\t[sig-node] Pods should get a host IP\t\t",
		"probes\tfailed\t[sig-node] Probing container should be restarted\tTimed out after 300s.\ttest/e2e/framework/pod/wait.go:42",
		"volumes\tfailed\t[sig-storage] EmptyDir volumes should support (root,0644,default)\ttimedout\ttest/e2e/framework/pod/wait.go:42",
		"security context\tskipped\t[sig-node] Security Context should run as non-root\tOnly supported on Linux\t",
		"node API\tnot run\t[sig-node] NodeLease should have OwnerReferences set\t\t",
		"suite\tfailed\tSynchronizedBeforeSuite\tno nodes are ready\t",
	}
	if got := strings.Split(strings.TrimSuffix(string(tsv), "\n"), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("specs.tsv:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, line := range []string{
		"| pods | 1 | 0 | 0 | 0 |",
		"| probes | 0 | 1 | 0 | 0 |",
		"| node API | 0 | 0 | 0 | 1 |",
		"| **total** | 1 | 3 | 1 | 1 |",
		"## Failed: volumes (1)",
	} {
		if !strings.Contains(stdout.String(), line) {
			t.Errorf("summary lacks %q:\n%s", line, stdout.String())
		}
	}

	// A focus leaves out the specs it does not match.
	if err := run(in, "NodeConformance && !Slow", "Probing", dir, &stdout); err != nil {
		t.Fatal(err)
	}
	tsv, _ = os.ReadFile(filepath.Join(dir, "specs.tsv"))
	if n := strings.Count(string(tsv), "\n"); n != 3 { // header, the probe, the suite failure
		t.Errorf("with -focus Probing, specs.tsv has %d lines:\n%s", n, tsv)
	}
}
