package config

// The Endpoint Picker's endpoints from a file (epp.discovery_file), in
// the shape llm-d's EPP reads with its file-discovery plugin: a list of
// endpoints, each a name, an IPv4 address and a port, that become the
// endpoints of one catalog pool (epp.discovery_pool), as llm-d's file
// gives the endpoints of the one pool its EPP serves.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"

	"go.yaml.in/yaml/v3"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
)

// MaxDiscoveryFileBytes bounds the endpoints file, as llm-d bounds it.
const MaxDiscoveryFileBytes = 1 << 20

// discoveryFile is llm-d's file-discovery format. Namespace and labels
// are read and not used.
type discoveryFile struct {
	Endpoints []struct {
		Name      string            `yaml:"name"`
		Namespace string            `yaml:"namespace"`
		Address   string            `yaml:"address"`
		Port      string            `yaml:"port"`
		Labels    map[string]string `yaml:"labels"`
	} `yaml:"endpoints"`
}

// ReadDiscovery reads the endpoints file at path, YAML or JSON, as the
// endpoints of a pool: each is named by its name, and its URL is
// http://address:port/v1. The file is refused whole when it cannot be
// read or parsed, passes 1 MiB, lists no endpoint, or any entry has no
// name, a name already used, an address that is no IPv4 address or a
// port outside 1–65535.
func ReadDiscovery(path string) ([]catalog.Endpoint, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("epp.discovery_file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxDiscoveryFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("epp.discovery_file: %w", err)
	}
	if len(data) > MaxDiscoveryFileBytes {
		return nil, fmt.Errorf("epp.discovery_file %s: more than %d bytes", path, MaxDiscoveryFileBytes)
	}
	eps, err := parseDiscovery(data)
	if err != nil {
		return nil, fmt.Errorf("epp.discovery_file %s: %w", path, err)
	}
	return eps, nil
}

// parseDiscovery is the endpoints data lists.
func parseDiscovery(data []byte) ([]catalog.Endpoint, error) {
	var df discoveryFile
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&df); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("lists no endpoint")
		}
		return nil, err
	}
	if len(df.Endpoints) == 0 {
		return nil, errors.New("lists no endpoint")
	}
	eps := make([]catalog.Endpoint, 0, len(df.Endpoints))
	for i, e := range df.Endpoints {
		at := fmt.Sprintf("endpoints[%d]", i)
		if !isLabel(e.Name) {
			return nil, fmt.Errorf("%s.name: must be 1 to 64 letters, digits and . _ : -, got %q", at, e.Name)
		}
		if slices.ContainsFunc(eps, func(o catalog.Endpoint) bool { return o.Name == e.Name }) {
			return nil, fmt.Errorf("%s.name: %q is listed twice", at, e.Name)
		}
		if ip, err := netip.ParseAddr(e.Address); err != nil || !ip.Is4() {
			return nil, fmt.Errorf("%s.address: must be an IPv4 address, got %q", at, e.Address)
		}
		if n, err := strconv.Atoi(e.Port); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("%s.port: must be a port from 1 to 65535, got %q", at, e.Port)
		}
		eps = append(eps, catalog.Endpoint{Name: e.Name, URL: "http://" + net.JoinHostPort(e.Address, e.Port) + "/v1", Weight: 1})
	}
	return eps, nil
}

// discoveryPool is the index of the pool epp.discovery_pool names; -1
// for none.
func (c *Config) discoveryPool() int {
	if c.EPP.DiscoveryFile == "" {
		return -1
	}
	return slices.IndexFunc(c.Pools, func(p catalog.Pool) bool { return p.Name == c.EPP.DiscoveryPool })
}

// CatalogWith is c's catalog with discovered, read from
// epp.discovery_file, as the endpoints of the pool epp.discovery_pool
// names; c's own catalog when no file is set. The pool with its
// endpoints is checked as any pool is.
func (c *Config) CatalogWith(discovered []catalog.Endpoint) (*catalog.Catalog, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	pools := c.Pools
	if i := c.discoveryPool(); i >= 0 {
		d := *c
		d.EPP.DiscoveryFile, d.EPP.DiscoveryPool = "", ""
		d.Pools = slices.Clone(c.Pools)
		d.Pools[i].Endpoints = discovered
		if err := d.Validate(); err != nil {
			return nil, fmt.Errorf("epp.discovery_file %s: %w", c.EPP.DiscoveryFile, err)
		}
		pools = d.Pools
	}
	cat, err := catalog.New(pools, c.Models)
	if err != nil {
		return nil, fmt.Errorf("build catalog: %w", err)
	}
	return cat, nil
}
