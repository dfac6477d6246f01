-- MCP tools: a key's tool globs beside its model globs (an array, empty
-- for every tool), and the tool calls a minute a key and a tenant level
-- may make (0 is no limit).

ALTER TABLE keys ADD COLUMN tools TEXT NOT NULL DEFAULT '[]';
ALTER TABLE keys ADD COLUMN tool_rpm INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tenant_limits ADD COLUMN tool_rpm INTEGER NOT NULL DEFAULT 0;

-- A usage record's kind (empty for a request to a model, tool for an MCP
-- tool call) and a tool call's bytes in and out.
ALTER TABLE usage ADD COLUMN kind TEXT NOT NULL DEFAULT '';
ALTER TABLE usage ADD COLUMN bytes_in BIGINT NOT NULL DEFAULT 0;
ALTER TABLE usage ADD COLUMN bytes_out BIGINT NOT NULL DEFAULT 0;
