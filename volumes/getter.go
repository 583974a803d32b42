package volumes

import (
	"context"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
)

// ObjectGetter gives the configMaps and secrets that configMap, secret
// and projected volumes show. Objects (in memory) implements it, and
// kube an API-server-backed one; it has the method set of
// runtime/cri.ObjectGetter, so one value serves env and volumes. Methods
// are safe for concurrent use, may block until ctx ends, and return an
// error wrapping runtime.ErrNotFound when the object does not exist. The
// caller must not modify what they return.
type ObjectGetter interface {
	GetConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error)
	GetSecret(ctx context.Context, namespace, name string) (*v1.Secret, error)
}

// TokenGetter gives service-account tokens for projected
// serviceAccountToken volumes, as the API server's TokenRequest does: it
// returns a token for the service account namespace/name with the
// request's audiences, expiry and bound object, and its expiry time in
// the status. It is safe for concurrent use and may block until ctx
// ends; the caller must not modify what it returns. kube provides one
// backed by the API server.
type TokenGetter interface {
	GetServiceAccountToken(ctx context.Context, namespace, name string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error)
}
