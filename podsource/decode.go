package podsource

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// decode parses a manifest, YAML or JSON, holding a Pod or (allowList) a
// PodList, as the kubelet's decoder does: field names match exactly
// ("Name" is not "name"), unknown fields are ignored, and of a key given
// twice the last value counts.
func decode(data []byte, allowList bool) ([]*v1.Pod, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("not YAML or JSON: %w", err)
	}
	if t := bytes.TrimSpace(js); len(t) == 0 || string(t) == "null" {
		return nil, errors.New("holds no object (empty, or only comments)")
	}
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(js, &head); err != nil {
		return nil, fmt.Errorf("not an object: %w", err)
	}
	if head.APIVersion != "" && head.APIVersion != "v1" {
		return nil, fmt.Errorf("apiVersion: unsupported %q, want v1", head.APIVersion)
	}
	switch head.Kind {
	case "Pod", "":
		var pod v1.Pod
		if err := kjson.UnmarshalCaseSensitivePreserveInts(js, &pod); err != nil {
			return nil, err
		}
		return []*v1.Pod{&pod}, nil
	case "PodList":
		if !allowList {
			return nil, fmt.Errorf("kind: a manifest file holds one Pod, not a PodList")
		}
		var list v1.PodList
		if err := kjson.UnmarshalCaseSensitivePreserveInts(js, &list); err != nil {
			return nil, err
		}
		out := make([]*v1.Pod, len(list.Items))
		for i := range list.Items {
			out[i] = &list.Items[i]
		}
		return out, nil
	}
	return nil, fmt.Errorf("kind: unsupported %q, want Pod", head.Kind)
}

// makeStatic turns a decoded pod into the static pod the kubelet makes of
// it: defaults applied, the name suffixed with the node name, a UID
// derived from the node, the origin and the content, the config
// annotations, the node name, and a toleration of NoExecute taints. It
// returns the validation errors, if any.
func makeStatic(pod *v1.Pod, source, origin, nodeName string, seen time.Time) error {
	if pod.Name == "" {
		return field.Required(field.NewPath("metadata", "name"), "a static pod needs a name")
	}
	applyDefaults(pod)
	node := strings.ToLower(nodeName)
	if node != "" && !strings.HasSuffix(pod.Name, "-"+node) {
		pod.Name = pod.Name + "-" + node
	}
	pod.Spec.NodeName = nodeName
	if errs := append(validatePod(pod), validateCreate(pod)...); len(errs) > 0 {
		return fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, joinErrors(errs))
	}
	content, err := json.Marshal(pod)
	if err != nil {
		return err
	}
	h := sha256.New()
	fmt.Fprintf(h, "host:%s\n%s:%s\n", nodeName, source, origin)
	h.Write(content)
	uid := hex.EncodeToString(h.Sum(nil))[:32]
	pod.UID = types.UID(uid)
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[AnnotationConfigHash] = uid
	pod.Annotations[AnnotationConfigSource] = source
	pod.Annotations[AnnotationConfigSeen] = seen.UTC().Format(time.RFC3339Nano)
	pod.Spec.Tolerations = append(pod.Spec.Tolerations, v1.Toleration{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute})
	return nil
}

// DefaultMaxManifestBytes bounds a manifest file or an HTTP body, as the
// kubelet does.
const DefaultMaxManifestBytes = 10 << 20

// readBounded reads r whole unless it holds more than max bytes.
func readBounded(r io.Reader, max int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("more than the limit of %d bytes", max)
	}
	return data, nil
}
