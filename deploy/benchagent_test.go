package deploy

import (
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/linkgate/linkgate/internal/testdep"
)

// scalars returns every scalar under n, in order.
func scalars(n *yaml.Node) []string {
	if n == nil {
		return nil
	}
	if n.Kind == yaml.ScalarNode {
		return []string{n.Value}
	}
	var out []string
	for _, c := range n.Content {
		out = append(out, scalars(c)...)
	}
	return out
}

// The Lambda template's bench agent: its own function (the agent's zip,
// either architecture, up to Lambda's 15 minutes), whose role may write
// its own log group and nothing else — which is all it needs, since the
// agent function links no AWS API client (go list -deps); and the
// shortener's function, as make lambda builds it, links no load
// generator. Give the role any other action or resource, or import an
// AWS service client into the agent, and this goes red.
func TestLambdaBenchAgentLeastPrivilege(t *testing.T) {
	tpl := loadTemplate(t, "lambda/template.yaml")
	fn := mapping(tpl.resources["BenchAgentFunction"])
	props := mapping(fn["Properties"])
	if fn["Condition"].Value != "UseBenchAgent" || tpl.types["BenchAgentFunction"] != "AWS::Lambda::Function" {
		t.Fatalf("no BenchAgentFunction under the UseBenchAgent condition")
	}
	if code := strings.Join(scalars(props["Code"]), " "); !strings.Contains(code, "bench_agent_linux_${GoArch}.zip") {
		t.Errorf("the agent's code is %q, not make lambda's bench_agent zip", code)
	}
	if arch := scalars(props["Architectures"]); len(arch) != 1 || arch[0] != "Architecture" ||
		!slices.Equal(scalars(mapping(tpl.parameters["Architecture"])["AllowedValues"]), []string{"arm64", "x86_64"}) {
		t.Errorf("architectures %v: want the Architecture parameter, arm64 or x86_64", arch)
	}
	if props["Timeout"].Value != "900" || props["Handler"].Value != "bootstrap" || props["Runtime"].Value != "provided.al2023" {
		t.Errorf("timeout %s, handler %s, runtime %s", props["Timeout"].Value, props["Handler"].Value, props["Runtime"].Value)
	}
	for name, r := range tpl.resources {
		if strings.Contains(strings.Join(scalars(mapping(r)["Properties"]), " "), "BenchAgentFunction") && tpl.types[name] != "AWS::Lambda::Function" {
			t.Errorf("%s (%s) refers to the agent function: it has no URL or other entry point", name, tpl.types[name])
		}
	}

	role := mapping(mapping(tpl.resources["BenchAgentRole"])["Properties"])
	var actions, resources []string
	for _, p := range role["Policies"].Content {
		doc := mapping(mapping(p)["PolicyDocument"])
		for _, st := range doc["Statement"].Content {
			st := mapping(st)
			if st["Effect"].Value != "Allow" {
				continue
			}
			actions = append(actions, scalars(st["Action"])...)
			resources = append(resources, strings.Join(scalars(st["Resource"]), " "))
		}
	}
	if !slices.Equal(actions, []string{"logs:CreateLogStream", "logs:PutLogEvents"}) || !slices.Equal(resources, []string{"BenchAgentLogs.Arn"}) {
		t.Errorf("the agent's role allows %v on %v: want its log writes on its log group only", actions, resources)
	}
	if m := scalars(role["ManagedPolicyArns"]); len(m) > 0 {
		t.Errorf("managed policies %v on the agent's role", m)
	}

	for _, d := range testdep.NonStandardImports(t, "github.com/linkgate/linkgate/cmd/linkgate-bench-agent") {
		if strings.HasPrefix(d, "github.com/aws/aws-sdk-go-v2/") {
			t.Errorf("the agent function links %s: its role allows no AWS call", d)
		}
	}
	out := testdep.NonStandardImportsTags(t, "github.com/linkgate/linkgate/cmd/linkgate", "lambda.norpc,nopebble,functiononly")
	for _, d := range out {
		if strings.HasPrefix(d, "github.com/linkgate/linkgate/bench") {
			t.Errorf("the shortener's function links %s", d)
		}
	}
}
