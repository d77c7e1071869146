package testdep

import (
	"syscall"
	"time"
)

// CPUTime is the CPU time (user and system) the process has used: what
// benchmarks report per operation on a shared machine, where time taken
// by other processes inflates wall-clock figures.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
