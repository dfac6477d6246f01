-- The audit trail: who changed what, when and from where; the gateway
-- only appends to it, and removes what is older than its retention.
-- Times are Unix nanoseconds (UTC).

CREATE TABLE audit (
	seq     INTEGER PRIMARY KEY AUTOINCREMENT,
	time    INTEGER NOT NULL,
	subject TEXT NOT NULL,
	email   TEXT NOT NULL DEFAULT '',
	action  TEXT NOT NULL,
	target  TEXT NOT NULL DEFAULT '',
	tenant  TEXT NOT NULL DEFAULT '',
	source  TEXT NOT NULL DEFAULT '',
	detail  TEXT NOT NULL DEFAULT ''
);
CREATE INDEX audit_time ON audit (time, seq);
CREATE INDEX audit_tenant_time ON audit (tenant, time);

-- Spend alerts: one row per threshold crossed by a key's or a tenant
-- level's budget in one period, and its delivery to the webhook.
CREATE TABLE alerts (
	seq          INTEGER PRIMARY KEY AUTOINCREMENT,
	scope        TEXT NOT NULL,
	subject      TEXT NOT NULL,
	tenant       TEXT NOT NULL DEFAULT '',
	kind         TEXT NOT NULL,
	period_start INTEGER NOT NULL,
	threshold    INTEGER NOT NULL,
	used         REAL NOT NULL,
	budget       REAL NOT NULL,
	fired        INTEGER NOT NULL,
	delivered    INTEGER,
	attempts     INTEGER NOT NULL DEFAULT 0,
	next_try     INTEGER NOT NULL,
	last_error   TEXT NOT NULL DEFAULT '',
	UNIQUE (scope, subject, kind, period_start, threshold)
);
CREATE INDEX alerts_due ON alerts (next_try) WHERE delivered IS NULL;
