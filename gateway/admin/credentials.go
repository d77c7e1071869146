package admin

import (
	"errors"
	"net/http"
	"strings"

	"github.com/linkgate/linkgate/gateway"
)

// credentials serves APISIX 3.x's /apisix/admin/consumers/{username}/credentials[/{id}]
// (apisix/admin/credentials.lua): GET (one, or the consumer's list), PUT
// and DELETE; a credential is stored among the consumers under
// gateway.CredentialKey, as APISIX keeps it in etcd. Under v2 too (with
// 2.14's envelopes): 2.14 has no such path, so nothing it does changes.
func (a *api) credentials(w http.ResponseWriter, r *http.Request, consumer, credID string) {
	ctx := r.Context()
	switch r.Method {
	case http.MethodGet:
		if credID != "" {
			a.get(w, r, gateway.KindConsumer, gateway.CredentialKey(consumer, credID))
			return
		}
		es, err := a.store.List(ctx, gateway.KindConsumer)
		if err != nil {
			a.storeErr(w, r, err)
			return
		}
		nodes := []node{}
		for _, e := range es {
			if c, _, ok := gateway.ParseCredentialKey(e.ID); ok && c == consumer {
				nodes = append(nodes, a.node(e, true))
			}
		}
		if len(nodes) == 0 { // etcd's readdir of a directory with no keys
			a.storeErr(w, r, gateway.ErrNotFound)
			return
		}
		a.writeList(w, r, a.key(gateway.KindConsumer, consumer+"/credentials"), nodes)
		return
	case http.MethodPut, http.MethodDelete:
	default:
		writeErr(w, http.StatusMethodNotAllowed, "not supported `"+r.Method+"` method for credential")
		return
	}
	if a.opts.ReadOnly != "" {
		writeErr(w, http.StatusMethodNotAllowed, a.opts.ReadOnly)
		return
	}
	if r.Method == http.MethodDelete {
		if credID == "" {
			writeErr(w, http.StatusBadRequest, "missing credential id")
			return
		}
		key := gateway.CredentialKey(consumer, credID)
		if err := a.store.Delete(ctx, gateway.KindConsumer, key); err != nil {
			a.storeErr(w, r, err)
			return
		}
		a.deleted(w, gateway.KindConsumer, key)
		return
	}
	req := &request{}
	if !a.readBody(w, r, req) {
		return
	}
	doc, ok := req.conf.(map[string]any)
	if !ok {
		writeErr(w, http.StatusBadRequest, "missing configurations")
		return
	}
	spec := resource{kind: gateway.KindConsumer}
	spec.missingID, spec.wrongID, spec.noNeed = idWords("credential")
	id, err := resolveID(spec, doc, credID, true)
	if err != nil {
		writeErr(w, http.StatusBadRequest, err.Error())
		return
	}
	if a.timesForbidden(w, doc) {
		return
	}
	if err := gateway.CheckCredential(deepCopy(doc).(map[string]any), a.reg); err != nil {
		a.validationErr(w, err)
		return
	}
	if msg, err := a.duplicateKey(ctx, doc, consumer, id); err != nil {
		a.storeErr(w, r, err)
		return
	} else if msg != "" {
		writeErr(w, http.StatusBadRequest, msg)
		return
	}
	if _, err := a.store.Get(ctx, gateway.KindConsumer, consumer); errors.Is(err, gateway.ErrNotFound) {
		writeErr(w, http.StatusNotFound, "consumer not found")
		return
	} else if err != nil {
		a.storeErr(w, r, err)
		return
	}
	a.set(w, r, gateway.KindConsumer, gateway.CredentialKey(consumer, id), doc)
}

// credentialPath splits the sub-path of /apisix/admin/consumers/{name}/SUB:
// ok when SUB is "credentials" or "credentials/{id}".
func credentialPath(sub string) (id string, ok bool) {
	rest, ok := strings.CutPrefix(sub, "credentials")
	if !ok || (rest != "" && rest[0] != '/') {
		return "", false
	}
	return strings.TrimPrefix(rest, "/"), true
}
