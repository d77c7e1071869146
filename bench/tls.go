package bench

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"
)

// HTTPS. crypto/tls cannot run a handshake on a non-blocking socket: its
// handshake state is lost at the first read that would block. So each
// connection's TCP connect and TLS handshake run in a goroutine of their
// own, over Go's net package; once the handshake is done the socket is
// handed to the worker's epoll loop, and records are encrypted and
// decrypted there, by the same tls.Conn, through tlsIO: an in-memory
// transport that holds the ciphertext read from the socket and collects the
// ciphertext to write.

// tlsIO is the net.Conn under a connection's tls.Conn. During the
// handshake it is the blocking Go connection; after it, Read serves the
// ciphertext the worker read from the socket (errWouldBlock when none is
// left) and Write appends to out, which the worker writes to the socket.
type tlsIO struct {
	nc   net.Conn // the handshake's connection, nil afterwards
	in   []byte   // ciphertext received and not yet consumed
	out  []byte   // ciphertext to send
	sent int      // of out, already written to the socket
}

// errWouldBlock is what tlsIO.Read returns when it has no more bytes: a
// temporary net.Error, which tls.Conn passes up without failing the
// connection, keeping any partial record for the next read.
var errWouldBlock error = wouldBlock{}

type wouldBlock struct{}

func (wouldBlock) Error() string   { return "bench: no more ciphertext buffered" }
func (wouldBlock) Timeout() bool   { return true }
func (wouldBlock) Temporary() bool { return true }

func (t *tlsIO) Read(b []byte) (int, error) {
	if t.nc != nil {
		return t.nc.Read(b)
	}
	if len(t.in) == 0 {
		return 0, errWouldBlock
	}
	n := copy(b, t.in[:recordEnd(t.in)])
	t.in = t.in[n:]
	return n, nil
}

// recordEnd is where the first TLS record in b ends (all of b if it is not
// complete). tlsIO hands tls.Conn one record per Read, so that after a
// record is decrypted nothing of the next one waits inside tls.Conn: the
// worker can tell from tlsIO alone whether another Read has anything to
// decrypt, and does not make one that would only find nothing (each Read
// that reaches the transport costs crypto/tls an allocation).
func recordEnd(b []byte) int {
	if len(b) < 5 {
		return len(b)
	}
	return min(len(b), 5+(int(b[3])<<8|int(b[4])))
}

func (t *tlsIO) Write(b []byte) (int, error) {
	if t.nc != nil {
		return t.nc.Write(b)
	}
	t.out = append(t.out, b...)
	return len(b), nil
}

func (t *tlsIO) Close() error {
	if t.nc != nil {
		return t.nc.Close()
	}
	return nil
}

func (t *tlsIO) LocalAddr() net.Addr {
	if t.nc != nil {
		return t.nc.LocalAddr()
	}
	return &net.TCPAddr{}
}

func (t *tlsIO) RemoteAddr() net.Addr {
	if t.nc != nil {
		return t.nc.RemoteAddr()
	}
	return &net.TCPAddr{}
}

func (t *tlsIO) SetDeadline(d time.Time) error {
	if t.nc != nil {
		return t.nc.SetDeadline(d)
	}
	return nil
}

func (t *tlsIO) SetReadDeadline(d time.Time) error {
	if t.nc != nil {
		return t.nc.SetReadDeadline(d)
	}
	return nil
}

func (t *tlsIO) SetWriteDeadline(d time.Time) error {
	if t.nc != nil {
		return t.nc.SetWriteDeadline(d)
	}
	return nil
}

var _ net.Conn = (*tlsIO)(nil)

// TLSOptions are the command line's TLS settings.
type TLSOptions struct {
	ServerName string // SNI and the name verified; default: the URL's host
	Insecure   bool   // do not verify the server's certificate
	CAFile     string // PEM roots to verify against instead of the system's
	CertFile   string // client certificate (PEM), with KeyFile
	KeyFile    string
	NextProtos []string // ALPN; default http/1.1
}

// DefaultCurves are the key exchanges offered: X25519 and P-256, as
// OpenSSL 3.0 clients (wrk, h2load) offer. Go's default adds the hybrid
// X25519MLKEM768, whose key share costs the client about as much again as
// the rest of a resumed handshake, and which servers on OpenSSL 3.0 (Debian
// 12's nginx) do not pick anyway.
var DefaultCurves = []tls.CurveID{tls.X25519, tls.CurveP256}

// NewTLSConfig builds the client configuration for o: verification as
// asked, a client certificate if given, and a session cache so that
// reconnects resume with a ticket instead of a full handshake.
func NewTLSConfig(o TLSOptions) (*tls.Config, error) {
	c := &tls.Config{
		ServerName:         o.ServerName,
		InsecureSkipVerify: o.Insecure, // --insecure asks for it
		NextProtos:         o.NextProtos,
		MinVersion:         tls.VersionTLS12,
		ClientSessionCache: tls.NewLRUClientSessionCache(64),
		CurvePreferences:   DefaultCurves,
	}
	if c.NextProtos == nil {
		c.NextProtos = []string{"http/1.1"}
	}
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("--ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca %s: no PEM certificate in it", o.CAFile)
		}
		c.RootCAs = pool
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		return nil, errors.New("--cert and --key go together")
	}
	if o.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// tlsConfig is the run's TLS configuration, completed with defaults: the
// URL's host as server name, ALPN http/1.1 and a session cache.
func (c *Config) tlsConfig() *tls.Config {
	var t *tls.Config
	if c.TLS != nil {
		t = c.TLS.Clone()
	} else {
		t = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if t.ServerName == "" {
		t.ServerName = c.URL.Hostname()
	}
	if len(t.NextProtos) == 0 {
		t.NextProtos = []string{"http/1.1"}
	}
	if t.ClientSessionCache == nil {
		t.ClientSessionCache = tls.NewLRUClientSessionCache(64)
	}
	return t
}

// isCertError reports whether err is the server's certificate failing
// verification rather than the handshake failing otherwise.
func isCertError(err error) bool {
	var (
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
	)
	switch remoteAlert(err) {
	case "bad certificate", "unsupported certificate", "revoked certificate", "expired certificate",
		"unknown certificate", "unknown certificate authority", "certificate required":
		return true // the server rejected our (client) certificate
	}
	return errors.As(err, &verify) || errors.As(err, &unknown) || errors.As(err, &hostname) || errors.As(err, &invalid)
}

// remoteAlert is the text of a TLS alert the peer sent ("" if err is not
// one): crypto/tls reports them as a net.OpError "remote error".
func remoteAlert(err error) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "remote error" && op.Err != nil {
		return strings.TrimPrefix(op.Err.Error(), "tls: ")
	}
	return ""
}

// handshake dials addr and runs the TLS handshake within timeout. On
// success the tls.Conn's transport is still the Go connection.
func handshake(ctx context.Context, addr string, cfg *tls.Config, timeout time.Duration) (*tls.Conn, *tlsIO, time.Duration, error) {
	d := net.Dialer{Timeout: timeout}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, nil, 0, &connectError{err}
	}
	start := time.Now()
	_ = nc.SetDeadline(start.Add(timeout))
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Unix(1, 0)) })
	io := &tlsIO{nc: nc}
	tc := tls.Client(io, cfg)
	err = tc.Handshake()
	stop()
	if err != nil {
		nc.Close()
		return nil, nil, 0, err
	}
	_ = nc.SetDeadline(time.Time{})
	return tc, io, time.Since(start), nil
}

// connectError is a handshake that failed before TLS started.
type connectError struct{ err error }

func (e *connectError) Error() string { return e.err.Error() }
func (e *connectError) Unwrap() error { return e.err }

// probeWait is how long the probe waits for an alert after its handshake.
const probeWait = 100 * time.Millisecond

// probeTLS makes one connection before the run so that a certificate that
// does not verify is a clear error, not a run of handshake failures. It
// returns the version and protocol negotiated.
func probeTLS(ctx context.Context, addr string, cfg *tls.Config, timeout time.Duration) (*TLSResult, error) {
	probe := cfg.Clone()
	probe.ClientSessionCache = nil // the run's first handshakes stay full ones
	tc, tio, _, err := handshake(ctx, addr, probe, timeout)
	if err != nil {
		var ce *connectError
		switch {
		case errors.As(err, &ce):
			return nil, fmt.Errorf("connect %s: %w", addr, ce.err)
		case isCertError(err):
			return nil, fmt.Errorf("TLS with %s (server name %q): %w (--insecure skips verification; --ca FILE trusts another CA)", addr, probe.ServerName, err)
		}
		if remoteAlert(err) == "no application protocol" {
			return nil, fmt.Errorf("TLS handshake with %s: the server speaks none of the protocols offered by ALPN %v: %w", addr, probe.NextProtos, err)
		}
		return nil, fmt.Errorf("TLS handshake with %s: %w", addr, err)
	}
	// A TLS 1.3 server checks the client's certificate after the client
	// has finished its handshake, and says so in an alert: wait briefly for
	// one.
	_ = tio.nc.SetReadDeadline(time.Now().Add(probeWait))
	if _, err := tc.Read(make([]byte, 1)); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) && !errors.Is(err, io.EOF) {
		_ = tio.Close()
		if isCertError(err) {
			return nil, fmt.Errorf("TLS with %s: the server refused the client certificate: %w (--cert and --key give one)", addr, err)
		}
		return nil, fmt.Errorf("TLS with %s: %w", addr, err)
	}
	st := tc.ConnectionState()
	_ = tc.Close()
	_ = tio.Close()
	return &TLSResult{Version: tls.VersionName(st.Version), ALPN: st.NegotiatedProtocol}, nil
}
