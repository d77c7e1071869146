// Package headerform tells APISIX 3.x's form of proxy-rewrite's and
// response-rewrite's headers ({add, set, remove}) from 2.14's.
package headerform

// IsNew is APISIX's is_new_headers_conf: add, set or remove is a table.
func IsNew(headers map[string]any) bool {
	for _, k := range []string{"add", "set", "remove"} {
		switch headers[k].(type) {
		case map[string]any, []any:
			return true
		}
	}
	return false
}
