package podsource

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validate checks a pod as the API server checks one it is asked to
// create: the API server's defaults are applied (to a copy; pod is not
// modified), then the rules of its pod validation that a node can check
// without the rest of the cluster: the object metadata (name, namespace,
// label and annotation syntax, the 256 KiB annotation budget), the
// containers, the volumes and the pod-wide fields. doc.go lists what is
// checked and what is left to the API server. The errors name the field.
//
// As on create, a pod may not have ephemeral containers: they are added
// to a running pod later. The Merger, which also sees pods updated that
// way, accepts them (and checks them as the API server does).
func Validate(pod *v1.Pod) field.ErrorList {
	pod = pod.DeepCopy()
	applyDefaults(pod)
	return append(validatePod(pod), validateCreate(pod)...)
}

// maxListedErrors bounds the errors the message about an invalid pod
// lists; the others are only counted.
const maxListedErrors = 100

// maxShownItems bounds the items of a list or map value an error message
// spells out.
const maxShownItems = 100

// invalidError is the error of a pod that fails validation. Its message
// lists the field errors as the API server's aggregate error does ("a" for
// one, "[a, b]" for several, a repeated message once), but at most
// maxListedErrors of them before the count of the others, and a value of
// more than maxShownItems items as its count, so that a pod with millions
// of errors costs a message of bounded size, built in linear time.
type invalidError struct {
	msg  string
	errs field.ErrorList
}

func (e *invalidError) Error() string { return e.msg }

// Unwrap gives the field errors, for errors.As.
func (e *invalidError) Unwrap() []error {
	out := make([]error, len(e.errs))
	for i, fe := range e.errs {
		out[i] = fe
	}
	return out
}

// joinErrors is nil for no errors, else an invalidError.
func joinErrors(errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	var b strings.Builder
	seen := make(map[string]bool, min(len(errs), maxListedErrors))
	listed, i := 0, 0
	for ; i < len(errs) && listed < maxListedErrors; i++ {
		msg := errorText(errs[i])
		if seen[msg] {
			continue
		}
		seen[msg] = true
		if listed > 0 {
			b.WriteString(", ")
		}
		b.WriteString(msg)
		listed++
	}
	msg := b.String()
	if rest := len(errs) - i; rest > 0 {
		msg = fmt.Sprintf("[%s] and %d more errors", msg, rest)
	} else if listed > 1 {
		msg = "[" + msg + "]"
	}
	return &invalidError{msg: msg, errs: errs}
}

// errorText is e.Error(), but with a list or map value of more than
// maxShownItems items given as its count: some errors carry a whole list,
// one error per item of it.
func errorText(e *field.Error) string {
	switch e.Type {
	case field.ErrorTypeInvalid, field.ErrorTypeTypeInvalid, field.ErrorTypeNotSupported, field.ErrorTypeNotFound,
		field.ErrorTypeDuplicate, field.ErrorTypeTooMany, field.ErrorTypeTooFew:
	default:
		return e.Error()
	}
	v := reflect.ValueOf(e.BadValue)
	for v.Kind() == reflect.Pointer && !v.IsNil() {
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.Slice, reflect.Array, reflect.Map:
		if n := v.Len(); n > maxShownItems {
			short := *e
			short.BadValue = fmt.Sprintf("<%d items>", n)
			return short.Error()
		}
	}
	return e.Error()
}

// validateCreate holds the rules the API server applies only to a pod
// being created: no ephemeral containers.
func validateCreate(pod *v1.Pod) field.ErrorList {
	if len(pod.Spec.EphemeralContainers) > 0 {
		return field.ErrorList{field.Forbidden(field.NewPath("spec", "ephemeralContainers"), "cannot be set on create")}
	}
	return nil
}

// validatePod is Validate on a pod whose defaults are applied, without
// the rules for creation alone: ephemeral containers are checked, not
// refused.
func validatePod(pod *v1.Pod) field.ErrorList {
	meta := field.NewPath("metadata")
	errs := apivalidation.ValidateObjectMeta(&pod.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, meta)
	errs = append(errs, validateSpec(pod, field.NewPath("spec"))...)
	return errs
}

func validateSpec(pod *v1.Pod, path *field.Path) field.ErrorList {
	spec := &pod.Spec
	var errs field.ErrorList
	add := func(e ...*field.Error) { errs = append(errs, e...) }

	grace := spec.TerminationGracePeriodSeconds
	if grace == nil {
		add(field.Required(path.Child("terminationGracePeriodSeconds"), ""))
	} else {
		add(apivalidation.ValidateNonnegativeField(*grace, path.Child("terminationGracePeriodSeconds"))...)
	}

	volumes, verrs := validateVolumes(spec.Volumes, spec.ServiceAccountName, path.Child("volumes"))
	add(verrs...)
	add(validateContainers(spec, volumes, path)...)
	add(validateEnvFileVolumes(spec, volumes, path)...)

	switch spec.RestartPolicy {
	case v1.RestartPolicyAlways, v1.RestartPolicyOnFailure, v1.RestartPolicyNever:
	case "":
		add(field.Required(path.Child("restartPolicy"), ""))
	default:
		add(field.NotSupported(path.Child("restartPolicy"), spec.RestartPolicy, []v1.RestartPolicy{v1.RestartPolicyAlways, v1.RestartPolicyOnFailure, v1.RestartPolicyNever}))
	}
	switch spec.DNSPolicy {
	case v1.DNSClusterFirst, v1.DNSClusterFirstWithHostNet, v1.DNSDefault, v1.DNSNone:
	case "":
		add(field.Required(path.Child("dnsPolicy"), ""))
	default:
		add(field.NotSupported(path.Child("dnsPolicy"), spec.DNSPolicy, []v1.DNSPolicy{v1.DNSClusterFirst, v1.DNSClusterFirstWithHostNet, v1.DNSDefault, v1.DNSNone}))
	}
	add(validateDNSConfig(spec, path.Child("dnsConfig"))...)

	if spec.HostNetwork {
		for i, c := range spec.Containers {
			for j, p := range c.Ports {
				if p.HostPort != p.ContainerPort {
					add(field.Invalid(path.Child("containers").Index(i).Child("ports").Index(j).Child("hostPort"), p.HostPort, "must match `containerPort` when `hostNetwork` is true"))
				}
			}
		}
	}
	add(metavalidation.ValidateLabels(spec.NodeSelector, path.Child("nodeSelector"))...)
	add(validatePodSecurityContext(spec, path.Child("securityContext"))...)
	if spec.ShareProcessNamespace != nil && *spec.ShareProcessNamespace && spec.HostPID {
		add(field.Invalid(path.Child("shareProcessNamespace"), true, "cannot be true together with hostPID"))
	}
	for i, s := range spec.ImagePullSecrets {
		if s.Name == "" {
			add(field.Required(path.Child("imagePullSecrets").Index(i).Child("name"), ""))
		}
	}
	for i, g := range spec.ReadinessGates {
		for _, msg := range validation.IsQualifiedName(string(g.ConditionType)) {
			add(field.Invalid(path.Child("readinessGates").Index(i).Child("conditionType"), g.ConditionType, msg))
		}
	}
	if len(spec.SchedulingGates) > 0 {
		add(field.Forbidden(path.Child("schedulingGates"), "a pod on a node is already scheduled"))
	}
	if spec.ServiceAccountName != "" {
		add(dnsSubdomain(spec.ServiceAccountName, path.Child("serviceAccountName"))...)
	}
	if spec.DeprecatedServiceAccount != spec.ServiceAccountName { //nolint:staticcheck // the API server keeps the alias in sync
		add(field.Invalid(path.Child("deprecatedServiceAccount"), spec.DeprecatedServiceAccount, "must be the same as serviceAccountName")) //nolint:staticcheck
	}
	if d := spec.ActiveDeadlineSeconds; d != nil && (*d < 1 || *d > math.MaxInt32) {
		add(field.Invalid(path.Child("activeDeadlineSeconds"), *d, validation.InclusiveRangeError(1, math.MaxInt32)))
	}
	if spec.Hostname != "" {
		add(dnsLabel(spec.Hostname, path.Child("hostname"))...)
	}
	if spec.Subdomain != "" {
		add(dnsLabel(spec.Subdomain, path.Child("subdomain"))...)
	}
	if h := spec.HostnameOverride; h != nil {
		p := path.Child("hostnameOverride")
		if spec.SetHostnameAsFQDN != nil && *spec.SetHostnameAsFQDN {
			add(field.Forbidden(p, "may not be set when setHostnameAsFQDN is true"))
		}
		if spec.HostNetwork {
			add(field.Forbidden(p, "may not be set when hostNetwork is true"))
		}
		if len(*h) > 64 {
			add(field.TooLong(p, "", 64))
		}
		add(dnsSubdomain(*h, p)...)
	}
	add(validateTolerations(spec.Tolerations, path.Child("tolerations"))...)
	for i, a := range spec.HostAliases {
		p := path.Child("hostAliases").Index(i)
		add(validation.IsValidIP(p.Child("ip"), a.IP)...)
		for j, h := range a.Hostnames {
			add(dnsSubdomain(h, p.Child("hostnames").Index(j))...)
		}
	}
	if spec.PriorityClassName != "" {
		add(dnsSubdomain(spec.PriorityClassName, path.Child("priorityClassName"))...)
	}
	if spec.RuntimeClassName != nil {
		add(dnsSubdomain(*spec.RuntimeClassName, path.Child("runtimeClassName"))...)
	}
	if p := spec.PreemptionPolicy; p != nil {
		switch *p {
		case v1.PreemptLowerPriority, v1.PreemptNever:
		default:
			add(field.NotSupported(path.Child("preemptionPolicy"), *p, []v1.PreemptionPolicy{v1.PreemptLowerPriority, v1.PreemptNever}))
		}
	}
	for name, q := range spec.Overhead {
		add(nonNegativeQuantity(q, path.Child("overhead").Key(string(name)))...)
	}
	if spec.OS != nil {
		switch spec.OS.Name {
		case v1.Linux, v1.Windows:
		case "":
			add(field.Required(path.Child("os", "name"), ""))
		default:
			add(field.NotSupported(path.Child("os", "name"), spec.OS.Name, []v1.OSName{v1.Linux, v1.Windows}))
		}
	}
	if spec.HostUsers != nil && !*spec.HostUsers {
		if spec.HostPID {
			add(field.Forbidden(path.Child("hostPID"), "when `hostUsers` is false"))
		}
		if spec.HostIPC {
			add(field.Forbidden(path.Child("hostIPC"), "when `hostUsers` is false"))
		}
	}
	return errs
}

func validateDNSConfig(spec *v1.PodSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	c := spec.DNSConfig
	if spec.DNSPolicy == v1.DNSNone {
		if c == nil {
			return append(errs, field.Required(path, "must be set when `dnsPolicy` is None"))
		}
		if len(c.Nameservers) == 0 {
			return append(errs, field.Required(path.Child("nameservers"), "at least one is needed when `dnsPolicy` is None"))
		}
	}
	if c == nil {
		return nil
	}
	if len(c.Nameservers) > 3 {
		errs = append(errs, field.Invalid(path.Child("nameservers"), c.Nameservers, "must not have more than 3 nameservers"))
	}
	for i, ns := range c.Nameservers {
		errs = append(errs, validation.IsValidIP(path.Child("nameservers").Index(i), ns)...)
	}
	if len(c.Searches) > 32 {
		errs = append(errs, field.Invalid(path.Child("searches"), c.Searches, "must not have more than 32 search paths"))
	}
	if len(strings.Join(c.Searches, " ")) > 2048 {
		errs = append(errs, field.Invalid(path.Child("searches"), c.Searches, "must not have more than 2048 characters, spaces included"))
	}
	for i, s := range c.Searches {
		if s == "." {
			continue
		}
		s = strings.TrimSuffix(s, ".")
		for _, msg := range validation.IsDNS1123SubdomainWithUnderscore(s) {
			errs = append(errs, field.Invalid(path.Child("searches").Index(i), s, msg))
		}
	}
	for i, o := range c.Options {
		if o.Name == "" {
			errs = append(errs, field.Required(path.Child("options").Index(i).Child("name"), ""))
		}
	}
	return errs
}

func validateTolerations(tolerations []v1.Toleration, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, t := range tolerations {
		p := path.Index(i)
		if t.Key != "" {
			errs = append(errs, metavalidation.ValidateLabelName(t.Key, p.Child("key"))...)
		} else if t.Operator != v1.TolerationOpExists {
			errs = append(errs, field.Invalid(p.Child("operator"), t.Operator, "must be Exists when `key` is empty"))
		}
		if t.TolerationSeconds != nil && t.Effect != v1.TaintEffectNoExecute {
			errs = append(errs, field.Invalid(p.Child("effect"), t.Effect, "must be NoExecute when `tolerationSeconds` is set"))
		}
		switch t.Operator {
		case v1.TolerationOpEqual, "":
			for _, msg := range validation.IsValidLabelValue(t.Value) {
				errs = append(errs, field.Invalid(p.Child("value"), t.Value, msg))
			}
		case v1.TolerationOpExists:
			if t.Value != "" {
				errs = append(errs, field.Invalid(p.Child("value"), t.Value, "must be empty when `operator` is Exists"))
			}
		case v1.TolerationOpLt, v1.TolerationOpGt:
			if _, err := strconv.ParseInt(t.Value, 10, 64); err != nil {
				errs = append(errs, field.Invalid(p.Child("value"), t.Value, "must be a decimal integer"))
			}
		default:
			errs = append(errs, field.NotSupported(p.Child("operator"), t.Operator, []v1.TolerationOperator{v1.TolerationOpEqual, v1.TolerationOpExists, v1.TolerationOpLt, v1.TolerationOpGt}))
		}
		switch t.Effect {
		case "", v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute:
		default:
			errs = append(errs, field.NotSupported(p.Child("effect"), t.Effect, []v1.TaintEffect{v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute}))
		}
	}
	return errs
}

func validatePodSecurityContext(spec *v1.PodSpec, path *field.Path) field.ErrorList {
	sc := spec.SecurityContext
	if sc == nil {
		return nil
	}
	var errs field.ErrorList
	errs = append(errs, ids(sc.RunAsUser, sc.RunAsGroup, path)...)
	if sc.FSGroup != nil {
		for _, msg := range validation.IsValidGroupID(*sc.FSGroup) {
			errs = append(errs, field.Invalid(path.Child("fsGroup"), *sc.FSGroup, msg))
		}
	}
	for i, g := range sc.SupplementalGroups {
		for _, msg := range validation.IsValidGroupID(g) {
			errs = append(errs, field.Invalid(path.Child("supplementalGroups").Index(i), g, msg))
		}
	}
	if p := sc.FSGroupChangePolicy; p != nil && *p != v1.FSGroupChangeAlways && *p != v1.FSGroupChangeOnRootMismatch {
		errs = append(errs, field.NotSupported(path.Child("fsGroupChangePolicy"), *p, []v1.PodFSGroupChangePolicy{v1.FSGroupChangeAlways, v1.FSGroupChangeOnRootMismatch}))
	}
	if p := sc.SupplementalGroupsPolicy; p != nil && *p != v1.SupplementalGroupsPolicyMerge && *p != v1.SupplementalGroupsPolicyStrict {
		errs = append(errs, field.NotSupported(path.Child("supplementalGroupsPolicy"), *p, []v1.SupplementalGroupsPolicy{v1.SupplementalGroupsPolicyMerge, v1.SupplementalGroupsPolicyStrict}))
	}
	if p := sc.SELinuxChangePolicy; p != nil && *p != v1.SELinuxChangePolicyRecursive && *p != v1.SELinuxChangePolicyMountOption {
		errs = append(errs, field.NotSupported(path.Child("seLinuxChangePolicy"), *p, []v1.PodSELinuxChangePolicy{v1.SELinuxChangePolicyRecursive, v1.SELinuxChangePolicyMountOption}))
	}
	names := sets.New[string]()
	for i, s := range sc.Sysctls {
		p := path.Child("sysctls").Index(i).Child("name")
		switch {
		case s.Name == "":
			errs = append(errs, field.Required(p, ""))
		case !isSysctlName(s.Name):
			errs = append(errs, field.Invalid(p, s.Name, "must be a sysctl name, dot- or slash-separated lower-case words"))
		case names.Has(s.Name):
			errs = append(errs, field.Duplicate(p, s.Name))
		}
		names.Insert(s.Name)
	}
	errs = append(errs, validateSeccomp(sc.SeccompProfile, path.Child("seccompProfile"))...)
	errs = append(errs, validateAppArmor(sc.AppArmorProfile, path.Child("appArmorProfile"))...)
	return errs
}

// isSysctlName reports whether s looks like a sysctl: words of [a-z0-9_-]
// that start and end with an alphanumeric, joined by '.' or '/'.
func isSysctlName(s string) bool {
	if len(s) > 253 {
		return false
	}
	for _, w := range strings.FieldsFunc(s, func(r rune) bool { return r == '.' || r == '/' }) {
		if !isSysctlWord(w) {
			return false
		}
	}
	return !strings.HasPrefix(s, ".") && !strings.HasPrefix(s, "/") && !strings.HasSuffix(s, ".") && !strings.HasSuffix(s, "/") &&
		!strings.Contains(s, "..") && !strings.Contains(s, "//") && !strings.Contains(s, "./") && !strings.Contains(s, "/.")
}

func isSysctlWord(w string) bool {
	alnum := func(b byte) bool { return b >= 'a' && b <= 'z' || b >= '0' && b <= '9' }
	if w == "" || !alnum(w[0]) || !alnum(w[len(w)-1]) {
		return false
	}
	for i := 0; i < len(w); i++ {
		if !alnum(w[i]) && w[i] != '-' && w[i] != '_' {
			return false
		}
	}
	return true
}

func ids(user, group *int64, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if user != nil {
		for _, msg := range validation.IsValidUserID(*user) {
			errs = append(errs, field.Invalid(path.Child("runAsUser"), *user, msg))
		}
	}
	if group != nil {
		for _, msg := range validation.IsValidGroupID(*group) {
			errs = append(errs, field.Invalid(path.Child("runAsGroup"), *group, msg))
		}
	}
	return errs
}

func validateSeccomp(p *v1.SeccompProfile, path *field.Path) field.ErrorList {
	if p == nil {
		return nil
	}
	var errs field.ErrorList
	switch p.Type {
	case v1.SeccompProfileTypeLocalhost:
		if p.LocalhostProfile == nil {
			errs = append(errs, field.Required(path.Child("localhostProfile"), "must be set when type is Localhost"))
		} else {
			errs = append(errs, localDescendingPath(*p.LocalhostProfile, path.Child("localhostProfile"))...)
		}
		return errs
	case v1.SeccompProfileTypeRuntimeDefault, v1.SeccompProfileTypeUnconfined:
	case "":
		errs = append(errs, field.Required(path.Child("type"), ""))
	default:
		errs = append(errs, field.NotSupported(path.Child("type"), p.Type, []v1.SeccompProfileType{v1.SeccompProfileTypeLocalhost, v1.SeccompProfileTypeRuntimeDefault, v1.SeccompProfileTypeUnconfined}))
	}
	if p.LocalhostProfile != nil {
		errs = append(errs, field.Invalid(path.Child("localhostProfile"), *p.LocalhostProfile, "can only be set when type is Localhost"))
	}
	return errs
}

func validateAppArmor(p *v1.AppArmorProfile, path *field.Path) field.ErrorList {
	if p == nil {
		return nil
	}
	var errs field.ErrorList
	switch p.Type {
	case v1.AppArmorProfileTypeLocalhost:
		switch {
		case p.LocalhostProfile == nil || *p.LocalhostProfile == "":
			errs = append(errs, field.Required(path.Child("localhostProfile"), "must be set when type is Localhost"))
		case strings.TrimSpace(*p.LocalhostProfile) != *p.LocalhostProfile:
			errs = append(errs, field.Invalid(path.Child("localhostProfile"), *p.LocalhostProfile, "must not be padded with whitespace"))
		case len(*p.LocalhostProfile) > 4095:
			errs = append(errs, field.TooLong(path.Child("localhostProfile"), "", 4095))
		}
		return errs
	case v1.AppArmorProfileTypeRuntimeDefault, v1.AppArmorProfileTypeUnconfined:
	case "":
		errs = append(errs, field.Required(path.Child("type"), ""))
	default:
		errs = append(errs, field.NotSupported(path.Child("type"), p.Type, []v1.AppArmorProfileType{v1.AppArmorProfileTypeLocalhost, v1.AppArmorProfileTypeRuntimeDefault, v1.AppArmorProfileTypeUnconfined}))
	}
	if p.LocalhostProfile != nil {
		errs = append(errs, field.Invalid(path.Child("localhostProfile"), *p.LocalhostProfile, "can only be set when type is Localhost"))
	}
	return errs
}

func dnsLabel(s string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(s) {
		errs = append(errs, field.Invalid(path, s, msg))
	}
	return errs
}

func dnsSubdomain(s string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(s) {
		errs = append(errs, field.Invalid(path, s, msg))
	}
	return errs
}

// noBacksteps refuses a path with a ".." element.
func noBacksteps(p string, path *field.Path) field.ErrorList {
	for _, part := range strings.Split(strings.ReplaceAll(p, `\`, "/"), "/") {
		if part == ".." {
			return field.ErrorList{field.Invalid(path, p, "must not contain '..'")}
		}
	}
	return nil
}

// localDescendingPath refuses an absolute path or one with a ".." element.
func localDescendingPath(p string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if strings.HasPrefix(p, "/") {
		errs = append(errs, field.Invalid(path, p, "must be a relative path"))
	}
	return append(errs, noBacksteps(p, path)...)
}

// localNonReservedPath is localDescendingPath that also refuses a path
// starting with "..", which the atomic writer keeps for itself.
func localNonReservedPath(p string, path *field.Path) field.ErrorList {
	errs := localDescendingPath(p, path)
	if strings.HasPrefix(p, "..") && !strings.HasPrefix(p, "../") {
		errs = append(errs, field.Invalid(path, p, "must not start with '..'"))
	}
	return errs
}
