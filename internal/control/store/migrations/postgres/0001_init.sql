-- Keys, tenant-level limits and the usage ledger. Text compared by prefix
-- (tenant paths) uses the C collation, so that ranges are byte-wise and
-- served by the indexes.

CREATE TABLE keys (
	id            TEXT PRIMARY KEY,
	name          TEXT NOT NULL DEFAULT '',
	tenant        TEXT COLLATE "C" NOT NULL,
	hash          TEXT NOT NULL,
	models        JSONB NOT NULL DEFAULT '[]', -- array of globs
	rpm           BIGINT NOT NULL DEFAULT 0,
	tpm           BIGINT NOT NULL DEFAULT 0,
	budget_tokens BIGINT NOT NULL DEFAULT 0,
	budget_usd    DOUBLE PRECISION NOT NULL DEFAULT 0,
	period        TEXT NOT NULL DEFAULT '',
	priority      TEXT NOT NULL DEFAULT '',
	created       TIMESTAMPTZ NOT NULL,
	expires       TIMESTAMPTZ,
	revoked       TIMESTAMPTZ
);
CREATE INDEX keys_created ON keys (created, id);

CREATE TABLE tenant_limits (
	path          TEXT COLLATE "C" PRIMARY KEY,
	rpm           BIGINT NOT NULL DEFAULT 0,
	tpm           BIGINT NOT NULL DEFAULT 0,
	budget_tokens BIGINT NOT NULL DEFAULT 0,
	budget_usd    DOUBLE PRECISION NOT NULL DEFAULT 0,
	period        TEXT NOT NULL DEFAULT ''
);

CREATE TABLE usage (
	id                TEXT PRIMARY KEY,
	time              TIMESTAMPTZ NOT NULL,
	key_id            TEXT COLLATE "C" NOT NULL DEFAULT '',
	tenant            TEXT COLLATE "C" NOT NULL DEFAULT '',
	model             TEXT NOT NULL,
	pool              TEXT NOT NULL DEFAULT '',
	endpoint          TEXT NOT NULL DEFAULT '',
	prompt_tokens     BIGINT NOT NULL DEFAULT 0,
	completion_tokens BIGINT NOT NULL DEFAULT 0,
	cached_tokens     BIGINT NOT NULL DEFAULT 0,
	estimated         BOOLEAN NOT NULL DEFAULT FALSE,
	cost_usd          DOUBLE PRECISION NOT NULL DEFAULT 0,
	status            INTEGER NOT NULL,
	ttft_ns           BIGINT NOT NULL DEFAULT 0,
	duration_ns       BIGINT NOT NULL DEFAULT 0,
	streamed          BOOLEAN NOT NULL DEFAULT FALSE
);
CREATE INDEX usage_time ON usage (time);
-- The tenant and key indexes carry every column the aggregates read, so a
-- report or a budget seeded at start-up can be an index-only scan.
CREATE INDEX usage_tenant_time ON usage (tenant, time)
	INCLUDE (model, key_id, status, prompt_tokens, completion_tokens, cached_tokens, cost_usd);
CREATE INDEX usage_key_time ON usage (key_id, time)
	INCLUDE (model, tenant, status, prompt_tokens, completion_tokens, cached_tokens, cost_usd);
