//go:build !unix

package overload

import "time"

// processCPU returns 0: the process's CPU time is read on Unix only (the
// queue alone then says whether the Ps are busy).
func processCPU() time.Duration { return 0 }
