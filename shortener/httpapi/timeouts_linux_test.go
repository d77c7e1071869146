package httpapi_test

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/linkgate/linkgate/shortener/httpapi"
)

// Issue 26 §3: every timeout closes the connection within its limit plus
// one second, also for clients that never read, so that nothing is owed
// to them anymore: pipelined requests for large answers (the issue's
// 1,500 requests for /static/app.js, dropped after 6 s with a 3 s write
// timeout: the lingering close waited 3 s more for a client that does not
// read), a slowloris, an idle connection. The client sees the connection
// end in its socket's state (TCP_INFO: a FIN or a reset arrived), which
// it can without reading.
func TestTimeoutsKeptForClientsThatNeverRead(t *testing.T) {
	t.Parallel()
	const limit = time.Second
	h, _ := newHandler(t, setup{cfg: httpapi.Config{UI: true}})
	addr := serve(t, h, httpapi.ServerConfig{ReadTimeout: limit, WriteTimeout: limit, IdleTimeout: limit})
	for _, tt := range []struct {
		name string
		send func(c *net.TCPConn)
	}{
		{"write, pipelined large answers", func(c *net.TCPConn) {
			io.WriteString(c, strings.Repeat("GET /static/app.js HTTP/1.1\r\nHost: x\r\n\r\n", 1500))
		}},
		{"read, slowloris", func(c *net.TCPConn) {
			io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n")
			go func() {
				for range 100 {
					if _, err := c.Write([]byte("X")); err != nil {
						return
					}
					time.Sleep(50 * time.Millisecond) // deliberate: a slowloris's pace
				}
			}()
		}},
		{"idle", func(c *net.TCPConn) { io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n") }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := dial(t, addr).(*net.TCPConn)
			c.SetReadBuffer(4 << 10)
			start := time.Now()
			tt.send(c)
			raw, err := c.SyscallConn()
			if err != nil {
				t.Fatal(err)
			}
			for {
				var state uint8
				raw.Control(func(fd uintptr) {
					if info, err := unix.GetsockoptTCPInfo(int(fd), unix.SOL_TCP, unix.TCP_INFO); err == nil {
						state = info.State
					}
				})
				if state != unix.BPF_TCP_ESTABLISHED {
					d := time.Since(start)
					if d > limit+time.Second {
						t.Errorf("closed %v after the client began, want within %v", d.Round(time.Millisecond), limit+time.Second)
					}
					if d < limit {
						t.Errorf("closed %v after the client began, before the timeout %v", d.Round(time.Millisecond), limit)
					}
					t.Logf("closed after %v (TCP state %d)", d.Round(time.Millisecond), state)
					return
				}
				if time.Since(start) > limit+10*time.Second {
					t.Fatalf("still open %v after the client began", time.Since(start).Round(time.Millisecond))
				}
				time.Sleep(10 * time.Millisecond) // polls the socket's TCP state: no event says when the server closed it
			}
		})
	}
}
