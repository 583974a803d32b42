package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// TLSOptions configures TLSConfig, after the kubelet's serving settings.
type TLSOptions struct {
	// CertFile and KeyFile are the serving certificate and its key (PEM),
	// the kubelet's tlsCertFile and tlsPrivateKeyFile. Both empty: a
	// self-signed certificate is made in memory for Hosts, valid for a
	// year from Now, as the kubelet makes one when it is given none.
	CertFile, KeyFile string
	// Hosts are the node's names and addresses, put in a self-signed
	// certificate. Required when it is made.
	Hosts []string
	// Now is the start of a self-signed certificate's validity. Required
	// when it is made.
	Now time.Time
	// ClientCAFile, when set, makes the server ask for client
	// certificates signed by its CAs (the kubelet's
	// authentication.x509.clientCAFile); the Authenticator verifies what
	// is given, and a client without one may still authenticate by token
	// or anonymously.
	ClientCAFile string
}

// TLSConfig returns the server's TLS configuration: TLS 1.2 or newer,
// the certificate of opts, and client certificates asked for when
// ClientCAFile is set. It fails when a file cannot be read, the
// certificate and key do not match, only one of them is given, or a
// self-signed certificate has no Hosts.
func TLSConfig(opts TLSOptions) (*tls.Config, error) {
	var cert tls.Certificate
	var err error
	switch {
	case opts.CertFile != "" && opts.KeyFile != "":
		if cert, err = tls.LoadX509KeyPair(opts.CertFile, opts.KeyFile); err != nil {
			return nil, fmt.Errorf("server: serving certificate: %w", err)
		}
	case opts.CertFile != "" || opts.KeyFile != "":
		return nil, errors.New("server: TLSOptions.CertFile and KeyFile go together")
	default:
		if cert, err = SelfSignedCert(opts.Hosts, opts.Now); err != nil {
			return nil, err
		}
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}, NextProtos: []string{"http/1.1"}}
	if opts.ClientCAFile != "" {
		pool, err := LoadCAFile(opts.ClientCAFile)
		if err != nil {
			return nil, err
		}
		// The authenticator verifies the certificate, so that a bad one is
		// answered 401 as the kubelet answers it, not a failed handshake.
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequestClientCert
	}
	return cfg, nil
}

// SelfSignedCert makes an ECDSA P-256 certificate for hosts (DNS names
// or IP addresses), signed by its own key, valid from now for a year.
func SelfSignedCert(hosts []string, now time.Time) (tls.Certificate, error) {
	if len(hosts) == 0 {
		return tls.Certificate{}, errors.New("server: a self-signed certificate needs the node's names (TLSOptions.Hosts)")
	}
	if now.IsZero() {
		return tls.Certificate{}, errors.New("server: a self-signed certificate needs its start time (TLSOptions.Now)")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("server: self-signed certificate: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("server: self-signed certificate: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: fmt.Sprintf("%s@%d", hosts[0], now.Unix())},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("server: self-signed certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("server: self-signed certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}
