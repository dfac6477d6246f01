package console

// The Usage and Requests pages, from the ledger: tokens and spend by
// tenant, model or key over a chosen window, as a table, a chart and a
// CSV file; and the latest records, filtered.

import (
	"encoding/csv"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/admin"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/alert"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/keys"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/tenant"
	"gitea.mynodes.xyz/ilker/llmgw/internal/control/usage"
)

// usageWindows are the windows the Usage page offers; since also takes
// any duration or RFC 3339 time, as the admin API does.
var usageWindows = []string{"1h", "24h", "7d", "30d"}

// usagePage is the Usage template's data.
type usagePage struct {
	Since, By, Tenant, Key string // the form, as sent
	Windows                []string
	Rows                   []usage.Row
	Total                  usage.Row
	Chart                  string // the chart's data, JSON, for the page's script
	Error                  string // why the form was refused
	CSV                    string // the CSV export's URL for the same query
	// Alerts are the latest spend alerts of budgets the session may read.
	Alerts []alert.Alert
}

// usageQuery reads the Usage form: admin.ParseUsageQuery's parameters,
// by model unless asked otherwise and over 24h unless asked otherwise.
func (c *Console) usageQuery(r *http.Request) (usagePage, usage.Query, string) {
	v := r.URL.Query()
	page := usagePage{Since: v.Get("since"), By: v.Get("by"), Tenant: v.Get("tenant"), Key: v.Get("key"), Windows: usageWindows}
	if page.Since == "" {
		page.Since = "24h"
	}
	if page.By == "" {
		page.By = usage.ByModel
	}
	get := func(name string) string {
		switch name {
		case "since":
			return page.Since
		case "by":
			return page.By
		}
		return v.Get(name)
	}
	q, e := admin.ParseUsageQuery(get, c.now().UTC())
	if !keys.ValidID(page.Key) {
		page.Key = "" // not shown again: it may be a key pasted in the wrong place
	}
	if e != nil {
		return page, q, e.Message
	}
	page.CSV = "/ui/usage.csv?" + r.URL.Query().Encode()
	return page, q, ""
}

func (c *Console) usagePage(w http.ResponseWriter, r *http.Request, ss *session) {
	page, q, msg := c.usageQuery(r)
	if msg != "" {
		page.Error = msg
		c.render(w, r, http.StatusBadRequest, "usage", ss, page)
		return
	}
	rows, err := admin.Usage(r.Context(), c.st, ss.who, q)
	if err != nil {
		c.failed(w, r, ss, "reading usage", err)
		return
	}
	page.Rows = rows
	chart := struct {
		Labels []string `json:"labels"`
		Series []series `json:"series"`
	}{}
	var prompt, completion, cost []float64
	for _, row := range rows {
		page.Total.Requests += row.Requests
		page.Total.Errors += row.Errors
		page.Total.PromptTokens += row.PromptTokens
		page.Total.CompletionTokens += row.CompletionTokens
		page.Total.CachedTokens += row.CachedTokens
		page.Total.CostUSD += row.CostUSD
		chart.Labels = append(chart.Labels, groupLabel(row.Group))
		prompt = append(prompt, float64(row.PromptTokens))
		completion = append(completion, float64(row.CompletionTokens))
		cost = append(cost, row.CostUSD)
	}
	chart.Series = []series{{"Prompt tokens", prompt, "tokens"}, {"Completion tokens", completion, "tokens"}, {"Spend (USD)", cost, "usd"}}
	b, _ := json.Marshal(chart)
	page.Chart = string(b)
	als, err := c.st.Alerts(r.Context(), consoleAlerts)
	if err != nil {
		c.failed(w, r, ss, "reading the spend alerts", err)
		return
	}
	for _, a := range als {
		if ss.who.CanRead(a.Tenant) {
			page.Alerts = append(page.Alerts, a)
		}
	}
	c.render(w, r, http.StatusOK, "usage", ss, page)
}

// consoleAlerts is how many of the latest spend alerts the Usage page
// reads, before those outside the session's subtrees are left out.
const consoleAlerts = 50

// series is one data set of the usage chart.
type series struct {
	Label string    `json:"label"`
	Data  []float64 `json:"data"`
	Axis  string    `json:"axis"` // tokens or usd
}

// groupLabel is a usage group as the chart and table name it.
func groupLabel(g string) string {
	if g == "" {
		return "(none)"
	}
	return g
}

// usageCSV is the Usage page's rows as CSV.
func (c *Console) usageCSV(w http.ResponseWriter, r *http.Request, ss *session) {
	page, q, msg := c.usageQuery(r)
	if msg != "" {
		http.Error(w, msg, http.StatusBadRequest)
		return
	}
	rows, err := admin.Usage(r.Context(), c.st, ss.who, q)
	if err != nil {
		c.log.Error("console: reading usage", "err", err)
		http.Error(w, "Failed reading usage; the gateway's log says why.", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="llmgw-usage-by-`+page.By+`.csv"`)
	cw := csv.NewWriter(w)
	cw.Write([]string{page.By, "requests", "errors", "prompt_tokens", "completion_tokens", "cached_tokens", "cost_usd", "since", "until"})
	since := ""
	if !q.Since.IsZero() {
		since = q.Since.UTC().Format(time.RFC3339)
	}
	until := q.Until.UTC().Format(time.RFC3339)
	for _, row := range rows {
		cw.Write([]string{csvCell(row.Group), i64(row.Requests), i64(row.Errors), i64(row.PromptTokens), i64(row.CompletionTokens),
			i64(row.CachedTokens), strconv.FormatFloat(row.CostUSD, 'f', -1, 64), since, until})
	}
	cw.Flush()
}

func i64(n int64) string { return strconv.FormatInt(n, 10) }

// csvCell is s as a CSV cell a spreadsheet shows as text: a cell that
// begins with =, +, -, @, a tab or a carriage return would be read as a
// formula, so it gets a leading quote.
func csvCell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

// requestsPage is the Requests template's data.
type requestsPage struct {
	Tenant, Key, Model, Status string // the filters, as sent
	Errors                     bool
	Limit                      int
	Records                    []usage.Record
	Error                      string
}

// requestLimits are the page sizes the Requests page offers.
var requestLimits = []int{50, usage.DefaultRecords, 500, usage.MaxRecords}

// RequestLimits is requestLimits, for the template.
func (requestsPage) RequestLimits() []int { return requestLimits }

func (c *Console) requests(w http.ResponseWriter, r *http.Request, ss *session) {
	v := r.URL.Query()
	page := requestsPage{Tenant: v.Get("tenant"), Key: v.Get("key"), Model: v.Get("model"), Status: v.Get("status"), Errors: v.Get("errors") != ""}
	q := usage.RecordQuery{Model: page.Model, Errors: page.Errors}
	page.Limit, _ = strconv.Atoi(v.Get("limit"))
	q.Limit = page.Limit
	page.Limit = q.RecordLimit()
	if page.Tenant != "" {
		p, err := tenant.ParsePath(page.Tenant)
		if err != nil {
			page.Error = "tenant: must be one to three levels (org/team/user) of letters, digits, '-', '_' and '.'."
		}
		q.TenantPrefix = p
	}
	q.KeyID = page.Key
	if page.Key != "" && !keys.ValidID(page.Key) {
		// Not shown again: it may be a key pasted in the wrong place.
		page.Error, page.Key = "key: must be a key id (key_ and 12 characters), never the key itself.", ""
	}
	if page.Status != "" {
		n, err := strconv.Atoi(page.Status)
		if err != nil || n < 100 || n > 599 {
			page.Error = "status: must be an HTTP status, 100 to 599."
		}
		q.Status = n
	}
	if page.Error != "" {
		c.render(w, r, http.StatusBadRequest, "requests", ss, page)
		return
	}
	recs, err := admin.Records(r.Context(), c.st, ss.who, q)
	if err != nil {
		c.failed(w, r, ss, "reading the latest requests", err)
		return
	}
	page.Records = recs
	c.render(w, r, http.StatusOK, "requests", ss, page)
}
