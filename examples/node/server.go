package main

import (
	"context"
	"fmt"
	"os"
	"time"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/server"
)

// serving are the node server's settings of a KubeletConfiguration: its
// TLS files, client CA, anonymous access and authorization mode.
type serving struct {
	certFile, keyFile, clientCAFile string
	anonymous                       bool
	mode                            kubeletv1beta1.KubeletAuthorizationMode
	config                          *kubeletv1beta1.KubeletConfiguration // served on /configz; nil without --config
}

// servingOf reads the server's fields of kc. HTTPS is served when it
// names a serving certificate or a client CA; otherwise the server stays
// plain HTTP (for address 127.0.0.1).
func servingOf(kc *kubeletv1beta1.KubeletConfiguration, path string) (serving, error) {
	s := serving{
		certFile: kc.TLSCertFile, keyFile: kc.TLSPrivateKeyFile,
		clientCAFile: kc.Authentication.X509.ClientCAFile,
		mode:         kc.Authorization.Mode,
	}
	if path != "" {
		s.config = kc
	}
	if (s.certFile == "") != (s.keyFile == "") {
		return serving{}, fmt.Errorf("--config %s: tlsCertFile and tlsPrivateKeyFile go together", path)
	}
	if kc.Authentication.Anonymous.Enabled != nil {
		s.anonymous = *kc.Authentication.Anonymous.Enabled
	}
	switch s.mode {
	case "", kubeletv1beta1.KubeletAuthorizationModeWebhook, kubeletv1beta1.KubeletAuthorizationModeAlwaysAllow:
	default:
		return serving{}, fmt.Errorf("--config %s: authorization mode %q is neither Webhook nor AlwaysAllow", path, s.mode)
	}
	return s, nil
}

func (s serving) secure() bool { return s.certFile != "" || s.clientCAFile != "" }

// agentServer builds the agent's server settings: HTTPS with the files
// or a certificate made for the node's name and addresses; client
// certificates of clientCAFile; anonymous access only when enabled.
// Authorization AlwaysAllow lets every authenticated client through;
// Webhook (the default) would ask the API server a SubjectAccessReview,
// which this command does not do yet: it lets authenticated clients
// through but system:anonymous, and says so in its log.
func (s serving) agentServer(name string, ips []string, now time.Time) (agent.ServerConfig, error) {
	var configz func() (any, error)
	if s.config != nil {
		configz = func() (any, error) { return s.config, nil }
	}
	if !s.secure() {
		return agent.ServerConfig{Configz: configz}, nil
	}
	hosts := append([]string{name}, ips...)
	if h, err := os.Hostname(); err == nil && h != name {
		hosts = append(hosts, h)
	}
	tlsCfg, err := server.TLSConfig(server.TLSOptions{CertFile: s.certFile, KeyFile: s.keyFile, Hosts: hosts, Now: now, ClientCAFile: s.clientCAFile})
	if err != nil {
		return agent.ServerConfig{}, err
	}
	authn, err := server.NewAuthenticator(server.AuthenticatorConfig{ClientCAFile: s.clientCAFile, Anonymous: s.anonymous})
	if err != nil {
		return agent.ServerConfig{}, err
	}
	cfg := agent.ServerConfig{TLS: tlsCfg, Authenticator: authn, Configz: configz}
	if s.mode != kubeletv1beta1.KubeletAuthorizationModeAlwaysAllow {
		cfg.Authorizer = server.AuthorizerFunc(func(_ context.Context, a server.Attributes) (server.Decision, string, error) {
			if a.User == nil || a.User.Name == server.AnonymousUser {
				return server.DecisionNoOpinion, "anonymous requests need a SubjectAccessReview", nil
			}
			return server.DecisionAllow, "", nil
		})
	}
	return cfg, nil
}
