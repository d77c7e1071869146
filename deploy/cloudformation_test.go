package deploy

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

var templates = []string{"lambda/template.yaml", "ecs/linkgate.yaml"}

// pseudoParameters are the names CloudFormation defines for !Ref.
var pseudoParameters = []string{"AWS::AccountId", "AWS::NotificationARNs", "AWS::NoValue", "AWS::Partition",
	"AWS::Region", "AWS::StackId", "AWS::StackName", "AWS::URLSuffix"}

// attributes are the !GetAtt attributes of the resource types the
// templates use (from CloudFormation's resource reference); a type not
// listed fails the test, so that a new one is looked up.
var attributes = map[string][]string{
	"AWS::DynamoDB::Table":                      {"Arn", "StreamArn"},
	"AWS::IAM::Role":                            {"Arn", "RoleId"},
	"AWS::Lambda::Function":                     {"Arn"},
	"AWS::Lambda::Url":                          {"FunctionArn", "FunctionUrl"},
	"AWS::Lambda::LayerVersion":                 {"LayerVersionArn"},
	"AWS::Logs::LogGroup":                       {"Arn"},
	"AWS::ECS::Cluster":                         {"Arn"},
	"AWS::ECS::Service":                         {"Name", "ServiceArn"},
	"AWS::ECS::TaskDefinition":                  {"TaskDefinitionArn"},
	"AWS::EC2::SecurityGroup":                   {"GroupId", "VpcId"},
	"AWS::ElasticLoadBalancingV2::LoadBalancer": {"DNSName", "CanonicalHostedZoneID", "LoadBalancerArn", "LoadBalancerFullName", "LoadBalancerName", "SecurityGroups"},
	"AWS::ElasticLoadBalancingV2::TargetGroup":  {"TargetGroupArn", "TargetGroupFullName", "TargetGroupName", "LoadBalancerArns"},
	"AWS::ElasticLoadBalancingV2::Listener":     {"ListenerArn"},
	"AWS::SecretsManager::Secret":               {"Id"},
	"AWS::Lambda::Permission":                   {},
	"AWS::CloudFormation::WaitConditionHandle":  {},
}

// cfnTemplate is a template's top-level sections, kept as YAML nodes so
// that short-form tags (!Ref, !GetAtt, !Sub, !If…) stay visible.
type cfnTemplate struct {
	file                                                 string
	parameters, mappings, conditions, resources, outputs map[string]*yaml.Node
	types                                                map[string]string // resource → type
}

func loadTemplate(t *testing.T, file string) *cfnTemplate {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	tpl := &cfnTemplate{file: file, types: map[string]string{}}
	top := doc.Content[0]
	for i := 0; i+1 < len(top.Content); i += 2 {
		section := mapping(top.Content[i+1])
		switch top.Content[i].Value {
		case "Parameters":
			tpl.parameters = section
		case "Mappings":
			tpl.mappings = section
		case "Conditions":
			tpl.conditions = section
		case "Resources":
			tpl.resources = section
		case "Outputs":
			tpl.outputs = section
		case "AWSTemplateFormatVersion", "Description", "Transform", "Metadata":
		default:
			t.Errorf("%s: unknown section %s", file, top.Content[i].Value)
		}
	}
	for name, r := range tpl.resources {
		tpl.types[name] = mapping(r)["Type"].Value
	}
	return tpl
}

// mapping returns a mapping node's entries by key.
func mapping(n *yaml.Node) map[string]*yaml.Node {
	out := map[string]*yaml.Node{}
	if n == nil || n.Kind != yaml.MappingNode {
		return out
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		out[n.Content[i].Value] = n.Content[i+1]
	}
	return out
}

var subVarRE = regexp.MustCompile(`\$\{([^}!][^}]*)\}`)

// checker walks a template and collects what does not resolve.
type checker struct {
	tpl  *cfnTemplate
	used map[string]bool // parameters referenced
	errs []string
}

func (c *checker) errorf(n *yaml.Node, format string, args ...any) {
	c.errs = append(c.errs, fmt.Sprintf("%s:%d: %s", c.tpl.file, n.Line, fmt.Sprintf(format, args...)))
}

// ref checks a !Ref target; vars are !Sub's own variables.
func (c *checker) ref(n *yaml.Node, name string, vars map[string]bool) {
	switch {
	case vars[name]:
	case c.tpl.parameters[name] != nil:
		c.used[name] = true
	case c.tpl.resources[name] != nil, slices.Contains(pseudoParameters, name):
	default:
		c.errorf(n, "!Ref %s: no such parameter or resource", name)
	}
}

func (c *checker) getAtt(n *yaml.Node, resource, attr string) {
	typ, ok := c.tpl.types[resource]
	if !ok {
		c.errorf(n, "!GetAtt %s.%s: no such resource", resource, attr)
		return
	}
	attrs, known := attributes[typ]
	if !known {
		c.errorf(n, "!GetAtt on %s: add its attributes to the test's table", typ)
	} else if !slices.Contains(attrs, attr) {
		c.errorf(n, "!GetAtt %s.%s: %s has no attribute %s", resource, attr, typ, attr)
	}
}

func (c *checker) condition(n *yaml.Node, name string) {
	if c.tpl.conditions[name] == nil {
		c.errorf(n, "condition %s is not defined", name)
	}
}

// walk checks every intrinsic function under n, in long or short form.
func (c *checker) walk(n *yaml.Node, vars map[string]bool) {
	if n == nil {
		return
	}
	fn, arg := intrinsic(n)
	switch fn {
	case "Ref":
		c.ref(n, arg.Value, vars)
		return
	case "Fn::GetAtt":
		var res, attr string
		if arg.Kind == yaml.ScalarNode {
			res, attr, _ = strings.Cut(arg.Value, ".")
		} else if len(arg.Content) == 2 {
			res, attr = arg.Content[0].Value, arg.Content[1].Value
		}
		c.getAtt(n, res, attr)
		return
	case "Fn::Sub":
		str, local := arg, map[string]bool{}
		if arg.Kind == yaml.SequenceNode {
			str = arg.Content[0]
			m := arg.Content[1]
			for i := 0; i+1 < len(m.Content); i += 2 {
				local[m.Content[i].Value] = true
				c.walk(m.Content[i+1], vars)
			}
		}
		for _, m := range subVarRE.FindAllStringSubmatch(str.Value, -1) {
			if res, attr, ok := strings.Cut(m[1], "."); ok && !local[m[1]] {
				c.getAtt(str, res, attr)
			} else {
				c.ref(str, m[1], local)
			}
		}
		return
	case "Fn::If":
		if len(arg.Content) != 3 {
			c.errorf(n, "!If wants [condition, then, else]")
			return
		}
		c.condition(arg.Content[0], arg.Content[0].Value)
		c.walk(arg.Content[1], vars)
		c.walk(arg.Content[2], vars)
		return
	case "Condition":
		c.condition(n, arg.Value)
		return
	case "Fn::FindInMap":
		if len(arg.Content) != 3 {
			c.errorf(n, "!FindInMap wants [map, key, key]")
			return
		}
		m := c.tpl.mappings[arg.Content[0].Value]
		if m == nil {
			c.errorf(n, "!FindInMap: no mapping %s", arg.Content[0].Value)
			return
		}
		// A top-level key from a parameter must exist for every allowed value.
		if fn2, key := intrinsic(arg.Content[1]); fn2 == "Ref" && c.tpl.parameters[key.Value] != nil {
			for _, v := range mapping(c.tpl.parameters[key.Value])["AllowedValues"].Content {
				entry := mapping(m)[v.Value]
				if entry == nil || mapping(entry)[arg.Content[2].Value] == nil {
					c.errorf(n, "!FindInMap %s: no %s.%s for allowed value %s", arg.Content[0].Value, v.Value, arg.Content[2].Value, v.Value)
				}
			}
		}
		c.walk(arg.Content[1], vars)
		return
	}
	for _, child := range n.Content {
		c.walk(child, vars)
	}
}

// intrinsic returns the function a node calls, short form (!Ref x) or long
// ({Ref: x}), and its argument.
func intrinsic(n *yaml.Node) (string, *yaml.Node) {
	if strings.HasPrefix(n.Tag, "!") {
		name := strings.TrimPrefix(n.Tag, "!")
		if name != "Ref" && name != "Condition" {
			name = "Fn::" + name
		}
		return name, n
	}
	if n.Kind == yaml.MappingNode && len(n.Content) == 2 {
		k := n.Content[0].Value
		if k == "Ref" || k == "Condition" || strings.HasPrefix(k, "Fn::") {
			return k, n.Content[1]
		}
	}
	return "", nil
}

// check returns what does not resolve in tpl: !Ref, !GetAtt and !Sub
// targets, conditions, mapping lookups, DependsOn, unused parameters,
// resource types the test does not know.
func check(tpl *cfnTemplate) []string {
	c := &checker{tpl: tpl, used: map[string]bool{}}
	for _, section := range []map[string]*yaml.Node{tpl.conditions, tpl.resources, tpl.outputs} {
		for _, n := range section {
			c.walk(n, nil)
		}
	}
	for name, r := range tpl.resources {
		m := mapping(r)
		if _, ok := attributes[m["Type"].Value]; !ok {
			c.errorf(r, "resource %s: type %s is not in the test's table", name, m["Type"].Value)
		}
		if cond := m["Condition"]; cond != nil {
			c.condition(cond, cond.Value)
		}
		if dep := m["DependsOn"]; dep != nil {
			deps := []*yaml.Node{dep}
			if dep.Kind == yaml.SequenceNode {
				deps = dep.Content
			}
			for _, d := range deps {
				if tpl.resources[d.Value] == nil {
					c.errorf(d, "%s DependsOn %s: no such resource", name, d.Value)
				}
			}
		}
	}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range tpl.parameters {
			if !yield(k) {
				return
			}
		}
	}) {
		if !c.used[name] {
			c.errorf(tpl.parameters[name], "parameter %s is never used", name)
		}
	}
	return c.errs
}

// Every !Ref, !GetAtt, !Sub variable, condition and mapping lookup in the
// AWS templates resolves, every parameter is used, DependsOn names
// resources, and every LINKGATE_* variable set is one linkgate reads. No
// AWS call: the templates are parsed with CloudFormation's short-form tags.
func TestCloudFormationReferencesResolve(t *testing.T) {
	help, err := exec.Command(linkgate(t), "help", "serve").CombinedOutput()
	if err != nil {
		t.Fatalf("linkgate help serve: %v\n%s", err, help)
	}
	for _, file := range templates {
		t.Run(file, func(t *testing.T) {
			tpl := loadTemplate(t, file)
			if len(tpl.resources) == 0 {
				t.Fatal("no resources")
			}
			for _, e := range check(tpl) {
				t.Error(e)
			}
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range regexp.MustCompile(`\bLINKGATE_[A-Z_]+`).FindAllString(string(data), -1) {
				if !strings.Contains(string(help), "[$"+name+"]") {
					t.Errorf("%s sets %s, which linkgate serve does not read", file, name)
				}
			}
		})
	}
}

// The checker finds what it should.
func TestCloudFormationCheckerCatches(t *testing.T) {
	const bad = `Parameters:
  Arch: {Type: String, AllowedValues: [arm64, x86_64]}
  Unused: {Type: String}
Mappings:
  GoArch:
    arm64: {Name: arm64}
Resources:
  Table:
    Type: AWS::DynamoDB::Table
    Condition: Nope
    DependsOn: Ghost
    Properties:
      TableName: !Ref Missing
      X: !GetAtt Table.Bogus
      Y: !Sub "${Phantom}-${Table.Arn}-${!Literal}"
      Z: !FindInMap [GoArch, !Ref Arch, Name]
  Thing:
    Type: AWS::Made::Up
`
	path := t.TempDir() + "/bad.yaml"
	if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	errs := strings.Join(check(loadTemplate(t, path)), "\n")
	for _, want := range []string{"!Ref Missing", "Table.Bogus", "!Ref Phantom", "condition Nope", "DependsOn Ghost",
		"parameter Unused", "no x86_64.Name", "AWS::Made::Up"} {
		if !strings.Contains(errs, want) {
			t.Errorf("the checker missed %q; it said:\n%s", want, errs)
		}
	}
	if strings.Contains(errs, "Literal") || strings.Contains(errs, "Table.Arn") {
		t.Errorf("the checker flags valid references:\n%s", errs)
	}
}
