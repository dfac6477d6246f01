//go:build !linux

package h1

// poll is the poller where there is none: every connection watches with a
// goroutine.
var poll noPoller

type noPoller struct{}

// pollWatch is the poller's part of a watch: nothing, without one.
type pollWatch struct{}

func (noPoller) add(*conn, *reqContext) bool { return false }
func (noPoller) remove(*conn)                {}
func (noPoller) forget(*conn)                {}
