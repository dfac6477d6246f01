//go:build !unix

package lineartest

import "time"

// processStart is when the process began, as this package saw it.
var processStart = time.Now()

// cpuTime is, where the process's CPU time cannot be read, the wall
// clock's time since it began: a noisier stand-in.
func cpuTime() time.Duration { return time.Since(processStart) }
