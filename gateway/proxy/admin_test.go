package proxy_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/linkgate/linkgate/gateway/proxy"
)

// What the admin handler reads from a request and keeps (as the admin API
// keeps ids and bodies in the store and the live configuration) must stay
// what the client sent after the request ends and fasthttp reuses its
// buffers for the next request on the connection.
func TestAdminRequestOutlivesHandler(t *testing.T) {
	type kept struct{ method, path, id, query, key, body string }
	var mu sync.Mutex
	var got []kept
	mux := http.NewServeMux()
	mux.HandleFunc("/apisix/admin/routes/{id}", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, kept{r.Method, r.URL.Path, r.PathValue("id"), r.URL.RawQuery, r.Header.Get("X-API-KEY"), string(b)})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":%q}`, r.PathValue("id"))
	})
	w := startGatewayWith(t, proxy.Options{Admin: mux})
	var want []kept
	// One keep-alive connection, so every request reuses the same buffers.
	c := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
	for i, m := range []string{"PUT", "PATCH", "DELETE", "POST", "GET"} {
		id := fmt.Sprintf("%d", 1000+i*7)
		body := strings.Repeat(string(rune('a'+i)), 10+i)
		k := kept{m, "/apisix/admin/routes/" + id, id, "v=" + id, "key-" + id, body}
		want = append(want, k)
		req, _ := http.NewRequest(m, w.url+k.path+"?"+k.query, strings.NewReader(body))
		req.Header.Set("X-API-KEY", k.key)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 201 || string(b) != `{"id":"`+id+`"}` || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("%s: %d %s %q", m, resp.StatusCode, resp.Header, b)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("request %d as kept by the handler: %+v, sent %+v", i+1, got[i], want[i])
		}
	}
}
