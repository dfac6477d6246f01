// Package usage is the ledger's data: one record per request, and the
// aggregates read back from it. The router writes records, the ledger
// stores them, operators and keys read the sums.
package usage

import "time"

// Record is one request's usage, written once per request whatever its
// outcome. ID is unique per request, so that replaying a spooled record
// never counts it twice.
type Record struct {
	ID               string        `json:"id"`
	Time             time.Time     `json:"time"` // when the request arrived
	KeyID            string        `json:"key_id,omitempty"`
	Tenant           string        `json:"tenant,omitempty"` // full path
	Model            string        `json:"model"`            // canonical name
	Pool             string        `json:"pool,omitempty"`
	Endpoint         string        `json:"endpoint,omitempty"` // base URL of the endpoint that answered
	PromptTokens     int64         `json:"prompt_tokens"`
	CompletionTokens int64         `json:"completion_tokens"`
	CachedTokens     int64         `json:"cached_tokens"`
	Estimated        bool          `json:"estimated,omitempty"` // token counts were estimated, not reported by the backend
	CostUSD          float64       `json:"cost_usd"`
	Status           int           `json:"status"` // HTTP status; 499 when the client went away
	TTFT             time.Duration `json:"ttft_ns"`
	Duration         time.Duration `json:"duration_ns"`
	Streamed         bool          `json:"streamed"`
	// Kind is what the record is of: a request to a model, or a call to
	// an MCP tool, whose record names the tool as /mcp lists it
	// (server__tool) in Model and its server in Pool, and has no tokens.
	Kind Kind `json:"kind,omitempty"`
	// BytesIn and BytesOut are a tool call's arguments and result, as
	// JSON; zero for a request to a model.
	BytesIn  int64 `json:"bytes_in,omitempty"`
	BytesOut int64 `json:"bytes_out,omitempty"`
}

// Kind is what a record is of.
type Kind string

// The kinds of record.
const (
	KindModel Kind = ""     // a request to a model
	KindTool  Kind = "tool" // a call to an MCP tool
)

// Query selects records to sum. Zero fields select everything.
type Query struct {
	TenantPrefix string    // a tenant path; its descendants are included
	KeyID        string    // one key only
	Since        time.Time // records at or after
	Until        time.Time // records before; zero means now
	By           string    // group by: model, tenant, key; empty means one total row
}

// Group-by choices for Query.By.
const (
	ByModel  = "model"
	ByTenant = "tenant"
	ByKey    = "key"
)

// Row is one group's sums.
type Row struct {
	Group            string  `json:"group,omitempty"` // the model, tenant or key id; empty for a total
	Requests         int64   `json:"requests"`
	Errors           int64   `json:"errors"` // status 400 and above, 499 included
	PromptTokens     int64   `json:"prompt_tokens"`
	CompletionTokens int64   `json:"completion_tokens"`
	CachedTokens     int64   `json:"cached_tokens"`
	CostUSD          float64 `json:"cost_usd"`
}

// RecordQuery selects the latest records, newest first. Zero fields
// select everything.
type RecordQuery struct {
	TenantPrefix string    // a tenant path; its descendants are included
	KeyID        string    // one key only
	Model        string    // one canonical model only
	Status       int       // one HTTP status only; zero for any
	Errors       bool      // status 400 and above only
	Since        time.Time // records at or after
	Until        time.Time // records before; zero means now
	Limit        int       // at most this many; see RecordLimit
}

// The bounds of RecordQuery.Limit: DefaultRecords when it is zero or
// less, and never more than MaxRecords, so that one page of the latest
// records stays a page whatever the ledger holds.
const (
	DefaultRecords = 100
	MaxRecords     = 1000
)

// RecordLimit is how many records q asks for, within its bounds.
func (q RecordQuery) RecordLimit() int {
	switch {
	case q.Limit <= 0:
		return DefaultRecords
	case q.Limit > MaxRecords:
		return MaxRecords
	}
	return q.Limit
}
