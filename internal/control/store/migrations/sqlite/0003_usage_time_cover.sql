-- The time index carries every column the aggregates and the console's
-- filters read, as the tenant and key indexes do, so that a window of the
-- whole ledger is summed, and the latest records are filtered by model or
-- status, from the index alone. It takes the place of the plain one.

CREATE INDEX usage_time_cover ON usage (time, model, tenant, key_id, status, prompt_tokens, completion_tokens, cached_tokens, cost_usd);
DROP INDEX usage_time;
