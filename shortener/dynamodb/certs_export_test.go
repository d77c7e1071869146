//go:build !functiononly

package dynamodb

// Crash makes c forget the lock name without releasing it, and stop
// renewing its lease, as an instance that died would.
func (c *CertStorage) Crash(name string) {
	c.mu.Lock()
	h := c.held[name]
	delete(c.held, name)
	c.mu.Unlock()
	if h != nil {
		close(h.stop)
	}
}
