// Checking a file from the command line (llmgw check --config FILE): every
// problem one a line, or a one-line summary of what the file defines; and,
// against the file in service, which of its changes a reload leaves for a
// restart.

package config

import (
	"fmt"
	"io"
	"os"
	"strings"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
)

// Check loads the file at path and writes to w either every problem, one a
// line, or a summary such as "ok: 2 pools, 3 models (5 names), 4
// endpoints". It returns an error, for a non-zero exit, exactly when the
// file is not a valid configuration or cannot be read.
func Check(path string, w io.Writer) error {
	c, err := Load(path)
	if err != nil {
		ps, ok := AsProblems(err)
		if !ok {
			fmt.Fprintln(w, err)
			return err
		}
		for _, p := range ps {
			fmt.Fprintf(w, "%s: %s\n", path, p.Error())
		}
		return fmt.Errorf("check %s: %s", path, plural(len(ps), "problem"))
	}
	if _, err := c.Catalog(); err != nil {
		fmt.Fprintln(w, err)
		return fmt.Errorf("check %s: %w", path, err)
	}
	names, endpoints := 0, 0
	for _, m := range c.Models {
		names += 1 + len(m.Aliases)
	}
	for _, p := range c.Pools {
		endpoints += len(p.Endpoints)
	}
	_, err = fmt.Fprintf(w, "ok: %s, %s (%s), %s\n",
		plural(len(c.Pools), "pool"), plural(len(c.Models), "model"),
		plural(names, "name"), plural(endpoints, "endpoint"))
	for _, p := range c.Pools {
		if chain := credentialChain(p, os.Getenv); chain != "" && err == nil {
			_, err = fmt.Fprintf(w, "pool %s: %s\n", p.Name, chain)
		}
	}
	return err
}

// credentialChain says where p's calls will take their credentials from,
// read from the environment (getenv) alone, without calling anything and
// without naming a secret: the key's file, or its variable and whether it is set, or
// for a bedrock pool the first source AWS's default chain finds, in its
// order (environment, web identity, shared config and profiles,
// container, instance metadata), and the role assumed with it; for a
// vertex pool its credentials file, or where Application Default
// Credentials look. Empty for a pool that sends none.
func credentialChain(p catalog.Pool, getenv func(string) string) string {
	if p.Kind == catalog.KindVertex {
		switch {
		case p.CredentialsFile != "":
			return "Google credentials from credentials_file " + p.CredentialsFile
		case getenv("GOOGLE_APPLICATION_CREDENTIALS") != "":
			return "Google credentials from $GOOGLE_APPLICATION_CREDENTIALS (" + getenv("GOOGLE_APPLICATION_CREDENTIALS") + ")"
		}
		return "Google Application Default Credentials: gcloud's file if it is there, else the metadata server (GCE, GKE workload identity)"
	}
	if p.Kind != catalog.KindBedrock {
		if p.APIKeyFile != "" {
			return "key from the file " + p.APIKeyFile
		}
		if p.APIKeyEnv == "" {
			return ""
		}
		if getenv(p.APIKeyEnv) == "" {
			return "key from $" + p.APIKeyEnv + ", which is not set"
		}
		return "key from $" + p.APIKeyEnv
	}
	var from string
	switch {
	case getenv("AWS_ACCESS_KEY_ID") != "":
		from = "AWS credentials from the environment (AWS_ACCESS_KEY_ID)"
	case getenv("AWS_WEB_IDENTITY_TOKEN_FILE") != "":
		from = "AWS credentials from web identity (AWS_WEB_IDENTITY_TOKEN_FILE, as on EKS)"
	case getenv("AWS_PROFILE") != "":
		from = "AWS credentials from the shared config's profile " + getenv("AWS_PROFILE")
	case getenv("AWS_CONTAINER_CREDENTIALS_FULL_URI") != "" || getenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI") != "":
		from = "AWS credentials from the container's endpoint (ECS, EKS Pod Identity)"
	default:
		from = "AWS credentials from the shared config's default profile if it has them, else instance metadata (IMDS)"
	}
	from += ", signing for " + p.Region
	if p.Role != "" {
		from += ", assuming " + p.Role
	}
	return from
}

// CheckAgainst checks the file at path as Check does and, when it is
// valid, compares it with inService, the file the gateway runs with: it
// writes the changed fields that take effect only at a restart, such as
// "needs a restart: server.listen, store.url", or that a reload puts
// every change in service. It returns an error when either file is not a
// valid configuration or cannot be read.
func CheckAgainst(path, inService string, w io.Writer) error {
	if err := Check(path, w); err != nil {
		return err
	}
	old, err := Load(inService)
	if err != nil {
		fmt.Fprintf(w, "%s, the configuration in service: %s\n", inService, strings.ReplaceAll(err.Error(), "\n", "; "))
		return fmt.Errorf("check against %s: %w", inService, err)
	}
	next, err := Load(path)
	if err != nil {
		return err // Check has just loaded it
	}
	if fields := NeedRestart(old, next); len(fields) > 0 {
		_, err = fmt.Fprintf(w, "needs a restart: %s; a reload applies the rest\n", strings.Join(fields, ", "))
		return err
	}
	_, err = fmt.Fprintf(w, "a reload applies every change since %s\n", inService)
	return err
}

// plural is n and the noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
