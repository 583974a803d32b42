package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// statusLoop syncs the status now and then every NodeStatusUpdateFrequency
// until ctx ends.
func (n *Node) statusLoop(ctx context.Context) {
	for {
		if err := n.syncStatus(ctx); err != nil && ctx.Err() == nil {
			n.log.Error(err, "cannot update the node status; retrying", "after", n.cfg.NodeStatusUpdateFrequency)
		}
		if !n.wait(ctx, n.cfg.NodeStatusUpdateFrequency) {
			return
		}
	}
}

// syncStatus computes the status and patches it when it changed or was
// last reported NodeStatusReportFrequency ago. It tries up to 5 times: the
// first read may come from the API server's cache, the others from etcd.
// A Node that was deleted is registered again.
func (n *Node) syncStatus(ctx context.Context) error {
	var err error
	for try := 0; try < statusUpdateRetries; try++ {
		if err = n.tryUpdateStatus(ctx, try); err == nil {
			return nil
		}
		if apierrors.IsNotFound(err) {
			n.log.Info("the node object is gone; registering it again")
			if err = n.register(ctx); err != nil {
				return err
			}
			continue
		}
		if ctx.Err() != nil {
			return err
		}
	}
	return err
}

func (n *Node) tryUpdateStatus(ctx context.Context, try int) error {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.RequestTimeout)
	defer cancel()
	opts := metav1.GetOptions{}
	if try == 0 {
		opts.ResourceVersion = "0"
	}
	orig, err := n.client.CoreV1().Nodes().Get(ctx, n.cfg.Name, opts)
	if err != nil {
		return fmt.Errorf("kube: get node %s: %w", n.cfg.Name, err)
	}
	updated := orig.DeepCopy()
	n.setStatus(ctx, updated, orig)
	now := n.clock.Now()
	n.mu.Lock()
	last := n.lastReport
	n.mu.Unlock()
	if !statusChanged(&orig.Status, &updated.Status) && !last.IsZero() && now.Sub(last) < n.cfg.NodeStatusReportFrequency {
		n.log.V(4).Info("node status unchanged; not patched")
		return nil
	}
	if _, err := n.patchStatus(ctx, orig, updated); err != nil {
		return fmt.Errorf("kube: patch node %s status: %w", n.cfg.Name, err)
	}
	n.readyEvent(orig, updated)
	n.mu.Lock()
	n.lastReport = now
	n.mu.Unlock()
	n.log.V(2).Info("patched the node status")
	return nil
}

// patchStatus patches the status subresource from old to updated. The
// addresses list is replaced whole: its merge key (type) would otherwise
// fold several addresses of one type into one.
func (n *Node) patchStatus(ctx context.Context, old, updated *v1.Node) (*v1.Node, error) {
	diff := updated.DeepCopy()
	diff.Spec = old.Spec
	replaceAddresses := len(old.Status.Addresses) > 0 && !equality.Semantic.DeepEqual(old.Status.Addresses, updated.Status.Addresses)
	if replaceAddresses {
		diff.Status.Addresses = old.Status.Addresses
	}
	data, err := nodePatch(old, diff)
	if err != nil {
		return nil, err
	}
	if replaceAddresses {
		if data, err = replaceAddressesInPatch(data, updated.Status.Addresses); err != nil {
			return nil, err
		}
	}
	return n.client.CoreV1().Nodes().Patch(ctx, n.cfg.Name, types.StrategicMergePatchType, data, metav1.PatchOptions{}, "status")
}

func replaceAddressesInPatch(patch []byte, addrs []v1.NodeAddress) ([]byte, error) {
	var m map[string]any
	if err := json.Unmarshal(patch, &m); err != nil {
		return nil, fmt.Errorf("kube: node patch: %w", err)
	}
	status, _ := m["status"].(map[string]any)
	if status == nil {
		status = map[string]any{}
		m["status"] = status
	}
	list := []any{map[string]any{"$patch": "replace"}}
	for _, a := range addrs {
		list = append(list, a)
	}
	status["addresses"] = list
	delete(status, "$setElementOrder/addresses")
	return json.Marshal(m)
}

// setStatus fills node.Status from the providers. orig is the Node as the
// API server has it (nil at registration): a condition whose status did
// not change keeps its lastTransitionTime, and a provider that fails keeps
// the value orig has.
func (n *Node) setStatus(ctx context.Context, node *v1.Node, orig *v1.Node) {
	now := metav1.NewTime(n.clock.Now())
	st := &node.Status

	capacity, err := n.cfg.Resources.Capacity()
	if err != nil {
		n.log.Error(err, "cannot read the node capacity; keeping the last one")
		capacity = st.Capacity.DeepCopy()
	}
	if capacity == nil {
		capacity = v1.ResourceList{}
	}
	if _, ok := capacity[v1.ResourcePods]; !ok {
		capacity[v1.ResourcePods] = *resource.NewQuantity(int64(n.cfg.MaxPods), resource.DecimalSI)
	}
	st.Capacity = capacity
	st.Allocatable = allocatable(capacity, n.cfg.Reserved)

	var addrs []v1.NodeAddress
	for _, ip := range n.cfg.NodeIPs {
		addrs = append(addrs, v1.NodeAddress{Type: v1.NodeInternalIP, Address: ip.String()})
	}
	addrs = append(addrs, v1.NodeAddress{Type: v1.NodeHostName, Address: n.cfg.Hostname})
	st.Addresses = addrs
	st.DaemonEndpoints.KubeletEndpoint.Port = n.cfg.DaemonPort
	if len(n.cfg.DeclaredFeatures) > 0 {
		st.DeclaredFeatures = slices.Clone(n.cfg.DeclaredFeatures)
	} else {
		st.DeclaredFeatures = nil
	}

	info, err := n.cfg.SystemInfo()
	if err != nil {
		n.log.Error(err, "cannot read the system info; keeping the last one")
		info = st.NodeInfo
	}
	info.KubeletVersion = n.cfg.KubeletVersion
	info.ContainerRuntimeVersion = n.containerRuntimeVersion(ctx)
	st.NodeInfo = info

	p := n.cfg.Conditions.Pressure()
	health := n.cfg.Health()
	conds := []v1.NodeCondition{
		pressureCondition(v1.NodeMemoryPressure, p.Memory, "KubeletHasInsufficientMemory", "kubelet has insufficient memory available", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
		pressureCondition(v1.NodeDiskPressure, p.Disk, "KubeletHasDiskPressure", "kubelet has disk pressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
		pressureCondition(v1.NodePIDPressure, p.PID, "KubeletHasInsufficientPID", "kubelet has insufficient PID available", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
		readyCondition(health),
	}
	var old []v1.NodeCondition
	if orig != nil {
		old = orig.Status.Conditions
	}
	for i := range conds {
		c := &conds[i]
		c.LastHeartbeatTime = now
		c.LastTransitionTime = now
		if prev := findCondition(old, c.Type); prev != nil && prev.Status == c.Status {
			c.LastTransitionTime = prev.LastTransitionTime
		}
	}
	// Conditions set by others (NetworkUnavailable, from a CNI or cloud
	// controller) stay as they are.
	for _, c := range old {
		if findCondition(conds, c.Type) == nil {
			conds = append(conds, c)
		}
	}
	st.Conditions = conds
}

// containerRuntimeVersion asks the runtime for its version; on failure it
// keeps the last one known.
func (n *Node) containerRuntimeVersion(ctx context.Context) string {
	if n.cfg.Runtime == nil {
		return ""
	}
	v, err := n.cfg.Runtime.Version(ctx, "v1")
	n.mu.Lock()
	defer n.mu.Unlock()
	if err != nil {
		n.log.Error(err, "cannot get the container runtime version")
		return n.runtimeVersion
	}
	n.runtimeVersion = fmt.Sprintf("%s://%s", v.GetRuntimeName(), v.GetRuntimeVersion())
	return n.runtimeVersion
}

func pressureCondition(t v1.NodeConditionType, under bool, reasonTrue, msgTrue, reasonFalse, msgFalse string) v1.NodeCondition {
	if under {
		return v1.NodeCondition{Type: t, Status: v1.ConditionTrue, Reason: reasonTrue, Message: msgTrue}
	}
	return v1.NodeCondition{Type: t, Status: v1.ConditionFalse, Reason: reasonFalse, Message: msgFalse}
}

func readyCondition(health error) v1.NodeCondition {
	if health != nil {
		return v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionFalse, Reason: "KubeletNotReady", Message: health.Error()}
	}
	return v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status"}
}

func findCondition(conds []v1.NodeCondition, t v1.NodeConditionType) *v1.NodeCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// statusChanged reports whether two statuses differ other than in the
// conditions' heartbeat times.
func statusChanged(a, b *v1.NodeStatus) bool {
	ac, bc := a.DeepCopy(), b.DeepCopy()
	for _, cs := range [][]v1.NodeCondition{ac.Conditions, bc.Conditions} {
		for i := range cs {
			cs[i].LastHeartbeatTime = metav1.Time{}
		}
	}
	return !equality.Semantic.DeepEqual(ac, bc)
}
