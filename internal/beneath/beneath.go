// Package beneath opens and creates paths inside a directory without ever
// leaving it, whatever symlinks the directory holds: what volume subPaths
// need, where the directory's content is written by containers.
//
// On Linux, MkdirAll resolves with openat2(2) and RESOLVE_BENEATH, so a
// symlink may point anywhere inside the directory but resolution fails
// rather than step out of it, and creates each missing directory with
// mkdirat(2) relative to a descriptor of its verified parent, so no
// directory is ever created outside. Where openat2 is missing (kernels
// before 5.6, or filtered by seccomp) it walks one component at a time
// with O_NOFOLLOW instead, and then refuses every symlink. Other systems
// are not supported.
package beneath

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// ErrEscapes is returned (wrapped) when a path would resolve outside its
// base directory.
var ErrEscapes = errors.New("resolves outside its base directory")

// split checks that sub is relative, has no ".." element, and returns its
// elements without empty and "." ones.
func split(sub string) ([]string, error) {
	if strings.HasPrefix(sub, "/") {
		return nil, fmt.Errorf("%q must be a relative path", sub)
	}
	var out []string
	for _, el := range strings.Split(sub, "/") {
		switch el {
		case "..":
			return nil, fmt.Errorf("%q must not contain '..'", sub)
		case "", ".":
			continue
		}
		out = append(out, el)
	}
	return out, nil
}

func join(els []string) string { return path.Join(els...) }
