//go:build linux && !race

package proxy

func raceWrote([]byte) {}
func raceRead([]byte)  {}
