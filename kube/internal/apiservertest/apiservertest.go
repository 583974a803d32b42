// Package apiservertest runs a real control plane for tests: an etcd and a
// kube-apiserver, started on loopback with free ports and their state in
// t.TempDir(), stopped by PID when the test ends.
//
// The binaries come from hack/kube/install.sh, which builds them from the Go
// module proxy into a cache directory and prints that directory. Tests find
// it in the environment variable NODEKIT_KUBE_TOOLS (make kube-e2e sets it).
// When the variable is unset, Start skips the test with a message naming the
// script; when it is set but a binary is missing, Start fails the test, so a
// run that meant to exercise the API server cannot pass without it.
//
// The API server authenticates bearer tokens from a static token file: an
// admin token (group system:masters) and one token per node named in
// Options.Nodes (user system:node:NAME, group system:nodes). It authorizes
// with Node,RBAC and admits with NodeRestriction, so a node's rest.Config
// can do exactly what a kubelet can.
package apiservertest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// EnvTools names the environment variable that holds the directory with the
// etcd and kube-apiserver binaries.
const EnvTools = "NODEKIT_KUBE_TOOLS"

// Options configures Start. The zero value starts a server with one node
// identity, "node-1".
type Options struct {
	// Nodes are the node names that get a token; NodeConfig works only for
	// these. Empty means []string{"node-1"}.
	Nodes []string
	// ReadyTimeout bounds the wait for etcd's /health and then the API
	// server's /readyz. Zero means 90 s (the machine may be busy).
	ReadyTimeout time.Duration
	// ExtraArgs are appended to the kube-apiserver command line.
	ExtraArgs []string
}

// Server is a running etcd and kube-apiserver.
type Server struct {
	// URL is the API server's https URL on loopback.
	URL string
	// EtcdURL is etcd's client URL.
	EtcdURL string
	// Dir holds the state, certificates and logs of both processes.
	Dir string

	tools      string
	opts       Options
	port       int
	caFile     string
	adminToken string
	nodeTokens map[string]string
	etcd       *process
	apiserver  *process
}

// Tools returns the directory named by NODEKIT_KUBE_TOOLS, skipping the test
// when it is unset and failing it when a binary is missing there.
func Tools(t testing.TB) string {
	t.Helper()
	dir, skip, err := toolsDir(os.Getenv(EnvTools))
	if skip != "" {
		t.Skip(skip)
	}
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// toolsDir decides what Tools does with the value of NODEKIT_KUBE_TOOLS:
// skip (a message) when it is empty, an error when a binary is missing.
func toolsDir(dir string) (string, string, error) {
	if dir == "" {
		return "", fmt.Sprintf("no real API server: %s is not set; run `make kube-e2e`, or hack/kube/install.sh and set %s to the directory it prints", EnvTools, EnvTools), nil
	}
	for _, name := range []string{"etcd", "kube-apiserver"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err == nil && fi.Mode()&0o111 == 0 {
			err = errors.New("not executable")
		}
		if err != nil {
			return "", "", fmt.Errorf("apiservertest: %s=%s but %s is not there (hack/kube/install.sh builds it): %w", EnvTools, dir, name, err)
		}
	}
	return dir, "", nil
}

// Start starts etcd and kube-apiserver and returns once /readyz answers ok.
// Both processes are stopped by t.Cleanup. It skips or fails the test as
// Tools does when the binaries are not available.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	tools := Tools(t)
	if len(opts.Nodes) == 0 {
		opts.Nodes = []string{"node-1"}
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = 90 * time.Second
	}
	s := &Server{Dir: t.TempDir(), nodeTokens: map[string]string{}, tools: tools, opts: opts}
	if err := s.writeCredentials(opts.Nodes); err != nil {
		t.Fatalf("apiservertest: %v", err)
	}
	// A free port can be taken by someone else between our probe and the
	// process binding it; a start that fails early is retried with new ports.
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if err = s.startEtcd(tools, opts.ReadyTimeout); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("apiservertest: %v", err)
	}
	t.Cleanup(func() { s.etcd.stop(t) })
	for attempt := 0; attempt < 3; attempt++ {
		if s.port, err = freePort(); err != nil {
			break
		}
		if err = s.startAPIServer(); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("apiservertest: %v", err)
	}
	t.Cleanup(func() { s.apiserver.stop(t) })
	return s
}

// StopAPIServer stops the API server and leaves etcd running, so that
// StartAPIServer brings the same cluster back. Clients see connection
// errors meanwhile.
func (s *Server) StopAPIServer(t testing.TB) {
	t.Helper()
	s.apiserver.stop(t)
}

// StartAPIServer starts the API server again after StopAPIServer, on the
// same port with the same certificates and tokens, and returns once
// /readyz answers ok.
func (s *Server) StartAPIServer(t testing.TB) {
	t.Helper()
	if err := s.startAPIServer(); err != nil {
		t.Fatalf("apiservertest: restart: %v", err)
	}
}

// AdminConfig returns a rest.Config with cluster-admin rights.
func (s *Server) AdminConfig() *rest.Config { return s.config(s.adminToken) }

// NodeConfig returns a rest.Config that authenticates as system:node:NAME in
// group system:nodes. It fails the test for a name not in Options.Nodes.
func (s *Server) NodeConfig(t testing.TB, name string) *rest.Config {
	t.Helper()
	tok, ok := s.nodeTokens[name]
	if !ok {
		t.Fatalf("apiservertest: node %q has no token (Options.Nodes)", name)
	}
	return s.config(tok)
}

func (s *Server) config(token string) *rest.Config {
	return &rest.Config{
		Host:            s.URL,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAFile: s.caFile},
		QPS:             -1, // no client-side rate limit in tests
	}
}

// Stop stops the API server and then etcd. It is safe to call more than
// once, and Start's cleanup calls it; tests call it to take the control
// plane away.
func (s *Server) Stop(t testing.TB) {
	t.Helper()
	s.apiserver.stop(t)
	s.etcd.stop(t)
}

func (s *Server) writeCredentials(nodes []string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("service account key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return fmt.Errorf("service account key: %w", err)
	}
	priv := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	if err := os.WriteFile(filepath.Join(s.Dir, "sa.key"), priv, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(s.Dir, "sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644); err != nil {
		return err
	}
	var csv bytes.Buffer
	s.adminToken = token()
	fmt.Fprintf(&csv, "%s,admin,admin,\"system:masters\"\n", s.adminToken)
	for i, n := range nodes {
		tok := token()
		s.nodeTokens[n] = tok
		fmt.Fprintf(&csv, "%s,system:node:%s,node-%d,\"system:nodes\"\n", tok, n, i)
	}
	return os.WriteFile(filepath.Join(s.Dir, "tokens.csv"), csv.Bytes(), 0o600)
}

func token() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on Linux
	return hex.EncodeToString(b)
}

func (s *Server) startEtcd(tools string, timeout time.Duration) error {
	client, peer, err := freePorts2()
	if err != nil {
		return err
	}
	s.EtcdURL = "http://127.0.0.1:" + strconv.Itoa(client)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peer)
	data := filepath.Join(s.Dir, "etcd")
	_ = os.RemoveAll(data)
	p, err := startProcess(filepath.Join(tools, "etcd"), filepath.Join(s.Dir, "etcd.log"),
		"--name=test",
		"--data-dir="+data,
		"--listen-client-urls="+s.EtcdURL,
		"--advertise-client-urls="+s.EtcdURL,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=test="+peerURL,
		"--unsafe-no-fsync",
		"--log-level=warn",
	)
	if err != nil {
		return err
	}
	err = p.waitReady(timeout, s.EtcdURL+"/health", "", func(body []byte) bool {
		return bytes.Contains(body, []byte(`"health":"true"`))
	})
	if err != nil {
		p.kill()
		return fmt.Errorf("etcd: %w\n%s", err, p.logTail())
	}
	s.etcd = p
	return nil
}

func (s *Server) startAPIServer() error {
	tools, opts, port := s.tools, s.opts, s.port
	s.URL = "https://127.0.0.1:" + strconv.Itoa(port)
	certDir := filepath.Join(s.Dir, "certs")
	args := append([]string{
		"--etcd-servers=" + s.EtcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		// Without it the API server refuses a loopback advertise address.
		"--endpoint-reconciler-type=none",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + certDir,
		"--service-account-issuer=" + s.URL,
		"--service-account-key-file=" + filepath.Join(s.Dir, "sa.pub"),
		"--service-account-signing-key-file=" + filepath.Join(s.Dir, "sa.key"),
		"--token-auth-file=" + filepath.Join(s.Dir, "tokens.csv"),
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--disable-admission-plugins=ServiceAccount",
		"--service-cluster-ip-range=10.0.0.0/24",
		"--allow-privileged=true",
		"--profiling=false",
	}, opts.ExtraArgs...)
	p, err := startProcess(filepath.Join(tools, "kube-apiserver"), filepath.Join(s.Dir, "kube-apiserver.log"), args...)
	if err != nil {
		return err
	}
	// The API server writes its self-signed serving certificate (with its CA)
	// before it listens; it serves as the clients' CA.
	s.caFile = filepath.Join(certDir, "apiserver.crt")
	err = p.waitReady(opts.ReadyTimeout, s.URL+"/readyz", s.adminToken, func(body []byte) bool {
		return bytes.Equal(bytes.TrimSpace(body), []byte("ok"))
	})
	if err != nil {
		p.kill()
		return fmt.Errorf("kube-apiserver: %w\n%s", err, p.logTail())
	}
	s.apiserver = p
	return nil
}

// process is a started binary with its log file.
type process struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{} // closed when the process has exited
	err  error         // the exit status, set before done closes
}

func startProcess(bin, logFile string, args ...string) (*process, error) {
	f, err := os.Create(logFile)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	// Kill the process if the test binary dies without its cleanup.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	p := &process{cmd: cmd, log: logFile, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// waitReady polls url until ok accepts a 200 answer's body, the process
// exits, or timeout passes. It only polls readiness, so it does not verify
// the serving certificate; the tests' clients verify it through the
// rest.Config's CA file.
func (p *process) waitReady(timeout time.Duration, url, bearer string, ok func([]byte) bool) error {
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last string
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := c.Do(req)
		if err == nil {
			var buf bytes.Buffer
			_, _ = buf.ReadFrom(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && ok(buf.Bytes()) {
				cancel()
				return nil
			}
			last = fmt.Sprintf("%s: %d %s", url, resp.StatusCode, truncate(buf.String(), 2000))
		} else {
			last = err.Error()
		}
		cancel()
		select {
		case <-p.done:
			return fmt.Errorf("exited before it was ready (%v); last answer: %s", p.err, last)
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %v; last answer: %s", timeout, last)
		}
	}
}

// stop sends SIGTERM, waits up to 15 s, then SIGKILL. A process that is
// already gone is left alone.
func (p *process) stop(t testing.TB) {
	t.Helper()
	if p == nil {
		return
	}
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		t.Logf("apiservertest: %s did not stop on SIGTERM within 15 s; killing pid %d", filepath.Base(p.cmd.Path), p.cmd.Process.Pid)
		p.kill()
	}
}

func (p *process) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

func (p *process) logTail() string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	return filepath.Base(p.log) + " (last lines):\n" + strings.Join(lines, "\n")
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func freePorts2() (int, int, error) {
	a, err := freePort()
	if err != nil {
		return 0, 0, err
	}
	for i := 0; i < 10; i++ {
		b, err := freePort()
		if err != nil {
			return 0, 0, err
		}
		if b != a {
			return a, b, nil
		}
	}
	return 0, 0, errors.New("free port: the same port came back ten times")
}
