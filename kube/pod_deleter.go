package kube

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodekit/nodekit/podsource"
)

// PodDeleterConfig configures a PodDeleter.
type PodDeleterConfig struct {
	// Client talks to the API server; the node's identity suffices.
	// Required.
	Client kubernetes.Interface
	// RequestTimeout bounds each call to the API server. Default 10s.
	RequestTimeout time.Duration
	// Logger receives the deleter's logs. Default: discarded.
	Logger logr.Logger
}

// PodDeleter finishes a graceful deletion as the kubelet does: once a pod
// the API server is deleting (deletionTimestamp set) has no container or
// sandbox left on the node, it deletes the pod object with grace period 0
// and a precondition on the pod's UID, so a new pod of the same name is
// never deleted. Until then the API server keeps the object, which is what
// lets a StatefulSet or a user wait for the containers to be really gone.
//
// Give its PodTerminated to agent.Config.PodTerminated; the agent calls it
// when the pod's worker has finished, and again after an error.
type PodDeleter struct {
	cfg     PodDeleterConfig
	deleted atomic.Int64
}

// NewPodDeleter checks cfg. It does no I/O and starts nothing.
func NewPodDeleter(cfg PodDeleterConfig) (*PodDeleter, error) {
	if cfg.Client == nil {
		return nil, errors.New("kube: PodDeleterConfig.Client is required")
	}
	if err := defaultDuration("PodDeleterConfig", "RequestTimeout", &cfg.RequestTimeout, DefaultRequestTimeout); err != nil {
		return nil, err
	}
	if cfg.Logger.GetSink() == nil {
		cfg.Logger = logr.Discard()
	}
	return &PodDeleter{cfg: cfg}, nil
}

// ErrFinalStatusPending is what PodTerminated returns while the API
// server does not yet hold the pod's final, terminal status.
var ErrFinalStatusPending = errors.New("the final status is not yet in the API server")

// Deleted returns how many pod objects were deleted. Safe for concurrent
// use.
func (d *PodDeleter) Deleted() int64 { return d.deleted.Load() }

// PodTerminated deletes the pod object with grace period 0 and a UID
// precondition, when the pod came from the API server, is not a mirror
// pod and has a deletionTimestamp; any other pod (a static pod, a pod that
// merely ended in Succeeded or Failed) is left alone and nil returned. A
// pod already gone, or replaced by one of another UID, is nil too. The
// object goes only once the API server holds the pod's final, terminal
// status, as the kubelet's status manager deletes it; until then it
// returns ErrFinalStatusPending. It blocks for at most two calls to the
// API server (a read and the delete) and is safe for
// concurrent use; the error wraps the API server's (apierrors classifies
// it), and the agent calls again after it.
func (d *PodDeleter) PodTerminated(ctx context.Context, pod *v1.Pod) error {
	if pod.DeletionTimestamp == nil ||
		pod.Annotations[podsource.AnnotationConfigSource] != podsource.SourceAPI {
		return nil
	}
	if _, mirror := pod.Annotations[podsource.AnnotationConfigMirror]; mirror {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	pods := d.cfg.Client.CoreV1().Pods(pod.Namespace)
	// As the kubelet's status manager, the object goes only once its
	// final, terminal status is in the API server: a controller watching
	// the pod (a Job's) must see how it ended. Until the sink has written
	// it this fails, and the agent calls again after a back-off.
	cur, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case apierrors.IsForbidden(err):
		// The Node authorizer refuses to read a pod that is gone as well
		// as one bound elsewhere; the delete below tells them apart
		// (NotFound, or Forbidden). A pod bound here is always readable,
		// so its final status was checked.
	case err != nil:
		return fmt.Errorf("kube: get pod %s/%s: %w", pod.Namespace, pod.Name, err)
	case cur.UID != pod.UID:
		return nil // the name now holds another pod
	case cur.Status.Phase != v1.PodSucceeded && cur.Status.Phase != v1.PodFailed:
		return fmt.Errorf("kube: pod %s/%s: %w (phase %q in the API server)", pod.Namespace, pod.Name, ErrFinalStatusPending, cur.Status.Phase)
	}
	zero := int64(0)
	uid := pod.UID
	err = pods.Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero,
		Preconditions:      &metav1.Preconditions{UID: &uid},
	})
	switch {
	case err == nil:
		d.deleted.Add(1)
		d.cfg.Logger.V(2).Info("pod deleted", "pod", pod.Namespace+"/"+pod.Name, "podUID", pod.UID)
		return nil
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		// Gone already, or the name now holds another pod (the UID
		// precondition failed): nothing of ours is left to delete.
		return nil
	default:
		return fmt.Errorf("kube: delete pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
}
