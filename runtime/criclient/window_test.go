package criclient_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime/criclient"
)

// recordingListener keeps every byte its connections read: what the
// client sent.
type recordingListener struct {
	net.Listener
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &recordingConn{Conn: c, l: l}, nil
}

func (l *recordingListener) sent() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Clone(l.buf.Bytes())
}

type recordingConn struct {
	net.Conn
	l *recordingListener
}

func (c *recordingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.l.mu.Lock()
	c.l.buf.Write(p[:n])
	c.l.mu.Unlock()
	return n, err
}

// bigListServer answers ListContainers with many containers.
type bigListServer struct {
	eventlessServer
	containers []*runtimeapi.Container
}

func (s bigListServer) ListContainers(context.Context, *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	return &runtimeapi.ListContainersResponse{Containers: s.containers}, nil
}

// The client's flow-control windows are fixed: an adaptive window would
// have the client ping the runtime after responses (a round trip of two
// wake-ups on each side, at every relist of an idle node), which a local
// socket gains nothing from.
func TestClientSendsNoFlowControlPings(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "big.sock")
	inner, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	lis := &recordingListener{Listener: inner}
	srv := bigListServer{}
	for i := range 500 {
		srv.containers = append(srv.containers, &runtimeapi.Container{
			Id:     strings.Repeat("c", 60) + string(rune('a'+i%26)),
			Labels: map[string]string{"io.kubernetes.pod.name": strings.Repeat("p", 200)},
		})
	}
	g := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(g, srv)
	served := make(chan struct{})
	go func() { defer close(served); _ = g.Serve(lis) }()
	defer func() { g.Stop(); <-served }()
	c, err := criclient.Dial(context.Background(), "unix://"+sock)
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		l, err := c.ListContainers(context.Background(), nil)
		if err != nil || len(l) != len(srv.containers) {
			t.Fatalf("ListContainers: %d containers, %v; want %d", len(l), err, len(srv.containers))
		}
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	const preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
	b := lis.sent()
	if !bytes.HasPrefix(b, []byte(preface)) {
		t.Fatalf("the client's bytes do not start with the HTTP/2 preface: %q", b[:min(len(b), 24)])
	}
	b = b[len(preface):]
	frames, pings := 0, 0
	for len(b) >= 9 {
		length := int(binary.BigEndian.Uint32(append([]byte{0}, b[:3]...)))
		typ, flags := b[3], b[4]
		if typ == 0x6 && flags&0x1 == 0 { // PING, not an acknowledgement
			pings++
		}
		frames++
		b = b[min(len(b), 9+length):]
	}
	if frames == 0 {
		t.Fatal("no HTTP/2 frame read from the client")
	}
	if pings != 0 {
		t.Errorf("the client sent %d pings over %d frames and 5 calls; want none", pings, frames)
	}
}
