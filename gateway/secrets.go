package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Secrets resolves a reference written in a plugin configuration
// (APISIX 3.x's "$env://NAME" or "$secret://manager/id/key") to its value;
// ok is false when it has none.
type Secrets interface {
	Resolve(ref string) (value any, ok bool, err error)
}

// ErrSecretUnresolved is a reference that has no value: the resource
// using it is not served (APISIX would use the reference itself as the
// value, a password anyone who reads the configuration knows).
var ErrSecretUnresolved = errors.New("secret reference not resolved")

const (
	envPrefix    = "$ENV://" // matched case-insensitively, as APISIX's core.env
	secretPrefix = "$secret://"
)

// IsSecretRef reports whether s is a reference Secrets resolves.
func IsSecretRef(s string) bool {
	return strings.HasPrefix(s, secretPrefix) ||
		(len(s) >= len(envPrefix) && strings.EqualFold(s[:len(envPrefix)], envPrefix))
}

// EnvSecrets is APISIX's env secret manager over getenv: "$env://NAME" is
// NAME's value, "$env://NAME/KEY" the field KEY of NAME's JSON object.
// "$secret://" references (vault, AWS, GCP managers) have no value here.
type EnvSecrets func(string) string

var _ Secrets = EnvSecrets(nil)

// Resolve implements Secrets.
func (getenv EnvSecrets) Resolve(ref string) (any, bool, error) {
	if strings.HasPrefix(ref, secretPrefix) {
		return nil, false, fmt.Errorf("%w: %s (secret managers are not supported; use $env://)", ErrSecretUnresolved, ref)
	}
	name, sub, _ := strings.Cut(ref[len(envPrefix):], "/")
	v := getenv(name)
	if v == "" {
		return nil, false, fmt.Errorf("%w: %s (%s is not set)", ErrSecretUnresolved, ref, name)
	}
	if sub == "" {
		return v, true, nil
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(v), &m); err != nil {
		return nil, false, fmt.Errorf("%w: %s (%s is not a JSON object: %v)", ErrSecretUnresolved, ref, name, err)
	}
	x, ok := m[sub]
	if !ok {
		return nil, false, fmt.Errorf("%w: %s (%s has no %q)", ErrSecretUnresolved, ref, name, sub)
	}
	return x, true, nil
}

// resolveSecrets returns conf with every string that is a reference
// replaced by its value (APISIX's fetch_secrets, at build time).
func resolveSecrets(conf []byte, s Secrets) ([]byte, error) {
	if !bytes.Contains(conf, []byte("$")) {
		return conf, nil
	}
	v, err := DecodeJSON(conf)
	if err != nil {
		return conf, nil // f.New reports it
	}
	changed := false
	var walk func(any) (any, error)
	walk = func(x any) (any, error) {
		switch t := x.(type) {
		case string:
			if !IsSecretRef(t) {
				return t, nil
			}
			val, ok, err := s.Resolve(t)
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, fmt.Errorf("%w: %s", ErrSecretUnresolved, t)
			}
			changed = true
			return val, nil
		case map[string]any:
			for k, e := range t {
				r, err := walk(e)
				if err != nil {
					return nil, err
				}
				t[k] = r
			}
		case []any:
			for i, e := range t {
				r, err := walk(e)
				if err != nil {
					return nil, err
				}
				t[i] = r
			}
		}
		return x, nil
	}
	v, err = walk(v)
	if err != nil || !changed {
		return conf, err
	}
	return json.Marshal(v)
}
