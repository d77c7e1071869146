package bolt_test

import (
	"path/filepath"
	"testing"

	"github.com/linkgate/linkgate/gateway"
	"github.com/linkgate/linkgate/gateway/bolt"
	"github.com/linkgate/linkgate/gateway/storetest"
)

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) gateway.Store {
		s, err := bolt.Open(filepath.Join(t.TempDir(), "sub", "gw.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// Entries survive reopening the file.
func TestDurable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gw.db")
	s, err := bolt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Put(t.Context(), gateway.KindRoute, "1", []byte(`{"uri":"/a"}`), 0); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = bolt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	e, err := s.Get(t.Context(), gateway.KindRoute, "1")
	if err != nil || string(e.Value) != `{"uri":"/a"}` {
		t.Fatalf("after reopen: %+v %v", e, err)
	}
	if _, _, err := s.Put(t.Context(), gateway.KindRoute, "2", []byte(`{}`), 0); err != nil {
		t.Fatal(err)
	}
	e2, _ := s.Get(t.Context(), gateway.KindRoute, "2")
	if e2.ModifiedIndex <= e.ModifiedIndex {
		t.Errorf("revision went back after reopen: %d then %d", e.ModifiedIndex, e2.ModifiedIndex)
	}
}
