package pebbletest

import (
	"crypto"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ocsp"
)

// OCSPValidity is the span of the OCSP responder's answers (Options.OCSP):
// short, so that a client refreshes its staple within seconds.
const OCSPValidity = 2 * time.Second

// ocspResponder answers OCSP requests for pebble's certificates from
// pebble's own revocation state (its management API's
// /cert-status-by-serial/), signed by pebble's intermediate — pebble
// revokes through ACME but runs no OCSP responder (its config only names
// one to put in certificates).
type ocspResponder struct {
	ca  *CA
	srv *httptest.Server

	mu     sync.Mutex
	issuer *x509.Certificate
	key    crypto.Signer
}

func startOCSP(c *CA) *ocspResponder {
	o := &ocspResponder{ca: c}
	o.srv = httptest.NewServer(o)
	return o
}

// ServeHTTP answers an OCSP request, POSTed or in a GET's path (RFC 6960,
// appendix A.1).
func (o *ocspResponder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var der []byte
	var err error
	switch r.Method {
	case http.MethodPost:
		der, err = io.ReadAll(io.LimitReader(r.Body, 1<<16))
	case http.MethodGet:
		der, err = base64.StdEncoding.DecodeString(strings.TrimPrefix(r.URL.Path, "/"))
	default:
		http.Error(w, "GET or POST", http.StatusMethodNotAllowed)
		return
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req, err := ocsp.ParseRequest(der)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	resp, err := o.answer(req.SerialNumber)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/ocsp-response")
	w.Write(resp)
}

// answer is the signed OCSP response for serial, as pebble knows it.
func (o *ocspResponder) answer(serial *big.Int) ([]byte, error) {
	issuer, key, err := o.signer()
	if err != nil {
		return nil, err
	}
	resp, err := o.ca.client.Get(o.ca.mgmt + "/cert-status-by-serial/" + serial.Text(16))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	now := time.Now().Truncate(time.Second)
	tmpl := ocsp.Response{SerialNumber: serial, ThisUpdate: now, NextUpdate: now.Add(OCSPValidity), Status: ocsp.Unknown}
	if resp.StatusCode == http.StatusOK {
		var st struct {
			Status    string
			Reason    *int
			RevokedAt string
		}
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			return nil, fmt.Errorf("pebble /cert-status-by-serial: %w", err)
		}
		switch st.Status {
		case "Valid":
			tmpl.Status = ocsp.Good
		case "Revoked":
			tmpl.Status, tmpl.RevokedAt = ocsp.Revoked, now.Add(-time.Second)
			if st.Reason != nil {
				tmpl.RevocationReason = *st.Reason
			}
		}
	}
	return ocsp.CreateResponse(issuer, issuer, tmpl, key)
}

// signer fetches pebble's intermediate and its key (once).
func (o *ocspResponder) signer() (*x509.Certificate, crypto.Signer, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.key != nil {
		return o.issuer, o.key, nil
	}
	certPEM, err := o.get("/intermediates/0")
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err := o.get("/intermediate-keys/0")
	if err != nil {
		return nil, nil, err
	}
	cb, _ := pem.Decode(certPEM)
	if cb == nil {
		return nil, nil, errors.New("pebble's intermediate: no PEM")
	}
	issuer, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	signer, err := ParseKey(keyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("pebble's intermediate key: %w", err)
	}
	o.issuer, o.key = issuer, signer
	return issuer, signer, nil
}

func (o *ocspResponder) get(path string) ([]byte, error) {
	resp, err := o.ca.client.Get(o.ca.mgmt + path)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("pebble %s: %s", path, resp.Status)
	}
	return b, err
}

// ParseKey reads a PEM private key as pebble and certmagic write them
// (PKCS #8, SEC 1 EC or PKCS #1).
func ParseKey(b []byte) (crypto.Signer, error) {
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, errors.New("no PEM block")
	}
	for _, parse := range []func([]byte) (any, error){
		x509.ParsePKCS8PrivateKey,
		func(d []byte) (any, error) { return x509.ParseECPrivateKey(d) },
		func(d []byte) (any, error) { return x509.ParsePKCS1PrivateKey(d) },
	} {
		if k, err := parse(blk.Bytes); err == nil {
			if s, ok := k.(crypto.Signer); ok {
				return s, nil
			}
		}
	}
	return nil, fmt.Errorf("a %s that parses as no private key", blk.Type)
}
