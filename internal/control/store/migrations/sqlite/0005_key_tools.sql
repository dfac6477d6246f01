-- A key's MCP tool globs, beside its model globs: a JSON array, empty
-- for every tool.

ALTER TABLE keys ADD COLUMN tools TEXT NOT NULL DEFAULT '[]';
