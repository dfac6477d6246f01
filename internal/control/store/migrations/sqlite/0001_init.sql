-- Keys, tenant-level limits and the usage ledger. Times are Unix
-- nanoseconds (UTC); NULL is "never" for expires and revoked.

CREATE TABLE keys (
	id            TEXT PRIMARY KEY,
	name          TEXT NOT NULL DEFAULT '',
	tenant        TEXT NOT NULL,
	hash          TEXT NOT NULL,
	models        TEXT NOT NULL DEFAULT '[]', -- JSON array of globs
	rpm           INTEGER NOT NULL DEFAULT 0,
	tpm           INTEGER NOT NULL DEFAULT 0,
	budget_tokens INTEGER NOT NULL DEFAULT 0,
	budget_usd    REAL NOT NULL DEFAULT 0,
	period        TEXT NOT NULL DEFAULT '',
	priority      TEXT NOT NULL DEFAULT '',
	created       INTEGER NOT NULL,
	expires       INTEGER,
	revoked       INTEGER
);
CREATE INDEX keys_created ON keys (created, id);

CREATE TABLE tenant_limits (
	path          TEXT PRIMARY KEY,
	rpm           INTEGER NOT NULL DEFAULT 0,
	tpm           INTEGER NOT NULL DEFAULT 0,
	budget_tokens INTEGER NOT NULL DEFAULT 0,
	budget_usd    REAL NOT NULL DEFAULT 0,
	period        TEXT NOT NULL DEFAULT ''
);

CREATE TABLE usage (
	id                TEXT PRIMARY KEY,
	time              INTEGER NOT NULL,
	key_id            TEXT NOT NULL DEFAULT '',
	tenant            TEXT NOT NULL DEFAULT '',
	model             TEXT NOT NULL,
	pool              TEXT NOT NULL DEFAULT '',
	endpoint          TEXT NOT NULL DEFAULT '',
	prompt_tokens     INTEGER NOT NULL DEFAULT 0,
	completion_tokens INTEGER NOT NULL DEFAULT 0,
	cached_tokens     INTEGER NOT NULL DEFAULT 0,
	estimated         INTEGER NOT NULL DEFAULT 0,
	cost_usd          REAL NOT NULL DEFAULT 0,
	status            INTEGER NOT NULL,
	ttft_ns           INTEGER NOT NULL DEFAULT 0,
	duration_ns       INTEGER NOT NULL DEFAULT 0,
	streamed          INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX usage_time ON usage (time);
-- The tenant and key indexes carry every column the aggregates read, so a
-- report or a budget seeded at start-up is answered from the index alone.
CREATE INDEX usage_tenant_time ON usage (tenant, time, model, key_id, status, prompt_tokens, completion_tokens, cached_tokens, cost_usd);
CREATE INDEX usage_key_time ON usage (key_id, time, model, tenant, status, prompt_tokens, completion_tokens, cached_tokens, cost_usd);
