// Package storetest is the conformance suite every gateway.Store passes.
package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/linkgate/linkgate/gateway"
)

// Run exercises a store made by newStore (a fresh, empty one per call).
func Run(t *testing.T, newStore func(t *testing.T) gateway.Store) {
	ctx := context.Background()
	t.Run("CRUD", func(t *testing.T) {
		s := newStore(t)
		if _, err := s.Get(ctx, gateway.KindRoute, "1"); !errors.Is(err, gateway.ErrNotFound) {
			t.Fatalf("Get missing: %v, want ErrNotFound", err)
		}
		e1, created, err := s.Put(ctx, gateway.KindRoute, "1", []byte(`{"uri":"/a"}`), 0)
		if err != nil || !created || e1.CreatedIndex == 0 || e1.ModifiedIndex != e1.CreatedIndex {
			t.Fatalf("Put new: %+v created=%v err=%v", e1, created, err)
		}
		e2, created, err := s.Put(ctx, gateway.KindRoute, "1", []byte(`{"uri":"/b"}`), 0)
		if err != nil || created || e2.CreatedIndex != e1.CreatedIndex || e2.ModifiedIndex <= e1.ModifiedIndex {
			t.Fatalf("Put replace: %+v created=%v err=%v", e2, created, err)
		}
		got, err := s.Get(ctx, gateway.KindRoute, "1")
		if err != nil || string(got.Value) != `{"uri":"/b"}` || got.ModifiedIndex != e2.ModifiedIndex {
			t.Fatalf("Get: %+v %v", got, err)
		}
		if _, _, err := s.Put(ctx, gateway.KindRoute, "1", []byte(`{}`), e1.ModifiedIndex); !errors.Is(err, gateway.ErrConflict) {
			t.Fatalf("stale conditional Put: %v, want ErrConflict", err)
		}
		if _, _, err := s.Put(ctx, gateway.KindRoute, "1", []byte(`{"uri":"/c"}`), e2.ModifiedIndex); err != nil {
			t.Fatalf("conditional Put: %v", err)
		}
		if _, _, err := s.Put(ctx, gateway.KindRoute, "2", []byte(`{"uri":"/2"}`), 0); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Put(ctx, gateway.KindUpstream, "1", []byte(`{}`), 0); err != nil {
			t.Fatal(err)
		}
		list, err := s.List(ctx, gateway.KindRoute)
		if err != nil || len(list) != 2 || list[0].ID != "1" || list[1].ID != "2" {
			t.Fatalf("List: %+v %v", list, err)
		}
		if err := s.Delete(ctx, gateway.KindRoute, "1"); err != nil {
			t.Fatal(err)
		}
		if err := s.Delete(ctx, gateway.KindRoute, "1"); !errors.Is(err, gateway.ErrNotFound) {
			t.Fatalf("Delete missing: %v", err)
		}
		a, err1 := s.NextID(ctx)
		b, err2 := s.NextID(ctx)
		if err1 != nil || err2 != nil || len(a) != 20 || a >= b {
			t.Fatalf("NextID: %q %q %v %v", a, b, err1, err2)
		}
	})
	t.Run("RetainsNothing", func(t *testing.T) { retainsNothing(t, newStore(t)) })
	t.Run("Watch", func(t *testing.T) {
		s := newStore(t)
		if _, _, err := s.Put(ctx, gateway.KindRoute, "1", []byte(`{"uri":"/a"}`), 0); err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithCancel(ctx)
		updates := make(chan gateway.Update, 16)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = s.Watch(wctx, func(u gateway.Update) { updates <- u })
		}()
		defer func() { cancel(); wg.Wait() }()
		first := next(t, updates)
		if !first.Reset || len(first.Entries) != 1 || first.Entries[0].ID != "1" {
			t.Fatalf("first update: %+v", first)
		}
		if _, _, err := s.Put(ctx, gateway.KindUpstream, "u", []byte(`{"type":"roundrobin"}`), 0); err != nil {
			t.Fatal(err)
		}
		u := next(t, updates)
		if u.Reset || len(u.Entries) != 1 || u.Entries[0].Kind != gateway.KindUpstream || u.Entries[0].ID != "u" {
			t.Fatalf("put update: %+v", u)
		}
		if err := s.Delete(ctx, gateway.KindRoute, "1"); err != nil {
			t.Fatal(err)
		}
		u = next(t, updates)
		if len(u.Deleted) != 1 || u.Deleted[0].ID != "1" || u.Deleted[0].Kind != gateway.KindRoute {
			t.Fatalf("delete update: %+v", u)
		}
		// A consumer's credential (APISIX 3.x) is kept under the consumer's key.
		cred := gateway.CredentialKey("jack", "a")
		if _, _, err := s.Put(ctx, gateway.KindConsumer, cred, []byte(`{"plugins":{}}`), 0); err != nil {
			t.Fatal(err)
		}
		if u = next(t, updates); len(u.Entries) != 1 || u.Entries[0].Kind != gateway.KindConsumer || u.Entries[0].ID != cred {
			t.Fatalf("credential update: %+v", u)
		}
		if list, err := s.List(ctx, gateway.KindConsumer); err != nil || len(list) != 1 || list[0].ID != cred {
			t.Fatalf("List consumers: %+v %v", list, err)
		}
		if err := s.Delete(ctx, gateway.KindConsumer, cred); err != nil {
			t.Fatal(err)
		}
		if u = next(t, updates); len(u.Deleted) != 1 || u.Deleted[0].ID != cred {
			t.Fatalf("credential delete update: %+v", u)
		}
	})
}

// requestBuffer imitates fasthttp's reusable request buffer: id and value
// are views of buf, overwritten once the "request" is over.
type requestBuffer struct{ buf []byte }

func (b *requestBuffer) views(id, value string) (string, []byte) {
	b.buf = append(append(b.buf[:0], id...), value...)
	return unsafe.String(&b.buf[0], len(id)), b.buf[len(id):]
}

func (b *requestBuffer) reuse() {
	for i := range b.buf {
		b.buf[i] = 'x'
	}
}

// retainsNothing: a store keeps no reference to its arguments' memory.
func retainsNothing(t *testing.T, s gateway.Store) {
	ctx := context.Background()
	wctx, cancel := context.WithCancel(ctx)
	updates := make(chan gateway.Update, 16)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = s.Watch(wctx, func(u gateway.Update) { updates <- u })
	}()
	defer func() { cancel(); wg.Wait() }()
	next(t, updates) // the initial reset
	var b requestBuffer
	id, value := b.views("17", `{"uri":"/kept"}`)
	put, _, err := s.Put(ctx, gateway.KindRoute, id, value, 0)
	if err != nil {
		t.Fatal(err)
	}
	b.reuse()
	if put.ID != "17" || string(put.Value) != `{"uri":"/kept"}` {
		t.Errorf("Put's entry changed with the caller's buffer: %q %q", put.ID, put.Value)
	}
	u := next(t, updates)
	if len(u.Entries) != 1 || u.Entries[0].ID != "17" || string(u.Entries[0].Value) != `{"uri":"/kept"}` {
		t.Errorf("watched put changed with the caller's buffer: %+v", u)
	}
	id, _ = b.views("17", "")
	got, err := s.Get(ctx, gateway.KindRoute, id)
	b.reuse()
	if err != nil || got.ID != "17" {
		t.Errorf("Get's entry changed with the caller's buffer: %q %v", got.ID, err)
	}
	id, _ = b.views("17", "")
	if err := s.Delete(ctx, gateway.KindRoute, id); err != nil {
		t.Fatal(err)
	}
	b.reuse()
	u = next(t, updates)
	if len(u.Deleted) != 1 || u.Deleted[0].ID != "17" {
		t.Errorf("watched delete changed with the caller's buffer: %+v", u)
	}
}

func next(t *testing.T, ch <-chan gateway.Update) gateway.Update {
	t.Helper()
	select {
	case u := <-ch:
		return u
	case <-time.After(5 * time.Second):
		t.Fatal("no update within 5s")
	}
	return gateway.Update{}
}
