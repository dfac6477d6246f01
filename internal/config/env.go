// The environment variables that stand in for fields a file had better not
// hold: the store's and Redis's URLs, which may carry passwords, so that
// they can come from a secret store (a Kubernetes Secret, say) while the
// rest of the configuration is a plain file.

package config

// The environment variables ApplyEnv reads.
const (
	EnvStoreURL = "LLMGW_STORE_URL" // store.url
	EnvRedisURL = "LLMGW_REDIS_URL" // limits.redis
)

// ApplyEnv sets store.url from LLMGW_STORE_URL and limits.redis from
// LLMGW_REDIS_URL, each only when its variable is set and not empty, so
// that it takes the place of the file's value; flags given to a command
// take the place of both. getenv is os.Getenv outside tests. It validates
// nothing: the caller validates c after its last change.
func (c *Config) ApplyEnv(getenv func(string) string) {
	if u := getenv(EnvStoreURL); u != "" {
		c.Store.URL = u
	}
	if u := getenv(EnvRedisURL); u != "" {
		c.Limits.Redis = u
	}
}
