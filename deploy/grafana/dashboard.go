// Package grafana writes llmgw's Grafana dashboards, the JSON files in
// this directory, from the definitions in dashboards.go. The test
// TestDashboardsGenerated fails when a file differs from what the
// definitions make; `go -C deploy test ./grafana -run TestDashboardsGenerated
// -update` writes them again.
package grafana

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Dashboard is one Grafana dashboard, in the JSON model Grafana imports
// (schema version 39).
type Dashboard struct {
	UID           string     `json:"uid"`
	Title         string     `json:"title"`
	Description   string     `json:"description"`
	Tags          []string   `json:"tags"`
	Editable      bool       `json:"editable"`
	SchemaVersion int        `json:"schemaVersion"`
	Version       int        `json:"version"`
	Time          timeRange  `json:"time"`
	Refresh       string     `json:"refresh"`
	Links         []link     `json:"links"`
	Templating    templating `json:"templating"`
	Panels        []*Panel   `json:"panels"`
}

type timeRange struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// link is the dashboards menu every llmgw dashboard carries, to the others.
type link struct {
	Title       string   `json:"title"`
	Type        string   `json:"type"`
	Tags        []string `json:"tags"`
	AsDropdown  bool     `json:"asDropdown"`
	IncludeVars bool     `json:"includeVars"`
	KeepTime    bool     `json:"keepTime"`
}

type templating struct {
	List []Variable `json:"list"`
}

// Variable is a dashboard variable: the data source, or a label's values
// from a query.
type Variable struct {
	Name       string      `json:"name"`
	Label      string      `json:"label"`
	Type       string      `json:"type"`
	Query      any         `json:"query"`
	Definition string      `json:"definition,omitempty"`
	Datasource *datasource `json:"datasource,omitempty"`
	Multi      bool        `json:"multi"`
	IncludeAll bool        `json:"includeAll"`
	AllValue   string      `json:"allValue,omitempty"`
	Refresh    int         `json:"refresh"`
	Sort       int         `json:"sort"`
}

type variableQuery struct {
	Query string `json:"query"`
	RefID string `json:"refId"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// Panel is one graph or stat of a dashboard.
type Panel struct {
	ID          int         `json:"id"`
	Type        string      `json:"type"`
	Title       string      `json:"title"`
	Description string      `json:"description"`
	GridPos     gridPos     `json:"gridPos"`
	Datasource  datasource  `json:"datasource"`
	Targets     []Target    `json:"targets"`
	FieldConfig fieldConfig `json:"fieldConfig"`
}

type gridPos struct {
	H int `json:"h"`
	W int `json:"w"`
	X int `json:"x"`
	Y int `json:"y"`
}

// Target is one PromQL query of a panel.
type Target struct {
	RefID        string     `json:"refId"`
	Expr         string     `json:"expr"`
	LegendFormat string     `json:"legendFormat"`
	Datasource   datasource `json:"datasource"`
}

type fieldConfig struct {
	Defaults  fieldDefaults `json:"defaults"`
	Overrides []any         `json:"overrides"`
}

type fieldDefaults struct {
	Unit string `json:"unit"`
	Min  *int   `json:"min,omitempty"`
}

// promDS is every panel's and query's data source: the $datasource
// variable.
var promDS = datasource{Type: "prometheus", UID: "${datasource}"}

// Panel widths and heights on Grafana's 24-column grid: two graphs a row.
const (
	panelW = 12
	panelH = 8
)

// q is a query and its legend.
func q(expr, legend string) Target { return Target{Expr: expr, LegendFormat: legend} }

// graph is a time series panel.
func graph(title, unit, desc string, targets ...Target) *Panel {
	return &Panel{Type: "timeseries", Title: title, Description: desc, Targets: targets,
		FieldConfig: fieldConfig{Defaults: fieldDefaults{Unit: unit}, Overrides: []any{}}}
}

// stat is a single-figure panel.
func stat(title, unit, desc string, targets ...Target) *Panel {
	p := graph(title, unit, desc, targets...)
	p.Type = "stat"
	return p
}

// labelVariable is a variable over the values of label on metric, every
// value selected by default (All matches any, as a regex).
func labelVariable(name, label, metric string) Variable {
	def := "label_values(" + metric + ", " + label + ")"
	return Variable{
		Name: name, Label: strings.ToUpper(name[:1]) + name[1:], Type: "query",
		Query: variableQuery{Query: def, RefID: name}, Definition: def, Datasource: &promDS,
		Multi: true, IncludeAll: true, AllValue: ".*", Refresh: 2, Sort: 1,
	}
}

// variables are every dashboard's: the Prometheus data source, and the
// model, pool and tenant that its queries filter on.
func variables() []Variable {
	return []Variable{
		{Name: "datasource", Label: "Data source", Type: "datasource", Query: "prometheus"},
		labelVariable("model", "model", "llmgw_requests_total"),
		labelVariable("pool", "pool", "llmgw_endpoint_up"),
		labelVariable("tenant", "tenant", "llmgw_tenant_tpot_seconds_count"),
	}
}

// newDashboard lays panels out two to a row, numbers them and their
// queries, and gives the dashboard the variables and links every llmgw
// dashboard has.
func newDashboard(uid, title, desc string, panels ...*Panel) *Dashboard {
	for i, p := range panels {
		p.ID = i + 1
		p.GridPos = gridPos{H: panelH, W: panelW, X: (i % 2) * panelW, Y: (i / 2) * panelH}
		p.Datasource = promDS
		for j := range p.Targets {
			p.Targets[j].RefID = string(rune('A' + j))
			p.Targets[j].Datasource = promDS
		}
	}
	return &Dashboard{
		UID: uid, Title: title, Description: desc, Tags: []string{"llmgw"}, Editable: true,
		SchemaVersion: 39, Version: 1, Time: timeRange{From: "now-6h", To: "now"}, Refresh: "30s",
		Links: []link{{Title: "llmgw", Type: "dashboards", Tags: []string{"llmgw"},
			AsDropdown: true, IncludeVars: true, KeepTime: true}},
		Templating: templating{List: variables()},
		Panels:     panels,
	}
}

// JSON is the dashboard as Grafana imports it: indented, ending in a
// newline, the way the committed files are.
func (d *Dashboard) JSON() ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(d); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
