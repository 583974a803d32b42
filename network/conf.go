package network

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
)

// ErrNoConfig: the configuration directory holds no usable network
// configuration. The runtime's network is not ready (the kubelet's
// NetworkReady=false, NetworkPluginNotReady).
var ErrNoConfig = errors.New("no usable CNI network configuration")

// confExtensions are the file name extensions read from the
// configuration directory.
var confExtensions = []string{".conf", ".conflist", ".json"}

// Conf is a network configuration loaded from a directory. It is
// immutable once returned.
type Conf struct {
	// File is the configuration's path.
	File string
	// Name is the network's name.
	Name string
	// CNIVersion is the version of the CNI spec the list is written in.
	CNIVersion string
	// Plugins are the plugin types, in the order ADD runs them.
	Plugins []string
	// Skipped explains each file before File that was not usable, as
	// "<file>: <reason>", in order.
	Skipped []string

	list *libcni.NetworkConfigList
}

// LoadConf returns the first usable network configuration of dir, in
// lexical order of file names (*.conf, *.conflist, *.json), as
// containerd and CRI-O choose it. A file is passed over when it does
// not parse, lists no plugin, or names a plugin found in none of
// binDirs. When none is usable, the error matches ErrNoConfig and names
// the directory and every file with its reason. It reads the files
// each time it is called; it is safe for concurrent use.
func LoadConf(dir string, binDirs []string) (*Conf, error) {
	var l loader
	return l.load(dir, binDirs, invoke.FindInPath)
}

// loader caches parsed files by name, size, modification time and
// inode, so loading again before every operation only stats the
// directory. Its zero value is ready; it is safe for concurrent use.
type loader struct {
	mu     sync.Mutex
	parsed map[string]parsedFile
}

type parsedFile struct {
	size  int64
	mtime time.Time
	ino   uint64
	list  *libcni.NetworkConfigList
	err   error
}

func (l *loader) load(dir string, binDirs []string, find func(string, []string) (string, error)) (*Conf, error) {
	files, err := libcni.ConfFiles(dir, confExtensions)
	if err != nil {
		return nil, fmt.Errorf("network: reading %s: %w", dir, err)
	}
	slices.Sort(files)
	l.mu.Lock()
	defer l.mu.Unlock()
	next := make(map[string]parsedFile, len(files))
	var skipped []string
	var chosen *Conf
	for _, f := range files {
		p := l.parse(f)
		next[f] = p
		if chosen != nil {
			continue
		}
		if p.err != nil {
			skipped = append(skipped, fmt.Sprintf("%s: %v", filepath.Base(f), p.err))
			continue
		}
		var missing []string
		for _, pl := range p.list.Plugins {
			if _, err := find(pl.Network.Type, binDirs); err != nil {
				missing = append(missing, fmt.Sprintf("%q", pl.Network.Type))
			}
		}
		if len(missing) > 0 {
			skipped = append(skipped, fmt.Sprintf("%s: plugin %s not found in %s",
				filepath.Base(f), strings.Join(missing, ", "), strings.Join(binDirs, ":")))
			continue
		}
		types := make([]string, len(p.list.Plugins))
		for i, pl := range p.list.Plugins {
			types[i] = pl.Network.Type
		}
		chosen = &Conf{File: f, Name: p.list.Name, CNIVersion: p.list.CNIVersion, Plugins: types, list: p.list}
	}
	l.parsed = next
	if chosen == nil {
		if len(files) == 0 {
			return nil, fmt.Errorf("network: %w in %s: no *.conflist, *.conf or *.json file", ErrNoConfig, dir)
		}
		return nil, fmt.Errorf("network: %w in %s: %s", ErrNoConfig, dir, strings.Join(skipped, "; "))
	}
	chosen.Skipped = skipped
	return chosen, nil
}

// parse returns f parsed, from the cache when the file did not change.
// l.mu is held.
func (l *loader) parse(f string) parsedFile {
	fi, err := os.Stat(f)
	if err != nil {
		return parsedFile{err: err}
	}
	ino := inode(fi)
	if p, ok := l.parsed[f]; ok && p.size == fi.Size() && p.mtime.Equal(fi.ModTime()) && p.ino == ino {
		return p
	}
	p := parsedFile{size: fi.Size(), mtime: fi.ModTime(), ino: ino}
	p.list, p.err = parseFile(f)
	return p
}

func parseFile(f string) (*libcni.NetworkConfigList, error) {
	var list *libcni.NetworkConfigList
	if filepath.Ext(f) == ".conflist" {
		l, err := libcni.ConfListFromFile(f)
		if err != nil {
			return nil, err
		}
		list = l
	} else {
		c, err := libcni.ConfFromFile(f)
		if err != nil {
			return nil, err
		}
		if c.Network.Type == "" {
			return nil, errors.New(`no plugin "type"`)
		}
		l, err := libcni.ConfListFromConf(c)
		if err != nil {
			return nil, err
		}
		list = l
	}
	if list.Name == "" {
		return nil, errors.New(`no network "name"`)
	}
	if len(list.Plugins) == 0 {
		return nil, errors.New("no plugins")
	}
	for i, p := range list.Plugins {
		if p.Network == nil || p.Network.Type == "" {
			return nil, fmt.Errorf(`plugins[%d] has no "type"`, i)
		}
	}
	return list, nil
}
