// The ledger's metrics: where records went, how many wait in the spool,
// and how often the store refused a write.

package ledger

import "github.com/prometheus/client_golang/prometheus"

// Results of a record, the values of llmgw_ledger_records_total's label.
const (
	resultWritten  = "written"  // into the store from the queue
	resultSpooled  = "spooled"  // into the spool, the store being down or the queue full
	resultReplayed = "replayed" // from the spool into the store
	resultDropped  = "dropped"  // lost: neither the store nor the spool took it
)

type metrics struct {
	records       *prometheus.CounterVec // label: result
	writeErrors   prometheus.Counter
	journalErrors prometheus.Counter
	spooled       prometheus.GaugeFunc
}

// newMetrics builds the ledger's metrics over spooled, the records waiting
// in the spool, and registers them on reg unless it is nil.
func newMetrics(reg prometheus.Registerer, spooled func() float64) *metrics {
	m := &metrics{
		records: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmgw_ledger_records_total",
			Help: "Usage records by where they went: written to the store, spooled to local disk, replayed from the spool, or dropped.",
		}, []string{"result"}),
		writeErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "llmgw_ledger_write_errors_total",
			Help: "Writes of usage records the store failed.",
		}),
		journalErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "llmgw_ledger_journal_errors_total",
			Help: "Usage records the local journal failed to take; each is still written, unless the process dies first.",
		}),
		spooled: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "llmgw_ledger_spooled_records",
			Help: "Usage records waiting in the local spool for the store.",
		}, spooled),
	}
	for _, r := range []string{resultWritten, resultSpooled, resultReplayed, resultDropped} {
		m.records.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(m.records, m.writeErrors, m.journalErrors, m.spooled)
	}
	return m
}
