package lua

import (
	"fmt"

	"github.com/HdrHistogram/hdrhistogram-go"
	lua "github.com/yuin/gopher-lua"

	"github.com/linkgate/linkgate/bench"
)

// Done calls the script's done(summary, latency, requests) with the run's
// figures, as wrk does after printing its report: summary.duration (µs),
// requests, bytes and errors{connect, read, write, status, timeout};
// latency and requests offer min, max, mean, stdev and :percentile(p), in
// microseconds and requests/second.
func (s *Script) Done(r *bench.Result) error {
	fn, ok := s.main.GetGlobal("done").(*lua.LFunction)
	if !ok {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	L := s.main
	summary := L.NewTable()
	summary.RawSetString("duration", lua.LNumber(r.Elapsed.Microseconds()))
	summary.RawSetString("requests", lua.LNumber(r.Requests))
	summary.RawSetString("bytes", lua.LNumber(r.Bytes))
	errs := L.NewTable()
	errs.RawSetString("connect", lua.LNumber(r.Errors.Connect))
	errs.RawSetString("read", lua.LNumber(r.Errors.Read))
	errs.RawSetString("write", lua.LNumber(r.Errors.Write))
	errs.RawSetString("status", lua.LNumber(r.Errors.StatusTotal()))
	errs.RawSetString("timeout", lua.LNumber(r.Errors.Timeout))
	summary.RawSetString("errors", errs)
	err := L.CallByParam(lua.P{Fn: fn, Protect: true}, summary, newStats(L, r.Latency), newStats(L, r.ReqPerSec))
	if err != nil {
		return fmt.Errorf("lua script %s: done: %w", s.o.Path, err)
	}
	return nil
}

// newStats wraps a histogram as wrk's stats userdata.
func newStats(L *lua.LState, h *hdrhistogram.Histogram) *lua.LUserData {
	ud := L.NewUserData()
	ud.Value = h
	mt := L.NewTable()
	percentile := L.NewFunction(func(L *lua.LState) int {
		p := float64(L.CheckNumber(2))
		if p < 0 || p > 100 {
			L.ArgError(2, "percentile must be between 0 and 100")
		}
		L.Push(lua.LNumber(h.ValueAtPercentile(p)))
		return 1
	})
	mt.RawSetString("__index", L.NewFunction(func(L *lua.LState) int {
		switch L.CheckString(2) {
		case "min":
			L.Push(lua.LNumber(h.Min()))
		case "max":
			L.Push(lua.LNumber(h.Max()))
		case "mean":
			L.Push(lua.LNumber(h.Mean()))
		case "stdev":
			L.Push(lua.LNumber(h.StdDev()))
		case "percentile":
			L.Push(percentile)
		default:
			L.Push(lua.LNil)
		}
		return 1
	}))
	L.SetMetatable(ud, mt)
	return ud
}
