package bench_test

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/linkgate/linkgate/internal/testdep"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv("BENCH_TEST_TLS_TARGET"); dir != "" {
		serveTLSTarget(dir)
		return
	}
	testdep.SpareProcs(8) // the in-test targets share the generator's process
	os.Exit(m.Run())
}

// tlsTargetProcess starts this test binary as an HTTPS target in a process
// of its own (so that what it allocates is not counted as the generator's):
// keep-alive, every request answered with a fixed 200.
func tlsTargetProcess(t testing.TB, p *testPKI) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "BENCH_TEST_TLS_TARGET="+p.dir)
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); _ = cmd.Wait() })
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("TLS target: %v", err)
	}
	return "https://" + strings.TrimSpace(addr) + "/"
}

// serveTLSTarget is the target process: it prints its address and serves
// until its stdin closes.
func serveTLSTarget(dir string) {
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(ln.Addr())
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); os.Exit(0) }()
	resp := []byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func(c net.Conn) {
			defer c.Close()
			buf := make([]byte, 64<<10)
			var out []byte
			for {
				n, err := c.Read(buf)
				if err != nil {
					return
				}
				out = out[:0]
				for data := buf[:n]; ; {
					i := bytes.Index(data, []byte("\r\n\r\n"))
					if i < 0 {
						break
					}
					out = append(out, resp...)
					data = data[i+4:]
				}
				if _, err := c.Write(out); err != nil {
					return
				}
			}
		}(c)
	}
}
