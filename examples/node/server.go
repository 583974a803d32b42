package main

import (
	"fmt"
	"os"
	"time"

	"k8s.io/client-go/kubernetes"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/nodekit/nodekit/agent"
	"github.com/nodekit/nodekit/kube"
	"github.com/nodekit/nodekit/server"
)

// serving are the node server's settings of a KubeletConfiguration: its
// TLS files, client CA, anonymous access, token webhook and authorization
// mode with their cache TTLs (zero: kube's defaults, the kubelet's).
type serving struct {
	certFile, keyFile, clientCAFile string
	anonymous                       bool
	noTokenWebhook                  bool // authentication.webhook.enabled: false
	tokenTTL                        time.Duration
	mode                            kubeletv1beta1.KubeletAuthorizationMode
	authorizedTTL, unauthorizedTTL  time.Duration
	config                          *kubeletv1beta1.KubeletConfiguration // served on /configz; nil without --config
}

// servingOf reads the server's fields of kc. HTTPS is served when it
// names a serving certificate or a client CA, or when the node has a
// kubeconfig (agentServer); otherwise the server stays plain HTTP (for
// address 127.0.0.1).
func servingOf(kc *kubeletv1beta1.KubeletConfiguration, path string) (serving, error) {
	s := serving{
		certFile: kc.TLSCertFile, keyFile: kc.TLSPrivateKeyFile,
		clientCAFile:    kc.Authentication.X509.ClientCAFile,
		mode:            kc.Authorization.Mode,
		noTokenWebhook:  kc.Authentication.Webhook.Enabled != nil && !*kc.Authentication.Webhook.Enabled,
		tokenTTL:        kc.Authentication.Webhook.CacheTTL.Duration,
		authorizedTTL:   kc.Authorization.Webhook.CacheAuthorizedTTL.Duration,
		unauthorizedTTL: kc.Authorization.Webhook.CacheUnauthorizedTTL.Duration,
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
// certificates of clientCAFile; bearer tokens checked by TokenReviews
// through client when the token webhook is on (the default); anonymous
// access only when enabled. Authorization AlwaysAllow lets every
// authenticated client through; Webhook (the default) asks the API
// server a SubjectAccessReview through client.
func (s serving) agentServer(name string, ips []string, now time.Time, client kubernetes.Interface) (agent.ServerConfig, error) {
	var configz func() (any, error)
	if s.config != nil {
		configz = func() (any, error) { return s.config, nil }
	}
	// With a client the server is the kubelet's: HTTPS (a self-signed
	// certificate without tlsCertFile), with the API server's webhooks.
	// Without one and without TLS files it stays plain HTTP, on
	// 127.0.0.1 unless address says otherwise.
	if !s.secure() && client == nil {
		return agent.ServerConfig{Configz: configz}, nil
	}
	if client == nil && (!s.noTokenWebhook || s.mode != kubeletv1beta1.KubeletAuthorizationModeAlwaysAllow) {
		return agent.ServerConfig{}, fmt.Errorf("--config: authentication.webhook.enabled and authorization.mode Webhook need --kubeconfig; without one set the webhook off and the mode AlwaysAllow")
	}
	hosts := append([]string{name}, ips...)
	if h, err := os.Hostname(); err == nil && h != name {
		hosts = append(hosts, h)
	}
	tlsCfg, err := server.TLSConfig(server.TLSOptions{CertFile: s.certFile, KeyFile: s.keyFile, Hosts: hosts, Now: now, ClientCAFile: s.clientCAFile})
	if err != nil {
		return agent.ServerConfig{}, err
	}
	authnCfg := server.AuthenticatorConfig{ClientCAFile: s.clientCAFile, Anonymous: s.anonymous}
	if !s.noTokenWebhook {
		tokens, err := kube.NewTokenReviewAuthenticator(kube.TokenReviewConfig{Client: client, CacheTTL: s.tokenTTL})
		if err != nil {
			return agent.ServerConfig{}, err
		}
		authnCfg.Tokens = tokens
	}
	authn, err := server.NewAuthenticator(authnCfg)
	if err != nil {
		return agent.ServerConfig{}, err
	}
	cfg := agent.ServerConfig{TLS: tlsCfg, Authenticator: authn, Configz: configz}
	if s.mode != kubeletv1beta1.KubeletAuthorizationModeAlwaysAllow {
		authz, err := kube.NewSubjectAccessReviewAuthorizer(kube.SubjectAccessReviewConfig{
			Client: client, AuthorizedTTL: s.authorizedTTL, UnauthorizedTTL: s.unauthorizedTTL})
		if err != nil {
			return agent.ServerConfig{}, err
		}
		cfg.Authorizer = authz
	}
	return cfg, nil
}
