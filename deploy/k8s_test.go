package deploy

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// strictDecode reads one manifest document into v, the Kubernetes API's
// own Go type for its kind (k8s.io/api, from which the API's OpenAPI
// schema is generated): an unknown field, a field of the wrong type or a
// misspelt enum-typed value is an error, as kubectl apply --validate=strict
// makes it.
func strictDecode(t *testing.T, doc []byte, v any) {
	t.Helper()
	j, err := yaml.YAMLToJSON(doc)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("not a valid %T: %v", v, err)
	}
}

// The Kubernetes agents' manifest: a headless Service and an Indexed Job
// whose pods it selects, valid against the API's types; the token from a
// Secret, never in the manifest; hardened pods. Then the pod's own command
// runs as a process (its port moved to one free on loopback) and a
// coordinator reaches it through --agents k8s:HOST:PORT, as it reaches the
// pods through the Service's name.
func TestK8sBenchAgentManifest(t *testing.T) {
	data, err := os.ReadFile("k8s/bench-agent.yaml")
	if err != nil {
		t.Fatal(err)
	}
	docs := bytes.Split(data, []byte("\n---\n"))
	if len(docs) != 2 {
		t.Fatalf("%d documents, want the Service and the Job", len(docs))
	}
	var svc corev1.Service
	var job batchv1.Job
	strictDecode(t, docs[0], &svc)
	strictDecode(t, docs[1], &job)
	if svc.APIVersion != "v1" || svc.Kind != "Service" || job.APIVersion != "batch/v1" || job.Kind != "Job" {
		t.Fatalf("kinds %s %s, %s %s", svc.APIVersion, svc.Kind, job.APIVersion, job.Kind)
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("the Service's clusterIP is %q: want None (headless, one address per pod)", svc.Spec.ClusterIP)
	}
	spec, pod := job.Spec, job.Spec.Template.Spec
	if spec.CompletionMode == nil || *spec.CompletionMode != batchv1.IndexedCompletion || spec.Completions == nil ||
		spec.Parallelism == nil || *spec.Completions != *spec.Parallelism {
		t.Errorf("the Job is not Indexed with every agent running at once")
	}
	for k, v := range svc.Spec.Selector {
		if job.Spec.Template.Labels[k] != v {
			t.Errorf("the Service selects %s=%s, which the Job's pods do not carry", k, v)
		}
	}
	if pod.Subdomain != svc.Name || pod.RestartPolicy != corev1.RestartPolicyNever || pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Errorf("pod: subdomain %q, restart %q, service account token mounted", pod.Subdomain, pod.RestartPolicy)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers", len(pod.Containers))
	}
	c := pod.Containers[0]
	if len(svc.Spec.Ports) != 1 || len(c.Ports) != 1 || svc.Spec.Ports[0].TargetPort.String() != c.Ports[0].Name || c.Ports[0].ContainerPort != 7070 {
		t.Errorf("the Service's target port %v is not the container's %v", svc.Spec.Ports, c.Ports)
	}
	if len(c.Env) != 1 || c.Env[0].Name != "LINKGATE_TOKEN" || c.Env[0].ValueFrom == nil || c.Env[0].ValueFrom.SecretKeyRef == nil {
		t.Errorf("the token does not come from a Secret: %+v", c.Env)
	}
	sc := c.SecurityContext
	if pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot || sc == nil ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Error("the agent's pod is not hardened: non-root, read-only root, no privilege escalation, no capabilities")
	}
	if c.Resources.Limits.Cpu().Cmp(*c.Resources.Requests.Cpu()) != 0 {
		t.Errorf("CPU limit %v and request %v differ: an agent must have its cores", c.Resources.Limits.Cpu(), c.Resources.Requests.Cpu())
	}

	// The pod's command, on loopback.
	args := slices.Clone(c.Args)
	i := slices.Index(args, "--listen")
	if i < 0 || args[i+1] != ":7070" || args[0] != "bench" || args[1] != "agent" {
		t.Fatalf("container args %q: want bench agent --listen :7070", args)
	}
	args[i+1] = "127.0.0.1:0"
	const token = "k8s-manifest-test-token-0123456789"
	bin := linkgate(t)
	p := startEnv(t, []string{"LINKGATE_TOKEN=" + token}, bin, args...)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(target.Close)
	cmd := exec.Command(bin, "bench", "-t1", "-c2", "-R40", "-d1s", "--agents", "k8s:"+strings.TrimPrefix(p.url, "http://"), target.URL+"/")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "LINKGATE_AGENTS_TOKEN=" + token}
	out, err := cmd.CombinedOutput()
	if !strings.Contains(string(out), "40 requests in") || !strings.Contains(string(out), "Agents:") ||
		(err != nil && !strings.Contains(string(out), "lagged its schedule")) {
		t.Errorf("the coordinator through k8s:HOST:PORT: %v\n%s\nagent:\n%s", err, out, p.logs.String())
	}
}
