package podsource

import (
	"path"
	"reflect"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateVolumes checks the pod's volumes and returns the valid ones by
// name, for the mounts to refer to.
func validateVolumes(volumes []v1.Volume, serviceAccount string, p *field.Path) (map[string]v1.VolumeSource, field.ErrorList) {
	var errs field.ErrorList
	valid := map[string]v1.VolumeSource{}
	names := sets.New[string]()
	for i := range volumes {
		v := &volumes[i]
		vp := p.Index(i)
		el := validateVolumeSource(&v.VolumeSource, serviceAccount, vp)
		if v.Name == "" {
			el = append(el, field.Required(vp.Child("name"), ""))
		} else {
			el = append(el, dnsLabel(v.Name, vp.Child("name"))...)
		}
		if names.Has(v.Name) {
			el = append(el, field.Duplicate(vp.Child("name"), v.Name))
		}
		if len(el) > 0 {
			errs = append(errs, el...)
			continue
		}
		names.Insert(v.Name)
		valid[v.Name] = v.VolumeSource
	}
	return valid, errs
}

// setSources lists the JSON names of the volume types that are set.
func setSources(src any) []string {
	var set []string
	val := reflect.ValueOf(src).Elem()
	for i := 0; i < val.NumField(); i++ {
		f := val.Field(i)
		if f.Kind() == reflect.Pointer && !f.IsNil() {
			name := val.Type().Field(i).Tag.Get("json")
			for j := 0; j < len(name); j++ {
				if name[j] == ',' {
					name = name[:j]
					break
				}
			}
			set = append(set, name)
		}
	}
	return set
}

func validateVolumeSource(src *v1.VolumeSource, serviceAccount string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	add := func(e ...*field.Error) { errs = append(errs, e...) }
	set := setSources(src)
	switch len(set) {
	case 0:
		return field.ErrorList{field.Required(p, "must set a volume type")}
	case 1:
	default:
		for _, name := range set[1:] {
			add(field.Forbidden(p.Child(name), "may not set more than one volume type"))
		}
		return errs
	}
	if e := src.EmptyDir; e != nil {
		if e.SizeLimit != nil {
			add(nonNegativeQuantity(*e.SizeLimit, p.Child("emptyDir", "sizeLimit"))...)
		}
	}
	if h := src.HostPath; h != nil {
		hp := p.Child("hostPath")
		if h.Path == "" {
			add(field.Required(hp.Child("path"), ""))
		} else {
			add(noBacksteps(h.Path, hp.Child("path"))...)
		}
		if t := h.Type; t != nil {
			switch *t {
			case v1.HostPathUnset, v1.HostPathDirectoryOrCreate, v1.HostPathDirectory, v1.HostPathFileOrCreate,
				v1.HostPathFile, v1.HostPathSocket, v1.HostPathCharDev, v1.HostPathBlockDev:
			default:
				add(field.NotSupported(hp.Child("type"), *t, []v1.HostPathType{v1.HostPathUnset, v1.HostPathDirectoryOrCreate, v1.HostPathDirectory, v1.HostPathFileOrCreate, v1.HostPathFile, v1.HostPathSocket, v1.HostPathCharDev, v1.HostPathBlockDev}))
			}
		}
	}
	if s := src.Secret; s != nil {
		sp := p.Child("secret")
		if s.SecretName == "" {
			add(field.Required(sp.Child("secretName"), ""))
		}
		add(fileMode(s.DefaultMode, sp.Child("defaultMode"))...)
		for i := range s.Items {
			add(validateKeyToPath(&s.Items[i], sp.Child("items").Index(i))...)
		}
	}
	if c := src.ConfigMap; c != nil {
		cp := p.Child("configMap")
		if c.Name == "" {
			add(field.Required(cp.Child("name"), ""))
		}
		add(fileMode(c.DefaultMode, cp.Child("defaultMode"))...)
		for i := range c.Items {
			add(validateKeyToPath(&c.Items[i], cp.Child("items").Index(i))...)
		}
	}
	if d := src.DownwardAPI; d != nil {
		dp := p.Child("downwardAPI")
		add(fileMode(d.DefaultMode, dp.Child("defaultMode"))...)
		for i := range d.Items {
			add(validateDownwardAPIFile(&d.Items[i], dp.Child("items").Index(i))...)
		}
	}
	if pr := src.Projected; pr != nil {
		add(validateProjected(pr, serviceAccount, p.Child("projected"))...)
	}
	if c := src.PersistentVolumeClaim; c != nil && c.ClaimName == "" {
		add(field.Required(p.Child("persistentVolumeClaim", "claimName"), ""))
	}
	if n := src.NFS; n != nil {
		np := p.Child("nfs")
		if n.Server == "" {
			add(field.Required(np.Child("server"), ""))
		}
		if n.Path == "" {
			add(field.Required(np.Child("path"), ""))
		} else if !path.IsAbs(n.Path) {
			add(field.Invalid(np.Child("path"), n.Path, "must be an absolute path"))
		}
	}
	if im := src.Image; im != nil {
		ip := p.Child("image")
		if im.Reference == "" {
			add(field.Required(ip.Child("reference"), ""))
		}
		switch im.PullPolicy {
		case v1.PullAlways, v1.PullIfNotPresent, v1.PullNever:
		default:
			add(field.NotSupported(ip.Child("pullPolicy"), im.PullPolicy, []v1.PullPolicy{v1.PullAlways, v1.PullIfNotPresent, v1.PullNever}))
		}
	}
	return errs
}

func fileMode(mode *int32, p *field.Path) field.ErrorList {
	if mode != nil && (*mode < 0 || *mode > 0o777) {
		return field.ErrorList{field.Invalid(p, *mode, "must be a number between 0 and 0777 (octal), both inclusive")}
	}
	return nil
}

func validateKeyToPath(kp *v1.KeyToPath, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if kp.Key == "" {
		errs = append(errs, field.Required(p.Child("key"), ""))
	}
	if kp.Path == "" {
		errs = append(errs, field.Required(p.Child("path"), ""))
	}
	errs = append(errs, localNonReservedPath(kp.Path, p.Child("path"))...)
	return append(errs, fileMode(kp.Mode, p.Child("mode"))...)
}

func validateDownwardAPIFile(f *v1.DownwardAPIVolumeFile, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if f.Path == "" {
		errs = append(errs, field.Required(p.Child("path"), ""))
	}
	errs = append(errs, localNonReservedPath(f.Path, p.Child("path"))...)
	switch {
	case f.FieldRef != nil && f.ResourceFieldRef != nil:
		errs = append(errs, field.Invalid(p, "resource", "fieldRef and resourceFieldRef can not be set together"))
	case f.FieldRef != nil:
		errs = append(errs, validateFieldRef(f.FieldRef, volumeFieldPaths, p.Child("fieldRef"))...)
	case f.ResourceFieldRef != nil:
		errs = append(errs, validateResourceFieldRef(f.ResourceFieldRef, true, p.Child("resourceFieldRef"))...)
	default:
		errs = append(errs, field.Required(p, "one of fieldRef and resourceFieldRef is required"))
	}
	return append(errs, fileMode(f.Mode, p.Child("mode"))...)
}

func validateProjected(pr *v1.ProjectedVolumeSource, serviceAccount string, p *field.Path) field.ErrorList {
	errs := fileMode(pr.DefaultMode, p.Child("defaultMode"))
	paths := sets.New[string]()
	unique := func(file string, fp *field.Path) {
		if file == "" {
			return
		}
		if paths.Has(file) {
			errs = append(errs, field.Duplicate(fp, file))
		}
		paths.Insert(file)
	}
	for i := range pr.Sources {
		s := &pr.Sources[i]
		sp := p.Child("sources").Index(i)
		set := setSources(s)
		if len(set) != 1 {
			errs = append(errs, field.Invalid(sp, set, "must set exactly one source"))
			continue
		}
		if sec := s.Secret; sec != nil {
			if sec.Name == "" {
				errs = append(errs, field.Required(sp.Child("secret", "name"), ""))
			}
			for j := range sec.Items {
				ip := sp.Child("secret", "items").Index(j)
				errs = append(errs, validateKeyToPath(&sec.Items[j], ip)...)
				unique(sec.Items[j].Path, ip.Child("path"))
			}
		}
		if cm := s.ConfigMap; cm != nil {
			if cm.Name == "" {
				errs = append(errs, field.Required(sp.Child("configMap", "name"), ""))
			}
			for j := range cm.Items {
				ip := sp.Child("configMap", "items").Index(j)
				errs = append(errs, validateKeyToPath(&cm.Items[j], ip)...)
				unique(cm.Items[j].Path, ip.Child("path"))
			}
		}
		if d := s.DownwardAPI; d != nil {
			for j := range d.Items {
				ip := sp.Child("downwardAPI", "items").Index(j)
				errs = append(errs, validateDownwardAPIFile(&d.Items[j], ip)...)
				unique(d.Items[j].Path, ip.Child("path"))
			}
		}
		if t := s.ServiceAccountToken; t != nil {
			tp := sp.Child("serviceAccountToken")
			if serviceAccount == "" {
				errs = append(errs, field.Forbidden(tp, "must not be set when serviceAccountName is not set"))
			}
			if exp := t.ExpirationSeconds; exp == nil {
				errs = append(errs, field.Required(tp.Child("expirationSeconds"), ""))
			} else if *exp < 600 || *exp > 1<<32 {
				errs = append(errs, field.Invalid(tp.Child("expirationSeconds"), *exp, "must be between 10 minutes and 2^32 seconds"))
			}
			if t.Path == "" {
				errs = append(errs, field.Required(tp.Child("path"), ""))
			} else {
				errs = append(errs, localNonReservedPath(t.Path, tp.Child("path"))...)
			}
			unique(t.Path, tp.Child("path"))
		}
		if b := s.ClusterTrustBundle; b != nil {
			bp := sp.Child("clusterTrustBundle")
			if b.Path == "" {
				errs = append(errs, field.Required(bp.Child("path"), ""))
			} else {
				errs = append(errs, localNonReservedPath(b.Path, bp.Child("path"))...)
			}
			unique(b.Path, bp.Child("path"))
		}
		if c := s.PodCertificate; c != nil {
			cp := sp.Child("podCertificate")
			for _, f := range []struct{ name, path string }{{"credentialBundlePath", c.CredentialBundlePath}, {"keyPath", c.KeyPath}, {"certificateChainPath", c.CertificateChainPath}} {
				if f.path != "" {
					errs = append(errs, localNonReservedPath(f.path, cp.Child(f.name))...)
					unique(f.path, cp.Child(f.name))
				}
			}
		}
	}
	return errs
}
