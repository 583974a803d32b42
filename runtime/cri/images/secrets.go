package images

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/distribution/reference"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const (
	dockerHubDomain          = "docker.io"
	legacyDockerHubIndexHost = "index.docker.io"
)

// dockerConfigEntry is one registry's credentials in a docker config.
type dockerConfigEntry struct {
	Username      string `json:"username"`
	Password      string `json:"password"`
	Auth          string `json:"auth"`
	IdentityToken string `json:"identitytoken"`
	RegistryToken string `json:"registrytoken"`
	ServerAddress string `json:"serveraddress"`
}

// pullAuths returns the credentials of the pod's image pull secrets that
// match the image's registry, in the order the secrets are listed. A
// secret that cannot be read is skipped with an event, as the kubelet
// does; one that is malformed is an error naming the secret and field.
func (m *Manager) pullAuths(ctx context.Context, pod *v1.Pod, named reference.Named) ([]*runtimeapi.AuthConfig, error) {
	if len(pod.Spec.ImagePullSecrets) == 0 {
		return nil, nil
	}
	domain := normalizeRegistry(reference.Domain(named))
	repoPath := reference.Path(named)
	var out []*runtimeapi.AuthConfig
	for i, ref := range pod.Spec.ImagePullSecrets {
		field := fmt.Sprintf("spec.imagePullSecrets[%d] (%s)", i, ref.Name)
		if m.cfg.Secrets == nil {
			m.cfg.Events(pod, v1.EventTypeWarning, reasonFailedToGetSecret, field+": no object source is configured")
			continue
		}
		secret, err := m.cfg.Secrets.GetSecret(ctx, pod.Namespace, ref.Name)
		if err != nil {
			m.cfg.Events(pod, v1.EventTypeWarning, reasonFailedToGetSecret, fmt.Sprintf("Unable to retrieve some image pull secrets (%s); attempting to pull the image may not succeed.", ref.Name))
			continue
		}
		entries, err := parseDockerConfig(secret)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", field, err)
		}
		for _, key := range slices.Sorted(maps.Keys(entries)) {
			host, prefix := splitRegistryKey(key)
			if !matchHost(host, domain) || (prefix != "" && !strings.HasPrefix(repoPath, prefix)) {
				continue
			}
			e := entries[key]
			auth := &runtimeapi.AuthConfig{
				Username: e.Username,
				Password: e.Password,
				// The entry's own serveraddress, as the kubelet sends it,
				// not the key: the runtime drops credentials whose
				// serverAddress does not parse to the pulled host, and
				// a key such as "localhost:5000" does not.
				ServerAddress: e.ServerAddress,
				IdentityToken: e.IdentityToken,
				RegistryToken: e.RegistryToken,
			}
			if e.Auth != "" && e.Username == "" {
				raw, err := base64.StdEncoding.DecodeString(e.Auth)
				user, pass, ok := strings.Cut(string(raw), ":")
				if err != nil || !ok {
					return nil, fmt.Errorf("%s: auths[%q].auth: not base64 of user:password", field, key)
				}
				auth.Username, auth.Password = user, pass
			}
			out = append(out, auth)
		}
	}
	return out, nil
}

func parseDockerConfig(s *v1.Secret) (map[string]dockerConfigEntry, error) {
	switch s.Type {
	case v1.SecretTypeDockerConfigJson:
		data, ok := s.Data[v1.DockerConfigJsonKey]
		if !ok {
			return nil, fmt.Errorf("data[%s]: missing", v1.DockerConfigJsonKey)
		}
		var cfg struct {
			Auths map[string]dockerConfigEntry `json:"auths"`
		}
		if err := json.Unmarshal(data, &cfg); err != nil {
			return nil, fmt.Errorf("data[%s]: %v", v1.DockerConfigJsonKey, err)
		}
		return cfg.Auths, nil
	case v1.SecretTypeDockercfg:
		data, ok := s.Data[v1.DockerConfigKey]
		if !ok {
			return nil, fmt.Errorf("data[%s]: missing", v1.DockerConfigKey)
		}
		var cfg map[string]dockerConfigEntry
		if err := json.Unmarshal(data, &cfg); err != nil {
			return nil, fmt.Errorf("data[%s]: %v", v1.DockerConfigKey, err)
		}
		return cfg, nil
	}
	return nil, fmt.Errorf("type %q: want %s or %s", s.Type, v1.SecretTypeDockerConfigJson, v1.SecretTypeDockercfg)
}

// splitRegistryKey turns a docker config key ("https://index.docker.io/v1/",
// "registry.example.com/team") into a registry host and a repository path
// prefix.
func splitRegistryKey(key string) (host, prefix string) {
	key = strings.TrimPrefix(strings.TrimPrefix(key, "https://"), "http://")
	host, prefix, _ = strings.Cut(key, "/")
	host = normalizeRegistry(host)
	prefix = strings.Trim(prefix, "/")
	if host == dockerHubDomain && (prefix == "v1" || prefix == "v2") {
		prefix = ""
	}
	return host, prefix
}

func normalizeRegistry(host string) string {
	switch host {
	case legacyDockerHubIndexHost, "registry-1.docker.io":
		return dockerHubDomain
	}
	return host
}

// matchHost matches a registry host against a config key's host, which
// may hold globs (*.example.com), as the kubelet's keyring does.
func matchHost(pattern, host string) bool {
	if pattern == host {
		return true
	}
	pp, hp := strings.Split(pattern, "."), strings.Split(host, ".")
	if len(pp) != len(hp) {
		return false
	}
	for i := range pp {
		if ok, _ := path.Match(pp[i], hp[i]); !ok {
			return false
		}
	}
	return true
}
