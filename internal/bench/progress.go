package bench

// Progress while a run goes: a bar redrawn in place when stderr is a
// terminal, otherwise a plain line every few seconds so logs stay
// readable.

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// Progress counts a run's requests as they start and end. A nil *Progress
// counts nothing, so a driver without one needs no checks.
type Progress struct {
	total                         int
	inflight, ok, failed, refused atomic.Int64
}

// NewProgress counts a run of total requests.
func NewProgress(total int) *Progress { return &Progress{total: total} }

func (p *Progress) started() {
	if p != nil {
		p.inflight.Add(1)
	}
}

// dropped counts a request that was never sent.
func (p *Progress) dropped() {
	if p != nil {
		p.failed.Add(1)
	}
}

// done counts a sent request's end.
func (p *Progress) done(o Outcome) {
	if p == nil {
		return
	}
	p.inflight.Add(-1)
	switch o {
	case OutcomeOK:
		p.ok.Add(1)
	case OutcomeRejected:
		p.refused.Add(1)
	default:
		p.failed.Add(1)
	}
}

// Progress output intervals: a bar is cheap to redraw, a log line is not.
const (
	barInterval  = 200 * time.Millisecond
	lineInterval = 5 * time.Second
	barWidth     = 30
)

// isTerminal reports whether w is a character device, as a terminal is.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// Show writes progress of a run labelled label to w until ctx ends, then
// a final line.
func (p *Progress) Show(ctx context.Context, w io.Writer, label string) {
	term := isTerminal(w)
	every := lineInterval
	if term {
		every = barInterval
	}
	start := time.Now()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			if term {
				fmt.Fprintf(w, "\r%s\n", p.line(label, time.Since(start), true))
			} else {
				fmt.Fprintln(w, p.line(label, time.Since(start), false))
			}
			return
		case <-tick.C:
			if term {
				fmt.Fprintf(w, "\r%s", p.line(label, time.Since(start), true))
			} else {
				fmt.Fprintln(w, p.line(label, time.Since(start), false))
			}
		}
	}
}

func (p *Progress) line(label string, elapsed time.Duration, bar bool) string {
	ok, failed, refused := p.ok.Load(), p.failed.Load(), p.refused.Load()
	finished := ok + failed + refused
	inflight := p.inflight.Load()
	var b strings.Builder
	b.WriteString(label)
	if bar {
		filled := 0
		if p.total > 0 {
			filled = int(finished) * barWidth / p.total
		}
		fmt.Fprintf(&b, " [%s%s]", strings.Repeat("#", filled), strings.Repeat(".", barWidth-filled))
	}
	fmt.Fprintf(&b, " %d/%d done, %d in flight, %d rejected, %d errors, %s",
		finished, p.total, inflight, refused, failed, elapsed.Truncate(100*time.Millisecond))
	return b.String()
}
