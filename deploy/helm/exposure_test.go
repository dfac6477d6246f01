package helm

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/v2/loader"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestChartKeepsTheAdminPortInside renders the chart every way that could
// carry the admin port out of the cluster — each value set with each
// service.type, with the NetworkPolicy on and off, under a short release
// name and one at Kubernetes's 63-character limit — and fails on any
// rendering where a Service other than a ClusterIP one carries it, an
// Ingress or HTTPRoute routes to it, a pod binds it on its node, or the
// NetworkPolicy admits it from beyond what networkPolicy.adminFrom names.
func TestChartKeepsTheAdminPortInside(t *testing.T) {
	c := loadChart(t)
	for base, vals := range valueSets(t) {
		for _, svcType := range []string{"ClusterIP", "NodePort", "LoadBalancer"} {
			for _, policy := range []bool{true, false} {
				for _, name := range []string{release, strings.Repeat("r", 63)} {
					v := loader.MergeMaps(vals, map[string]any{
						"service":       map[string]any{"type": svcType},
						"networkPolicy": map[string]any{"enabled": policy},
					})
					label := fmt.Sprintf("%s/%s/policy=%v/name=%d", base, svcType, policy, len(name))
					t.Run(label, func(t *testing.T) {
						files, err := renderRelease(t, c, v, name)
						if err != nil {
							t.Fatal(err)
						}
						checkAdminInside(t, decodeAll(t, files), loader.MergeMaps(c.Values, v))
					})
				}
			}
		}
	}
}

// checkAdminInside fails when r, rendered with vals over the chart's
// defaults, lets the admin port out of the cluster.
func checkAdminInside(t *testing.T, r rendered, vals map[string]any) {
	t.Helper()
	apiPort, adminPort := r.deployment.Spec.Template.Spec.Containers[0].Ports[0], r.deployment.Spec.Template.Spec.Containers[0].Ports[1]
	if apiPort.Name != "http" || adminPort.Name != "admin" {
		t.Fatalf("the container's first ports are %q and %q, not http and admin", apiPort.Name, adminPort.Name)
	}
	names := map[string]bool{}
	adminServices := map[string]int32{} // key: a Service carrying the admin port; value: its port for it
	for _, s := range r.services {
		if names[s.Name] || len(s.Name) > 63 {
			t.Errorf("a Service is called %q, a name given twice or longer than 63 characters", s.Name)
		}
		names[s.Name] = true
		admin, api := false, false
		for _, p := range s.Spec.Ports {
			target := p.TargetPort
			if target == (intstr.IntOrString{}) {
				target = intstr.FromInt32(p.Port) // a Service's target is its port unless set
			}
			switch target {
			case intstr.FromString("admin"), intstr.FromInt32(adminPort.ContainerPort):
				admin = true
				adminServices[s.Name] = p.Port
			case intstr.FromString("http"), intstr.FromInt32(apiPort.ContainerPort):
				api = true
			}
		}
		if !admin {
			continue
		}
		if api {
			t.Errorf("the Service %s carries the admin port beside the API's, so exposing the API exposes it", s.Name)
		}
		if s.Spec.Type != corev1.ServiceTypeClusterIP || len(s.Spec.ExternalIPs) > 0 || s.Spec.LoadBalancerIP != "" {
			t.Errorf("the Service %s carries the admin port as %s, external IPs %v", s.Name, s.Spec.Type, s.Spec.ExternalIPs)
		}
	}
	spec := r.deployment.Spec.Template.Spec
	if spec.HostNetwork {
		t.Error("the pods share their node's network: the admin port is bound on the node")
	}
	for _, p := range spec.Containers[0].Ports {
		if p.HostPort != 0 {
			t.Errorf("the container binds %s on its node's port %d", p.Name, p.HostPort)
		}
	}
	if r.ingress != nil {
		for _, rule := range r.ingress.Spec.Rules {
			for _, path := range rule.HTTP.Paths {
				b := path.Backend.Service
				if b == nil {
					t.Errorf("the Ingress routes %s to %+v, not a Service", path.Path, path.Backend)
					continue
				}
				if p, ok := adminServices[b.Name]; ok && (b.Port.Name == "admin" || b.Port.Number == p) {
					t.Errorf("the Ingress routes %s to the admin port of %s", path.Path, b.Name)
				}
			}
		}
	}
	if route := r.unstructred["HTTPRoute"]; route != nil {
		rules, _ := route["spec"].(map[string]any)["rules"].([]any)
		for _, rule := range rules {
			refs, _ := rule.(map[string]any)["backendRefs"].([]any)
			for _, ref := range refs {
				m, _ := ref.(map[string]any)
				name, _ := m["name"].(string)
				port, _ := m["port"].(float64)
				if p, ok := adminServices[name]; ok && int32(port) == p {
					t.Errorf("the HTTPRoute sends to the admin port of %s", name)
				}
			}
		}
	}
	np, _ := vals["networkPolicy"].(map[string]any)
	if np["enabled"] != true {
		if r.netpol != nil {
			t.Error("a NetworkPolicy with networkPolicy.enabled false")
		}
		return
	}
	if r.netpol == nil {
		t.Fatal("no NetworkPolicy")
	}
	checkPolicy(t, r.netpol, canonical(t, np["adminFrom"]))
}

// canonical is v as JSON with its objects' keys sorted, for comparing
// a value's YAML with the Kubernetes object it became.
func canonical(t *testing.T, v any) string {
	t.Helper()
	j, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var a any
	if err := json.Unmarshal(j, &a); err != nil {
		t.Fatal(err)
	}
	j, _ = json.Marshal(a)
	return string(j)
}

// checkPolicy fails when p admits the admin port from anything but
// adminFrom (canonical JSON), or has a rule open on every port.
func checkPolicy(t *testing.T, p *networkingv1.NetworkPolicy, adminFrom string) {
	t.Helper()
	if !slices.Contains(p.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
		t.Fatalf("the NetworkPolicy's types %v leave ingress open", p.Spec.PolicyTypes)
	}
	for i, rule := range p.Spec.Ingress {
		if len(rule.Ports) == 0 {
			t.Errorf("ingress rule %d admits every port", i)
		}
		admin := false
		for _, port := range rule.Ports {
			admin = admin || port.Port == nil || *port.Port == intstr.FromString("admin")
		}
		if !admin {
			continue
		}
		if len(rule.From) == 0 {
			t.Errorf("ingress rule %d admits the admin port from anywhere", i)
		}
		for _, peer := range rule.From {
			if peer.IPBlock != nil && strings.HasSuffix(peer.IPBlock.CIDR, "/0") {
				t.Errorf("ingress rule %d admits the admin port from %s", i, peer.IPBlock.CIDR)
			}
		}
		if got := canonical(t, rule.From); got != adminFrom {
			t.Errorf("ingress rule %d admits the admin port from %s, want networkPolicy.adminFrom %s", i, got, adminFrom)
		}
	}
}

// TestChartRefusesTheAdminPortToEveryAddress: an adminFrom ipBlock of
// every address fails the install, rather than render a policy that
// admits the world to the admin port where pod addresses are routable.
func TestChartRefusesTheAdminPortToEveryAddress(t *testing.T) {
	c := loadChart(t)
	for _, cidr := range []string{"0.0.0.0/0", "::/0"} {
		_, err := render(t, c, map[string]any{"networkPolicy": map[string]any{
			"adminFrom": []any{map[string]any{"ipBlock": map[string]any{"cidr": cidr}}},
		}})
		if err == nil || !strings.Contains(err.Error(), "networkPolicy.adminFrom") {
			t.Errorf("adminFrom ipBlock %s: %v, want a refusal naming networkPolicy.adminFrom", cidr, err)
		}
	}
	if _, err := render(t, c, map[string]any{"networkPolicy": map[string]any{
		"adminFrom": []any{map[string]any{"ipBlock": map[string]any{"cidr": "10.1.2.0/24"}}},
	}}); err != nil {
		t.Errorf("adminFrom ipBlock 10.1.2.0/24: %v", err)
	}
}
