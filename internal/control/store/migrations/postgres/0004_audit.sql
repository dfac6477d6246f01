-- The audit trail: who changed what, when and from where. The gateway
-- only appends to it, and removes what is older than its retention.

CREATE TABLE audit (
	seq     BIGSERIAL PRIMARY KEY,
	time    TIMESTAMPTZ NOT NULL,
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
