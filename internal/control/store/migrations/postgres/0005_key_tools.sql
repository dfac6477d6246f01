-- A key's MCP tool globs, beside its model globs: an array, empty for
-- every tool.

ALTER TABLE keys ADD COLUMN tools JSONB NOT NULL DEFAULT '[]';
