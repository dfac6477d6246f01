package app

// Redis as llmgw reaches it, for the limits and the bus alike: the URL of
// limits.redis with its user and password (Redis ACL users, or the
// default user's password), TLS with rediss:// and the operator's own
// certificate authority and client certificate, and a PING at start that
// refuses a configuration Redis refuses; the bus is opened only when the
// router shares its prefix index or loads (openSharing). No error or log
// line carries the URL's password.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router"
	"gitea.mynodes.xyz/ilker/llmgw/internal/router/placement"
)

// redisStartTimeout bounds the PING at start: long enough for a TLS
// handshake over a slow link, short enough that a Redis that is away
// holds up the start only briefly, as it is not needed to serve.
const redisStartTimeout = 3 * time.Second

// newRedisClient is a client of limits.redis, reached as l says: its URL,
// and with rediss:// the certificate authorities of redis_ca_file and the
// client certificate of redis_cert_file and redis_key_file. tune, when not
// nil, adjusts the options before the client is made. Errors name the
// field at fault and never hold the password.
func newRedisClient(l config.Limits, tune func(*redis.Options)) (*redis.Client, error) {
	o, err := redis.ParseURL(l.Redis)
	if err != nil {
		return nil, redact("limits.redis", err, redisSecrets(l.Redis))
	}
	if o.TLSConfig != nil {
		if l.RedisCAFile != "" {
			pem, err := os.ReadFile(l.RedisCAFile)
			if err != nil {
				return nil, fmt.Errorf("limits.redis_ca_file: %w", err)
			}
			roots := x509.NewCertPool()
			if !roots.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("limits.redis_ca_file: no PEM certificate in %s", l.RedisCAFile)
			}
			o.TLSConfig.RootCAs = roots
		}
		if l.RedisCertFile != "" {
			cert, err := tls.LoadX509KeyPair(l.RedisCertFile, l.RedisKeyFile)
			if err != nil {
				return nil, fmt.Errorf("limits.redis_cert_file, limits.redis_key_file: %w", err)
			}
			o.TLSConfig.Certificates = []tls.Certificate{cert}
		}
	}
	if tune != nil {
		tune(o)
	}
	return redis.NewClient(o), nil
}

// checkRedis asks Redis for a PING at start. Credentials it refuses, a
// command it does not allow, a certificate that does not verify, or TLS
// that one side does not speak are mistakes in the configuration, and
// fail the start. A Redis that does not answer is only warned of:
// limits.on_redis_error decides for requests meanwhile, and the bus
// reconnects on its own.
func checkRedis(ctx context.Context, c *redis.Client, l config.Limits, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, redisStartTimeout)
	defer cancel()
	err := c.Ping(ctx).Err()
	if err == nil {
		return nil
	}
	if misconfigured(err) {
		return redact("limits.redis: Redis refused the connection", err, redisSecrets(l.Redis))
	}
	log.Warn("Redis did not answer at start; serving meanwhile as limits.on_redis_error says",
		"err", redact("limits.redis", err, redisSecrets(l.Redis)))
	return nil
}

// misconfigured reports whether err, from a PING, says that Redis or the
// TLS handshake refused what the configuration gave rather than that
// Redis is away.
func misconfigured(err error) bool {
	var unverified *tls.CertificateVerificationError
	var notTLS tls.RecordHeaderError
	var op *net.OpError
	return redis.IsAuthError(err) || redis.IsPermissionError(err) ||
		errors.As(err, &unverified) || errors.As(err, &notTLS) ||
		errors.As(err, &op) && op.Op == "remote error" // a TLS alert from the server: a client certificate it wanted or refused
}

// redisSecrets is the password of a Redis URL as it is written and as it
// decodes; none when it has none.
func redisSecrets(raw string) []string {
	var secrets []string
	if u, err := url.Parse(raw); err == nil && u.User != nil {
		if p, ok := u.User.Password(); ok && p != "" {
			secrets = append(secrets, p)
		}
	}
	_, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return secrets
	}
	authority, _, _ := strings.Cut(rest, "/")
	authority, _, _ = strings.Cut(authority, "?")
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		if _, p, ok := strings.Cut(authority[:at], ":"); ok && p != "" && !slices.Contains(secrets, p) {
			secrets = append(secrets, p)
		}
	}
	return secrets
}

// redactedError is an error whose message has secrets cut out. Unwrap
// gives the original for errors.Is and errors.As; it must not be printed.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// redact is err after field and a colon, each of secrets in its message
// written as "xxxxx".
func redact(field string, err error, secrets []string) error {
	msg := err.Error()
	// The longest first, so that a secret inside another is not left
	// half cut.
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	for _, s := range secrets {
		msg = strings.ReplaceAll(msg, s, "xxxxx")
	}
	return &redactedError{msg: field + ": " + msg, err: err}
}

// openSharing connects to the Redis that limits.redis names when the
// router shares its prefix index or its loads with the other gateways
// there, and hands opts the placements to share. Nothing is opened when
// neither is shared.
func (g *Gateway) openSharing(ctx context.Context, opts *router.Options) (err error) {
	cfg := g.cfg
	if cfg.Limits.Redis == "" || !cfg.Router.SharePrefixIndex && !cfg.Router.ShareLoad {
		return nil
	}
	if g.bus, err = newRedisClient(cfg.Limits, nil); err != nil {
		return err
	}
	if err := checkRedis(ctx, g.bus, cfg.Limits, g.log); err != nil {
		return err
	}
	g.placements = placement.NewRedis(g.bus, placement.Options{
		Channel:    cfg.Router.ShareChannel,
		Placements: cfg.Router.SharePrefixIndex, Loads: cfg.Router.ShareLoad,
		Registerer: g.reg, Logger: g.log,
	})
	if cfg.Router.SharePrefixIndex {
		opts.Placements = g.placements
	}
	return nil
}
