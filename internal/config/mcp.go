package config

// The mcp block: the MCP servers the gateway's /mcp aggregates, each
// reached over Streamable HTTP or, where the operator allows it, started
// as a local process spoken to over stdio. Credentials are references,
// environment variables or files, never values in the file.

import (
	"fmt"
	"maps"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"
)

// MCP is the MCP gateway's servers.
type MCP struct {
	// AllowStdio lets servers be started from a command on the gateway's
	// host. Off, a server with a command is refused.
	AllowStdio bool        `yaml:"allow_stdio"`
	Servers    []MCPServer `yaml:"servers,omitempty"`
}

// MCPServer is one upstream MCP server: url or command, not both.
type MCPServer struct {
	// Name prefixes its tools and prompts, name__tool.
	Name string `yaml:"name"`
	// URL is its Streamable HTTP endpoint.
	URL string `yaml:"url,omitempty"`
	// Command starts it, argv, and speaks to it over stdio.
	Command []string `yaml:"command,omitempty"`
	// HeadersEnv sends each header (the key) with the value of an
	// environment variable of the gateway's (the value).
	HeadersEnv map[string]string `yaml:"headers_env,omitempty"`
	// HeadersFile sends each header with the contents of a file, its
	// surrounding white space trimmed.
	HeadersFile map[string]string `yaml:"headers_file,omitempty"`
	// EnvFrom gives the command each variable (the key) with the value of
	// an environment variable of the gateway's (the value).
	EnvFrom map[string]string `yaml:"env_from,omitempty"`
	// IdentityHeader names a header each call carries the caller's key id
	// and tenant in.
	IdentityHeader string `yaml:"identity_header,omitempty"`
	// Timeout bounds each call to it; zero means 60s.
	Timeout time.Duration `yaml:"timeout,omitempty"`
}

// mcpNameRE is a server's name: what a tool's namespaced name can carry,
// with no "__" of its own, so that the first "__" ends it.
var (
	mcpNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]*(_[A-Za-z0-9-]+)*$`)
	headerRE  = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
	envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

func (m *MCP) validate(ps *problems) {
	seen := map[string]bool{}
	for i, s := range m.Servers {
		at := fmt.Sprintf("mcp.servers[%d]", i)
		switch {
		case s.Name == "":
			ps.add(at+".name", "must be set")
		case !mcpNameRE.MatchString(s.Name) || len(s.Name) > 64:
			ps.add(at+".name", "must be letters, digits, '-' and single '_', at most 64, got %q", s.Name)
		case seen[s.Name]:
			ps.add(at+".name", "%q is named twice", s.Name)
		}
		seen[s.Name] = true
		switch {
		case s.URL == "" && len(s.Command) == 0:
			ps.add(at, "must set url or command")
		case s.URL != "" && len(s.Command) > 0:
			ps.add(at, "must set url or command, not both")
		case s.URL != "":
			if u, err := url.Parse(s.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				ps.add(at+".url", "must be an http or https URL, got %q", s.URL)
			}
			if len(s.EnvFrom) > 0 {
				ps.add(at+".env_from", "is for a server with a command")
			}
		default:
			if !m.AllowStdio {
				ps.add(at+".command", "needs mcp.allow_stdio: true")
			}
			if s.Command[0] == "" {
				ps.add(at+".command[0]", "must name a program")
			}
			if len(s.HeadersEnv)+len(s.HeadersFile) > 0 || s.IdentityHeader != "" {
				ps.add(at, "headers_env, headers_file and identity_header are for a server with a url")
			}
		}
		for _, h := range slices.Sorted(maps.Keys(s.HeadersEnv)) {
			env := s.HeadersEnv[h]
			checkName(ps, at+".headers_env."+h, h, env, headerRE)
		}
		for _, h := range slices.Sorted(maps.Keys(s.HeadersFile)) {
			file := s.HeadersFile[h]
			checkName(ps, at+".headers_file."+h, h, "x", headerRE)
			if file == "" {
				ps.add(at+".headers_file."+h, "must name a file")
			}
		}
		for _, v := range slices.Sorted(maps.Keys(s.EnvFrom)) {
			env := s.EnvFrom[v]
			checkName(ps, at+".env_from."+v, v, env, envNameRE)
		}
		if s.IdentityHeader != "" && !headerRE.MatchString(s.IdentityHeader) {
			ps.add(at+".identity_header", "must be a header name, got %q", s.IdentityHeader)
		}
		if s.Timeout < 0 {
			ps.add(at+".timeout", "must not be negative, got %s", s.Timeout)
		}
	}
}

// checkName checks a map entry: its key a name re matches, its value a
// variable's name.
func checkName(ps *problems, at, key, env string, re *regexp.Regexp) {
	if !re.MatchString(key) {
		ps.add(at, "%q is not a valid name", key)
	}
	if !envNameRE.MatchString(env) {
		ps.add(at, "must name an environment variable, got %q", env)
	}
}

// ResolvedMCPServer is a server with its references read: the headers and
// environment its calls carry.
type ResolvedMCPServer struct {
	MCPServer
	Headers map[string]string
	Env     []string // "NAME=value", PATH and HOME among them
}

// Resolve reads every server's references: the environment with getenv
// (nil for os.Getenv), the files from disk. A variable unset or a file
// unread is an error naming its field; the values are never in it.
func (m *MCP) Resolve(getenv func(string) string) ([]ResolvedMCPServer, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	var ps problems
	out := make([]ResolvedMCPServer, 0, len(m.Servers))
	for i, s := range m.Servers {
		at := fmt.Sprintf("mcp.servers[%d]", i)
		r := ResolvedMCPServer{MCPServer: s, Headers: map[string]string{}}
		for _, h := range slices.Sorted(maps.Keys(s.HeadersEnv)) {
			env := s.HeadersEnv[h]
			v := getenv(env)
			if v == "" {
				ps.add(at+".headers_env."+h, "environment variable %s is not set", env)
			}
			r.Headers[h] = v
		}
		for _, h := range slices.Sorted(maps.Keys(s.HeadersFile)) {
			file := s.HeadersFile[h]
			b, err := os.ReadFile(file)
			if err != nil {
				ps.add(at+".headers_file."+h, "reading %s: %v", file, err)
			}
			r.Headers[h] = strings.TrimSpace(string(b))
		}
		if len(s.Command) > 0 {
			r.Env = []string{"PATH=" + getenv("PATH"), "HOME=" + getenv("HOME")}
			for _, v := range slices.Sorted(maps.Keys(s.EnvFrom)) {
				env := s.EnvFrom[v]
				val := getenv(env)
				if val == "" {
					ps.add(at+".env_from."+v, "environment variable %s is not set", env)
				}
				r.Env = append(r.Env, v+"="+val)
			}
		}
		out = append(out, r)
	}
	return out, ps.err()
}
