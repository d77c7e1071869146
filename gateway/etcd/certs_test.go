package etcd_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"

	"github.com/linkgate/linkgate/gateway/etcd"
	"github.com/linkgate/linkgate/internal/certstoretest"
	"github.com/linkgate/linkgate/internal/etcdtest"
)

func TestCertStorage(t *testing.T) {
	srv := etcdtest.Start(t)
	var mu sync.Mutex
	stores := map[certmagic.Storage]*etcd.Store{}
	n := 0
	certstoretest.Run(t, certstoretest.Harness{
		Open: func(t *testing.T) func() certmagic.Storage {
			n++
			prefix := fmt.Sprintf("/certs%d", n)
			return func() certmagic.Storage {
				s := open(t, srv.Endpoint(), prefix) // a gateway node: its own client
				c := s.CertStorage(etcd.CertOptions{LockTTL: time.Second})
				t.Cleanup(func() {
					mu.Lock()
					defer mu.Unlock()
					if stores[c] != nil { // not crashed
						c.Close()
					}
				})
				mu.Lock()
				stores[c] = s
				mu.Unlock()
				return c
			}
		},
		// The node dies: its client goes away without revoking its
		// lease, which etcd ends after its TTL (its minimum, 2 s).
		Crash: func(t *testing.T, c certmagic.Storage, name string) {
			mu.Lock()
			s := stores[c]
			delete(stores, c)
			mu.Unlock()
			s.Close()
		},
		UnlockChecksHolder: true,
	})
}
