// Package prometheus holds llmgw's Prometheus rules, llmgw.rules.yml, and
// their tests: promtool's check and unit tests (llmgw.rules.test.yml),
// every alert's runbook and test cases, and a run of a real Prometheus
// scraping a real gateway under load, which reads every dashboard query
// and recording rule and waits for an alert. It has no code of its own.
//
// The tests that need promtool or prometheus (Debian's prometheus
// package) skip without them, unless LLMGW_TEST_PROMETHEUS is set, as in
// CI, where they fail instead.
package prometheus
