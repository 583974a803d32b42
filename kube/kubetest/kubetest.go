// Package kubetest runs a real control plane (etcd and kube-apiserver) for
// the tests of programs built on package kube, such as a node agent's
// command: it is the same server package kube's own tests use.
//
// The binaries come from hack/kube/install.sh, found through the
// environment variable NODEKIT_KUBE_TOOLS; without it Start skips the
// test. The server authenticates an admin token and one token per node
// named in Options.Nodes, authorizes with Node,RBAC and admits with
// NodeRestriction, so Server.NodeConfig can do exactly what a kubelet can.
//
//	s := kubetest.Start(t, kubetest.Options{Nodes: []string{"edge-1"}})
//	client := kubernetes.NewForConfigOrDie(s.NodeConfig(t, "edge-1"))
package kubetest

import (
	"testing"

	"github.com/nodekit/nodekit/kube/internal/apiservertest"
)

// EnvTools names the environment variable that holds the directory with
// the etcd and kube-apiserver binaries.
const EnvTools = apiservertest.EnvTools

// Options configures Start; the zero value starts a server with one node
// identity, "node-1".
type Options = apiservertest.Options

// Server is a running etcd and kube-apiserver: AdminConfig and NodeConfig
// give rest.Configs, StopAPIServer and StartAPIServer take the API server
// away and bring it back.
type Server = apiservertest.Server

// Start starts etcd and kube-apiserver and returns once /readyz answers
// ok; t.Cleanup stops both. It skips the test when NODEKIT_KUBE_TOOLS is
// unset and fails it when a binary is missing.
func Start(t testing.TB, opts Options) *Server { return apiservertest.Start(t, opts) }
