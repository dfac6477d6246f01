package scrape

// Why a scrape or a probe failed, as one of a few words: what an operator
// counts failures by.

import (
	"context"
	"errors"
	"fmt"
	"net"
)

// The reasons a scrape or a probe fails, as Reason gives them.
const (
	// ReasonConnect: no answer came, the connection was refused, reset or
	// closed (DNS, TLS and dial errors too).
	ReasonConnect = "connect"
	// ReasonTimeout: the answer did not arrive within the scrape's max
	// age or the probe's timeout.
	ReasonTimeout = "timeout"
	// ReasonStatus: the endpoint answered with a status other than 2xx.
	ReasonStatus = "status"
	// ReasonParse: a scrape's answer was not Prometheus text the gateway
	// reads (a malformed line of a metric it reads, protobuf, too long).
	ReasonParse = "parse"
)

// Reasons are the reasons Reason gives, in a fixed order; ProbeReasons
// those a probe can fail for, which reads no body.
var (
	Reasons      = [...]string{ReasonConnect, ReasonTimeout, ReasonStatus, ReasonParse}
	ProbeReasons = [...]string{ReasonConnect, ReasonTimeout, ReasonStatus}
)

// Reason is why err, from a Target's OnScrapeError or OnHealth, happened:
// one of Reasons. An error that is none of the others is connect.
func Reason(err error) string {
	var status statusError
	var bad badAnswer
	var ne net.Error
	switch {
	case errors.As(err, &status):
		return ReasonStatus
	case errors.As(err, &bad):
		return ReasonParse
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return ReasonTimeout
	}
	return ReasonConnect
}

// statusError is an answer's status that is not 2xx.
type statusError int

func (s statusError) Error() string { return fmt.Sprintf("status %d", int(s)) }

// badAnswer is a scrape's answer that could not be read as the text it
// should be.
type badAnswer struct{ err error }

func (b badAnswer) Error() string { return b.err.Error() }
func (b badAnswer) Unwrap() error { return b.err }
