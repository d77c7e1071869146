package gateway

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
)

// Unmarshal decodes data into v as encoding/json does, except that an
// object key fills a tagged struct field only when it is spelled exactly as
// the field's tag.
//
// encoding/json also gives a field a key that only case-folds to its name
// ("mAtCh" for "match", or "\u212a" for "k"). APISIX's Lua decoder does
// not, and neither do the schemas, which see such a key as an unknown
// property: a configuration would pass the checks as one thing and build
// as another (traffic-split's FuzzConf found {"mAtCh":…} passing the check
// of "match" and then failing to build). So Unmarshal drops such keys
// before decoding, as unknown keys are dropped. Fields without a json tag
// keep encoding/json's matching. Every configuration decoded into a typed
// resource or a plugin's settings goes through here.
func Unmarshal(data []byte, v any) error {
	doc, err := DecodeJSON(data)
	if err != nil || !dropFolded(doc, reflect.TypeOf(v)) {
		return json.Unmarshal(data, v) // as it was, or with its own error
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// dropFolded deletes from doc, decoded JSON headed for a value of type t,
// every object key that would fill a tagged field it does not spell
// exactly. It reports whether it deleted any.
func dropFolded(doc any, t reflect.Type) bool {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return false
	}
	dropped := false
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := doc.(map[string]any)
		if !ok {
			return false
		}
		fs := fieldsOf(t)
		for k, val := range obj {
			if f, ok := fs.exact[k]; ok {
				dropped = dropFolded(val, f) || dropped
				continue
			}
			if f, ok := fs.untagged(k); ok {
				dropped = dropFolded(val, f) || dropped
				continue
			}
			if fs.folds(k) {
				delete(obj, k)
				dropped = true
			}
		}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return false // []byte and json.RawMessage
		}
		arr, _ := doc.([]any)
		for _, e := range arr {
			dropped = dropFolded(e, t.Elem()) || dropped
		}
	case reflect.Map:
		obj, _ := doc.(map[string]any)
		for _, val := range obj {
			dropped = dropFolded(val, t.Elem()) || dropped
		}
	}
	return dropped
}

// jsonFields are the JSON names of a struct's fields, embedded structs'
// included (the outer name wins, as in encoding/json).
type jsonFields struct {
	exact map[string]reflect.Type // tagged fields, by tag
	loose map[string]reflect.Type // untagged fields, by Go name
}

func (fs *jsonFields) untagged(k string) (reflect.Type, bool) {
	for name, t := range fs.loose {
		if strings.EqualFold(k, name) {
			return t, true
		}
	}
	return nil, false
}

func (fs *jsonFields) folds(k string) bool {
	for tag := range fs.exact {
		if strings.EqualFold(k, tag) {
			return true
		}
	}
	return false
}

var fieldCache sync.Map // reflect.Type → *jsonFields

func fieldsOf(t reflect.Type) *jsonFields {
	if fs, ok := fieldCache.Load(t); ok {
		return fs.(*jsonFields)
	}
	fs := &jsonFields{exact: map[string]reflect.Type{}, loose: map[string]reflect.Type{}}
	collectFields(t, fs)
	fieldCache.Store(t, fs)
	return fs
}

func collectFields(t reflect.Type, fs *jsonFields) {
	var embedded []reflect.Type
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			embedded = append(embedded, ft)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			if _, ok := fs.loose[f.Name]; !ok {
				fs.loose[f.Name] = f.Type
			}
			continue
		}
		if _, ok := fs.exact[name]; !ok {
			fs.exact[name] = f.Type
		}
	}
	for _, e := range embedded {
		collectFields(e, fs)
	}
}

// StringKeys turns what a YAML decoder made into what encoding/json
// encodes as APISIX would read it: mappings with non-string keys (a node
// list keyed 127.0.0.1:80 is a string; a port-like 80 is not) get string
// keys. Maps and slices are changed in place.
func StringKeys(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = StringKeys(e)
		}
		return v
	case map[any]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[fmt.Sprint(k)] = StringKeys(e)
		}
		return m
	case []any:
		for i, e := range v {
			v[i] = StringKeys(e)
		}
		return v
	}
	return v
}
