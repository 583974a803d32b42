package podsource_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ktypes "k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/podsource"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const webYAML = `apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {app: web}
spec:
  containers:
  - name: httpd
    image: busybox:1.36
    ports: [{containerPort: 8080}]
`

const jobJSON = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"job","namespace":"batch"},
 "spec":{"restartPolicy":"Never","containers":[{"name":"work","image":"busybox"}]}}`

const dupYAML = `apiVersion: v1
kind: Pod
metadata: {name: dup}
spec:
  containers:
  - {name: a, image: busybox:1.36}
  - {name: a, image: busybox:1.36, volumeMounts: [{name: missing, mountPath: /x}]}
`

type events struct {
	mu   sync.Mutex
	list []string
	// changed is closed and replaced at every event.
	changed chan struct{}
}

func (e *events) record(_ *v1.Pod, _, reason, msg string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = append(e.list, reason+": "+msg)
	if e.changed != nil {
		close(e.changed)
	}
	e.changed = make(chan struct{})
}

// wait returns a channel closed at the next event.
func (e *events) wait() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.changed == nil {
		e.changed = make(chan struct{})
	}
	return e.changed
}

func (e *events) all() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.list...)
}

func write(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// run starts a source and returns its update channel.
func run(t *testing.T, s podsource.Source) <-chan podsource.Update {
	t.Helper()
	out := make(chan podsource.Update, 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, out) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return out
}

func next(t *testing.T, ch <-chan podsource.Update) podsource.Update {
	t.Helper()
	select {
	case u := <-ch:
		return u
	case <-time.After(10 * time.Second):
		t.Fatal("no update within 10s")
		return podsource.Update{}
	}
}

func names(pods []*v1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Namespace+"/"+p.Name)
	}
	sort.Strings(out)
	return out
}

func TestFileSource(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "web.yaml", webYAML)
	write(t, dir, "job.json", jobJSON)
	write(t, dir, "broken.yaml", "kind: Pod\nspec: [not, a, map\n")
	write(t, dir, "dup.yaml", dupYAML)
	write(t, dir, ".hidden.yaml", webYAML)
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var ev events
	src, err := podsource.NewFile(podsource.FileConfig{Dir: dir, NodeName: "Node-1", Clock: clk, Events: ev.record})
	if err != nil {
		t.Fatal(err)
	}
	ch := run(t, src)
	u := next(t, ch)
	if u.Op != podsource.SET || u.Source != podsource.SourceFile {
		t.Fatalf("first update %s from %s", u.Op, u.Source)
	}
	if diff := cmp.Diff([]string{"batch/job-node-1", "default/web-node-1"}, names(u.Pods)); diff != "" {
		t.Fatalf("pods (-want +got):\n%s", diff)
	}
	var web *v1.Pod
	for _, p := range u.Pods {
		if strings.HasPrefix(p.Name, "web") {
			web = p
		}
	}
	if web.Spec.NodeName != "Node-1" || web.Spec.RestartPolicy != v1.RestartPolicyAlways || *web.Spec.TerminationGracePeriodSeconds != 30 ||
		web.Spec.Containers[0].ImagePullPolicy != v1.PullIfNotPresent || web.Spec.Containers[0].TerminationMessagePath != "/dev/termination-log" ||
		web.Spec.Containers[0].Ports[0].Protocol != v1.ProtocolTCP {
		t.Errorf("defaults not applied: %+v", web.Spec)
	}
	if web.Annotations[podsource.AnnotationConfigSource] != "file" || web.Annotations[podsource.AnnotationConfigHash] != string(web.UID) || len(web.UID) != 32 {
		t.Errorf("annotations %v uid %q", web.Annotations, web.UID)
	}
	got := strings.Join(ev.all(), "\n")
	for _, want := range []string{
		"broken.yaml: not YAML or JSON",
		"dup.yaml: pod default/dup-node-1: [spec.containers[1].name: Duplicate value: \"a\", spec.containers[1].volumeMounts[0].name: Not found: \"missing\"]",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("events lack %q:\n%s", want, got)
		}
	}

	// Editing a manifest changes the pod's UID; removing one drops it.
	uid := web.UID
	write(t, dir, "web.yaml", strings.Replace(webYAML, "8080", "9090", 1))
	os.Remove(filepath.Join(dir, "job.json"))
	var u2 podsource.Update
	for i := 0; ; i++ {
		clk.Step(20 * time.Second)
		u2 = next(t, ch)
		if len(u2.Pods) == 1 && u2.Pods[0].Name == "web-node-1" && u2.Pods[0].UID != uid {
			break // intermediate snapshots (a file half written) may come first
		}
		if i == 10 {
			t.Fatalf("after 10 snapshots, still not the edited pod alone: %v", names(u2.Pods))
		}
	}
	if u2.Pods[0].Name != "web-node-1" {
		t.Errorf("after the edit: %v", names(u2.Pods))
	}

	// An unchanged directory sends nothing new.
	clk.Step(20 * time.Second)
	select {
	case u := <-ch:
		if len(u.Pods) != 1 || u.Pods[0].UID != u2.Pods[0].UID {
			t.Errorf("unexpected update %v", names(u.Pods))
		}
	case <-time.After(100 * time.Millisecond):
	}
}

// An empty or missing directory is a SET of no pods, so the source counts
// as seen; a directory that cannot be read keeps the pods last sent.
func TestFileSourceEmptyMissingAndUnreadable(t *testing.T) {
	for name, dir := range map[string]string{"empty": t.TempDir(), "missing": filepath.Join(t.TempDir(), "none")} {
		src, err := podsource.NewFile(podsource.FileConfig{Dir: dir, NodeName: "n"})
		if err != nil {
			t.Fatal(err)
		}
		if u := next(t, run(t, src)); u.Op != podsource.SET || len(u.Pods) != 0 {
			t.Errorf("%s directory: first update %s with %d pods, want an empty SET", name, u.Op, len(u.Pods))
		}
	}

	// The source reads a symlink that is switched atomically, so the path
	// always exists: first a directory, then a file (reading it as a
	// directory fails), then a directory with one more pod.
	root := t.TempDir()
	first, second := filepath.Join(root, "first"), filepath.Join(root, "second")
	for _, d := range []string{first, second} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		write(t, d, "web.yaml", webYAML)
	}
	write(t, second, "job.json", jobJSON)
	write(t, root, "file", "not a directory")
	link := filepath.Join(root, "manifests")
	point := func(target string) {
		t.Helper()
		tmp := filepath.Join(root, "link.tmp")
		if err := os.Symlink(target, tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, link); err != nil {
			t.Fatal(err)
		}
	}
	point(first)
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	readErrors := make(chan string, 10)
	logger := funcr.New(func(_, args string) {
		if strings.Contains(args, "reading the manifest directory") {
			select {
			case readErrors <- args:
			default:
			}
		}
	}, funcr.Options{})
	src, err := podsource.NewFile(podsource.FileConfig{Dir: link, NodeName: "n", Clock: clk, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	ch := run(t, src)
	if u := next(t, ch); len(u.Pods) != 1 {
		t.Fatalf("first update has %d pods, want 1", len(u.Pods))
	}
	point(filepath.Join(root, "file"))
	clk.Step(20 * time.Second)
	select {
	case <-readErrors: // the source has read the path and failed
	case <-time.After(10 * time.Second):
		t.Fatal("no read error logged within 10s")
	}
	point(second)
	clk.Step(20 * time.Second)
	if u := next(t, ch); len(u.Pods) != 2 {
		t.Errorf("the update after the read error has %d pods (%v), want both: a read error must not send an empty set", len(u.Pods), names(u.Pods))
	}
}

func TestStaticUIDIsStable(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "web.yaml", webYAML)
	uids := map[string]bool{}
	for i := 0; i < 2; i++ {
		src, _ := podsource.NewFile(podsource.FileConfig{Dir: dir, NodeName: "n"})
		u := next(t, run(t, src))
		uids[string(u.Pods[0].UID)] = true
	}
	other, _ := podsource.NewFile(podsource.FileConfig{Dir: dir, NodeName: "other"})
	u := next(t, run(t, other))
	if len(uids) != 1 || uids[string(u.Pods[0].UID)] {
		t.Errorf("UIDs %v and %s: want one stable UID per node, another for another node", uids, u.Pods[0].UID)
	}
}

func TestHTTPSource(t *testing.T) {
	list := `{"kind":"PodList","apiVersion":"v1","items":[
	  {"metadata":{"name":"a"},"spec":{"containers":[{"name":"c","image":"busybox:1.36"}]}},
	  {"metadata":{"name":"b"},"spec":{"containers":[{"name":"c"}]}}]}`
	srv := newManifestServer(t, list, "n1")
	clk := clocktesting.NewFakeClock(time.Now())
	var ev events
	src, _ := podsource.NewHTTP(podsource.HTTPConfig{URL: srv.URL, NodeName: "n1", Header: http.Header{"X-Node": {"n1"}}, Clock: clk, Events: ev.record})
	ch := run(t, src)
	u := next(t, ch)
	if diff := cmp.Diff([]string{"default/a-n1"}, names(u.Pods)); diff != "" {
		t.Errorf("pods (-want +got):\n%s", diff)
	}
	if got := strings.Join(ev.all(), "\n"); !strings.Contains(got, "item 1: pod default/b-n1: spec.containers[0].image: Required value") {
		t.Errorf("events %q do not name the bad item and field", got)
	}
	srv.set(webYAML)
	clk.Step(20 * time.Second)
	if u := next(t, ch); len(u.Pods) != 1 || u.Pods[0].Name != "web-n1" {
		t.Errorf("after the change: %v", names(u.Pods))
	}
}

func pod(uid, name string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: ktypes.UID("uid-" + uid), Name: name, Namespace: "ns", Labels: map[string]string{"v": "1"}},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox:1.36"}}}}
}

func TestMerger(t *testing.T) {
	files := podsource.NewChannel("file", 10)
	api := podsource.NewChannel("api", 10)
	m, err := podsource.NewMerger(podsource.MergerConfig{Sources: []podsource.Source{files, api}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() { cancel(); <-done }()
	expect := func(want ...string) {
		t.Helper()
		var got []string
		for range want {
			u := next(t, m.Updates())
			got = append(got, string(u.Op)+" "+u.Source+" "+strings.Join(names(u.Pods), ","))
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("updates (-want +got):\n%s", diff)
		}
	}
	a, b := pod("a", "a"), pod("b", "b")
	files.Send(ctx, podsource.Update{Op: podsource.SET, Pods: []*v1.Pod{a, b}})
	expect("ADD file ns/a,ns/b")
	if m.SeenAllSources() {
		t.Error("all sources seen after one of two")
	}

	a2 := a.DeepCopy()
	a2.Labels["v"] = "2"
	b2 := b.DeepCopy()
	b2.Status.Phase = v1.PodRunning
	c := pod("c", "c")
	files.Send(ctx, podsource.Update{Op: podsource.SET, Pods: []*v1.Pod{a2, b2, c}})
	expect("ADD file ns/c", "UPDATE file ns/a", "RECONCILE file ns/b")

	files.Send(ctx, podsource.Update{Op: podsource.SET, Pods: []*v1.Pod{a2, c}})
	expect("REMOVE file ns/b")

	d := pod("d", "d")
	api.Send(ctx, podsource.Update{Op: podsource.ADD, Pods: []*v1.Pod{d}})
	expect("ADD api ns/d")
	if !m.SeenAllSources() {
		t.Error("not all sources seen after both sent")
	}
	d2 := d.DeepCopy()
	now := metav1.Now()
	d2.DeletionTimestamp = &now
	api.Send(ctx, podsource.Update{Op: podsource.UPDATE, Pods: []*v1.Pod{d2}})
	expect("DELETE api ns/d")
	api.Send(ctx, podsource.Update{Op: podsource.REMOVE, Pods: []*v1.Pod{d2}})
	expect("REMOVE api ns/d")
	if got := names(m.Pods()); !cmp.Equal(got, []string{"ns/a", "ns/c"}) {
		t.Errorf("pods %v", got)
	}
}

func TestValidate(t *testing.T) {
	base := func() *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: v1.PodSpec{
			RestartPolicy: v1.RestartPolicyAlways, DNSPolicy: v1.DNSClusterFirst,
			Containers: []v1.Container{{Name: "c", Image: "i"}},
		}}
	}
	for _, tc := range []struct {
		name   string
		mutate func(*v1.Pod)
		want   string
	}{
		{"valid", func(*v1.Pod) {}, ""},
		{"bad name", func(p *v1.Pod) { p.Name = "Bad_Name" }, "metadata.name: Invalid value"},
		{"no containers", func(p *v1.Pod) { p.Spec.Containers = nil }, "spec.containers: Required value"},
		{"bad port", func(p *v1.Pod) { p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 70000}} }, "spec.containers[0].ports[0].containerPort"},
		{"duplicate across init", func(p *v1.Pod) { p.Spec.InitContainers = []v1.Container{{Name: "c", Image: "i"}} }, "spec.initContainers[0].name: Duplicate value"},
		{"restart policy", func(p *v1.Pod) { p.Spec.RestartPolicy = "Sometimes" }, "spec.restartPolicy: Unsupported value"},
		{"two probe handlers", func(p *v1.Pod) {
			p.Spec.Containers[0].LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{}, TCPSocket: &v1.TCPSocketAction{}}}
		}, "spec.containers[0].livenessProbe"},
		{"container restart policy", func(p *v1.Pod) {
			sometimes := v1.ContainerRestartPolicy("Sometimes")
			p.Spec.Containers[0].RestartPolicy = &sometimes
		}, "spec.containers[0].restartPolicy: Unsupported value: \"Sometimes\""},
	} {
		p := base()
		tc.mutate(p)
		got := podsource.Validate(p).ToAggregate()
		switch {
		case tc.want == "" && got != nil:
			t.Errorf("%s: %v", tc.name, got)
		case tc.want != "" && (got == nil || !strings.Contains(got.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", tc.name, got, tc.want)
		}
	}
}

// An HTTP pod's UID comes from the URL and the pod, not its place in the
// list: reordering the list keeps every UID.
func TestHTTPSourceUIDsIgnoreOrder(t *testing.T) {
	items := []string{
		`{"metadata":{"name":"a"},"spec":{"containers":[{"name":"c","image":"busybox:1.36"}]}}`,
		`{"metadata":{"name":"b"},"spec":{"containers":[{"name":"c","image":"busybox:1.36"}]}}`,
		`{"metadata":{"name":"c"},"spec":{"containers":[{"name":"c","image":"busybox:1.37"}]}}`,
	}
	srv := newManifestServer(t, `{"kind":"PodList","apiVersion":"v1","items":[`+strings.Join(items, ",")+`]}`, "")
	clk := clocktesting.NewFakeClock(time.Now())
	src, _ := podsource.NewHTTP(podsource.HTTPConfig{URL: srv.URL, NodeName: "n", Clock: clk})
	ch := run(t, src)
	uids := func(u podsource.Update) map[string]ktypes.UID {
		m := map[string]ktypes.UID{}
		for _, p := range u.Pods {
			m[p.Name] = p.UID
		}
		return m
	}
	before := uids(next(t, ch))
	srv.set(`{"kind":"PodList","apiVersion":"v1","items":[` + items[2] + "," + items[0] + "," + items[1] + `]}`)
	clk.Step(20 * time.Second)
	after := uids(next(t, ch))
	if len(before) != 3 || !cmp.Equal(before, after) {
		t.Errorf("UIDs before %v and after reordering %v, want the same three", before, after)
	}
}

// A manifest removed and written again is parsed again, even with the
// size and modification time it had before: the source forgets a file
// once a read of the directory no longer finds it.
func TestFileSourceForgetsRemovedFiles(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "web.yaml", webYAML)
	info, err := os.Stat(filepath.Join(dir, "web.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	src, err := podsource.NewFile(podsource.FileConfig{Dir: dir, NodeName: "n", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ch := run(t, src)
	first := next(t, ch)
	if len(first.Pods) != 1 {
		t.Fatalf("first update: %v", names(first.Pods))
	}
	// until steps the clock past the next re-read until an update
	// satisfies ok, at most 10 times.
	until := func(what string, ok func(podsource.Update) bool) {
		t.Helper()
		for i := 0; i < 10; i++ {
			clk.Step(20 * time.Second)
			if u := next(t, ch); ok(u) {
				return
			}
		}
		t.Fatalf("after 10 re-reads: not %s", what)
	}
	if err := os.Remove(filepath.Join(dir, "web.yaml")); err != nil {
		t.Fatal(err)
	}
	until("empty", func(u podsource.Update) bool { return len(u.Pods) == 0 })

	edited := strings.Replace(webYAML, "8080", "9090", 1) // the same size
	write(t, dir, "web.yaml", edited)
	if err := os.Chtimes(filepath.Join(dir, "web.yaml"), info.ModTime(), info.ModTime()); err != nil {
		t.Fatal(err)
	}
	until("the edited pod", func(u podsource.Update) bool {
		return len(u.Pods) == 1 && u.Pods[0].UID != first.Pods[0].UID &&
			u.Pods[0].Spec.Containers[0].Ports[0].ContainerPort == 9090
	})
}

// A body the same as the last one is not parsed again, so its invalid
// items are reported once, not at every poll; a changed body is.
func TestHTTPSourceSkipsAnUnchangedBody(t *testing.T) {
	list := `{"kind":"PodList","apiVersion":"v1","items":[
	  {"metadata":{"name":"a"},"spec":{"containers":[{"name":"c","image":"busybox:1.36"}]}},
	  {"metadata":{"name":"b"},"spec":{"containers":[{"name":"c"}]}}]}`
	srv := newManifestServer(t, list, "")
	clk := clocktesting.NewFakeClock(time.Now())
	var ev events
	src, err := podsource.NewHTTP(podsource.HTTPConfig{URL: srv.URL, NodeName: "n", Clock: clk, Events: ev.record})
	if err != nil {
		t.Fatal(err)
	}
	ch := run(t, src)
	poll := func() {
		t.Helper()
		select {
		case <-srv.requests:
		case <-time.After(10 * time.Second):
			t.Fatal("no request within 10s")
		}
	}
	if u := next(t, ch); !cmp.Equal(names(u.Pods), []string{"default/a-n"}) {
		t.Fatalf("pods %v, want default/a-n", names(u.Pods))
	}
	poll()
	clk.Step(20 * time.Second)
	poll()
	clk.Step(20 * time.Second)
	poll() // the source has done with the second body: it polls once at a time
	if got := ev.all(); len(got) != 1 || !strings.Contains(got[0], "item 1: pod default/b-n: spec.containers[0].image: Required value") {
		t.Errorf("after three polls of one body, events %q, want one about item 1", got)
	}

	srv.set(webYAML)
	clk.Step(20 * time.Second)
	if u := next(t, ch); !cmp.Equal(names(u.Pods), []string{"default/web-n"}) {
		t.Errorf("after the change: pods %v, want default/web-n", names(u.Pods))
	}
}

// manifestServer serves a body that set changes. With node set, a request
// without the header "X-Node: node" gets 403. Each request answered is
// told on requests while it has room.
type manifestServer struct {
	*httptest.Server
	requests chan struct{}
	mu       sync.Mutex
	body     string
}

func newManifestServer(t *testing.T, body, node string) *manifestServer {
	t.Helper()
	s := &manifestServer{body: body, requests: make(chan struct{}, 10)}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if node != "" && r.Header.Get("X-Node") != node {
			http.Error(w, "who are you", http.StatusForbidden)
			return
		}
		s.mu.Lock()
		w.Write([]byte(s.body))
		s.mu.Unlock()
		select {
		case s.requests <- struct{}{}:
		default:
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *manifestServer) set(body string) {
	s.mu.Lock()
	s.body = body
	s.mu.Unlock()
}
