package lua

import (
	lua "github.com/yuin/gopher-lua"
)

// threadRef is a thread as scripts see it: setup(thread) gets one in the
// main state, wrk.thread is one in the thread's own state.
type threadRef struct {
	L    *lua.LState // the thread's state
	id   int
	addr string
}

// newThread makes the thread userdata in state L: thread.id, thread.addr,
// thread:get(name) and thread:set(name, value), which read and write the
// thread state's globals (copying values between states), and thread:stop().
func newThread(L *lua.LState, t *threadRef) *lua.LUserData {
	ud := L.NewUserData()
	ud.Value = t
	mt := L.NewTable()
	get := L.NewFunction(func(L *lua.LState) int {
		L.Push(copyValue(L, t.L.GetGlobal(L.CheckString(2)), 0))
		return 1
	})
	set := L.NewFunction(func(L *lua.LState) int {
		t.L.SetGlobal(L.CheckString(2), copyValue(t.L, L.Get(3), 0))
		return 0
	})
	stop := L.NewFunction(func(L *lua.LState) int {
		L.RaiseError("thread:stop() is not supported by linkgate bench")
		return 0
	})
	mt.RawSetString("__index", L.NewFunction(func(L *lua.LState) int {
		switch L.CheckString(2) {
		case "get":
			L.Push(get)
		case "set":
			L.Push(set)
		case "stop":
			L.Push(stop)
		case "addr":
			L.Push(lua.LString(t.addr))
		case "id":
			L.Push(lua.LNumber(t.id))
		default:
			L.Push(lua.LNil)
		}
		return 1
	}))
	mt.RawSetString("__newindex", L.NewFunction(func(L *lua.LState) int {
		L.RaiseError("thread.%s cannot be set: linkgate bench connects every thread to the URL's address", L.CheckString(2))
		return 0
	}))
	L.SetMetatable(ud, mt)
	return ud
}

// copyValue copies v into state L: scalars as they are, tables deeply
// (to a bounded depth); functions and userdata cannot cross states.
func copyValue(L *lua.LState, v lua.LValue, depth int) lua.LValue {
	switch v := v.(type) {
	case lua.LString, lua.LNumber, lua.LBool:
		return v
	case *lua.LTable:
		if depth > 32 {
			L.RaiseError("table nested too deeply to copy between threads")
		}
		t := L.NewTable()
		v.ForEach(func(k, val lua.LValue) {
			t.RawSet(copyValue(L, k, depth+1), copyValue(L, val, depth+1))
		})
		return t
	case *lua.LNilType:
		return lua.LNil
	}
	L.RaiseError("a %s cannot be copied between threads", v.Type())
	return lua.LNil
}
