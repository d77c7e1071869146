package visits

import "time"

// SetPacerClock makes the drain's and the build's pacers pause with pause
// and read now; restore puts time.Sleep and time.Now back.
func SetPacerClock(pause func(time.Duration), now func() time.Time) (restore func()) {
	pacerPause, pacerNow = pause, now
	return func() { pacerPause, pacerNow = nil, nil }
}
