-- Secrets the gateways sharing this store agree on, made once by whichever
-- asks first: the key cache salts are derived from.

CREATE TABLE secrets (
	name    TEXT PRIMARY KEY,
	value   BLOB NOT NULL,
	created INTEGER NOT NULL
);
