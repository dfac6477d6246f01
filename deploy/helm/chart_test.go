package helm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"gitea.mynodes.xyz/ilker/llmgw/internal/app"
	"gitea.mynodes.xyz/ilker/llmgw/internal/config"
)

const (
	chartDir  = "llmgw"
	release   = "gw"
	namespace = "llmgw"
)

// valueSets are the values the chart is rendered with: its defaults, the
// production example, and everything optional turned on.
func valueSets(t *testing.T) map[string]map[string]any {
	t.Helper()
	prod, err := common.ReadValuesFile(filepath.Join(chartDir, "values-production.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	everything := loader.MergeMaps(prod.AsMap(), map[string]any{
		"autoscaling": map[string]any{"enabled": false},
		"httpRoute": map[string]any{
			"enabled":    true,
			"parentRefs": []any{map[string]any{"name": "public", "namespace": "gateways"}},
			"hostnames":  []any{"llm.example.com"},
		},
		"serviceAccount":      map[string]any{"annotations": map[string]any{"example.com/role": "llmgw"}},
		"podDisruptionBudget": map[string]any{"enabled": true, "maxUnavailable": "34%"},
		"extraEnv":            []any{map[string]any{"name": "GOMEMLIMIT", "value": "1800MiB"}},
		"image":               map[string]any{"digest": "sha256:" + strings.Repeat("ab", 32)},
		"epp":                 map[string]any{"enabled": true, "inferencePool": map[string]any{"selector": map[string]any{"app": "vllm"}}},
		"secretMounts": []any{map[string]any{"secretName": "vertex-sa", "mountPath": "/var/run/secrets/llmgw/vertex",
			"items": []any{map[string]any{"key": "sa.json"}}}},
	})
	return map[string]map[string]any{
		"default":    {},
		"production": prod.AsMap(),
		"everything": everything,
	}
}

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	c, err := loader.LoadDir(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// render renders the chart with vals over its defaults, as helm install
// would, the values checked against values.schema.json.
func render(t *testing.T, c *chart.Chart, vals map[string]any) (map[string]string, error) {
	t.Helper()
	return renderRelease(t, c, vals, release)
}

// renderRelease is render for the release called name.
func renderRelease(t *testing.T, c *chart.Chart, vals map[string]any, name string) (map[string]string, error) {
	t.Helper()
	opts := common.ReleaseOptions{Name: name, Namespace: namespace, Revision: 1, IsInstall: true}
	rv, err := util.ToRenderValuesWithSchemaValidation(c, vals, opts, nil, false)
	if err != nil {
		return nil, err
	}
	return engine.Render(c, rv)
}

// rendered is the objects one rendering made, decoded.
type rendered struct {
	deployment  *appsv1.Deployment
	configMap   *corev1.ConfigMap
	service     *corev1.Service   // the API's
	admin       *corev1.Service   // the admin port's
	services    []*corev1.Service // every Service, these two among them
	secrets     []*corev1.Secret
	account     *corev1.ServiceAccount
	hpa         *autoscalingv2.HorizontalPodAutoscaler
	pdb         *policyv1.PodDisruptionBudget
	netpol      *networkingv1.NetworkPolicy
	ingress     *networkingv1.Ingress
	unstructred map[string]map[string]any // key: kind; monitoring.coreos.com, gateway.networking.k8s.io and inference.networking.k8s.io objects
	notes       string
}

// decodeStrict decodes the JSON of one object into v, refusing any field v
// has no place for.
func decodeStrict(j []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("more after the object")
	}
	return nil
}

// decodeAll decodes every object the templates made, strictly: a field
// Kubernetes's types do not have, a key given twice, or a kind the chart
// is not known to make fails the test.
func decodeAll(t *testing.T, files map[string]string) rendered {
	t.Helper()
	r := rendered{unstructred: map[string]map[string]any{}}
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range files {
			if !yield(k) {
				return
			}
		}
	})
	for _, name := range names {
		out := files[name]
		if strings.HasSuffix(name, "NOTES.txt") {
			r.notes = out
			continue
		}
		if strings.HasSuffix(name, ".tpl") {
			continue
		}
		for _, doc := range strings.Split(out, "\n---") {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			j, err := yaml.YAMLToJSONStrict([]byte(doc))
			if err != nil {
				t.Fatalf("%s: %v\n%s", name, err, doc)
			}
			var meta struct{ APIVersion, Kind string }
			if err := json.Unmarshal(j, &meta); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			var obj any
			switch meta.APIVersion + " " + meta.Kind {
			case "apps/v1 Deployment":
				r.deployment = new(appsv1.Deployment)
				obj = r.deployment
			case "v1 ConfigMap":
				r.configMap = new(corev1.ConfigMap)
				obj = r.configMap
			case "v1 Service":
				s := new(corev1.Service)
				r.services = append(r.services, s)
				obj = s
			case "v1 Secret":
				s := new(corev1.Secret)
				r.secrets = append(r.secrets, s)
				obj = s
			case "v1 ServiceAccount":
				r.account = new(corev1.ServiceAccount)
				obj = r.account
			case "autoscaling/v2 HorizontalPodAutoscaler":
				r.hpa = new(autoscalingv2.HorizontalPodAutoscaler)
				obj = r.hpa
			case "policy/v1 PodDisruptionBudget":
				r.pdb = new(policyv1.PodDisruptionBudget)
				obj = r.pdb
			case "networking.k8s.io/v1 NetworkPolicy":
				r.netpol = new(networkingv1.NetworkPolicy)
				obj = r.netpol
			case "networking.k8s.io/v1 Ingress":
				r.ingress = new(networkingv1.Ingress)
				obj = r.ingress
			case "monitoring.coreos.com/v1 ServiceMonitor", "monitoring.coreos.com/v1 PrometheusRule",
				"gateway.networking.k8s.io/v1 HTTPRoute", "inference.networking.k8s.io/v1 InferencePool":
				m := map[string]any{}
				r.unstructred[meta.Kind] = m
				obj = &m
			default:
				t.Fatalf("%s makes a %s %s, which this test does not know", name, meta.APIVersion, meta.Kind)
			}
			if err := decodeStrict(j, obj); err != nil {
				t.Errorf("%s: %s %s does not decode strictly: %v", name, meta.APIVersion, meta.Kind, err)
			}
		}
	}
	for _, s := range r.services {
		switch s.Labels["app.kubernetes.io/component"] {
		case "api":
			r.service = s
		case "admin":
			r.admin = s
		}
	}
	return r
}

// renderAll renders and decodes the chart with each value set.
func renderAll(t *testing.T) map[string]rendered {
	t.Helper()
	c := loadChart(t)
	out := map[string]rendered{}
	for name, vals := range valueSets(t) {
		files, err := render(t, c, vals)
		if err != nil {
			t.Fatalf("%s values: %v", name, err)
		}
		out[name] = decodeAll(t, files)
	}
	return out
}

// llmgwConfig is the configuration file the chart's ConfigMap holds,
// parsed and validated as llmgw parses it.
func llmgwConfig(t *testing.T, r rendered) (*config.Config, string) {
	t.Helper()
	if r.configMap == nil {
		t.Fatal("no ConfigMap")
	}
	text := r.configMap.Data["config.yaml"]
	cfg, err := config.Parse([]byte(text))
	if err != nil {
		t.Fatalf("llmgw refuses the chart's config.yaml: %v\n%s", err, text)
	}
	return cfg, text
}

// port is the port of a listen address.
func port(t *testing.T, addr string) int32 {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	var n int32
	fmt.Sscan(p, &n)
	return n
}

// TestChartObjects checks what each value set renders: the Deployment's
// replicas, spread, resources, security, probes, preStop and grace; the
// ports against the configuration; the Secret references; the PDB and
// the HPA; and the optional objects when they are on.
func TestChartObjects(t *testing.T) {
	for name, r := range renderAll(t) {
		t.Run(name, func(t *testing.T) {
			cfg, _ := llmgwConfig(t, r)
			d := r.deployment
			if d == nil {
				t.Fatal("no Deployment")
			}
			spec := d.Spec.Template.Spec
			if len(spec.Containers) != 1 {
				t.Fatalf("%d containers, want 1", len(spec.Containers))
			}
			c := spec.Containers[0]

			// Two replicas or more, from the Deployment or the HPA.
			replicas := int32(0)
			if d.Spec.Replicas != nil {
				replicas = *d.Spec.Replicas
			}
			if r.hpa != nil {
				if d.Spec.Replicas != nil {
					t.Error("the Deployment sets replicas beside an HPA, which each upgrade would reset")
				}
				replicas = *r.hpa.Spec.MinReplicas
				checkHPA(t, r.hpa, d)
			}
			if replicas < 2 {
				t.Errorf("%d replicas, want 2 or more", replicas)
			}
			if name == "production" && replicas < 3 {
				t.Errorf("production: %d replicas, want 3", replicas)
			}
			if len(spec.TopologySpreadConstraints) == 0 {
				t.Error("no topology spread")
			}
			if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
				t.Errorf("resources %+v, want CPU and memory requests and a memory limit", c.Resources)
			}

			// Non-root, read-only.
			sc, psc := c.SecurityContext, spec.SecurityContext
			if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != 65532 {
				t.Errorf("pod security context %+v, want non-root uid 65532", psc)
			}
			if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
				sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
				sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
				t.Errorf("container security context %+v, want a read-only root, no privilege escalation, every capability dropped", sc)
			}
			// What llmgw writes, with a read-only root: the spool, TMPDIR,
			// and a SQLite store without PostgreSQL; each on a volume.
			writes := []string{cfg.Store.SpoolDir}
			storeFromEnv := false
			for _, e := range c.Env {
				switch e.Name {
				case "TMPDIR":
					writes = append(writes, e.Value+"/")
				case config.EnvStoreURL:
					storeFromEnv = true
				}
			}
			if f, ok := strings.CutPrefix(cfg.Store.URL, "sqlite:"); ok && !storeFromEnv {
				writes = append(writes, f)
			}
			if len(writes) < 2 {
				t.Errorf("the container sets no TMPDIR")
			}
			for _, w := range writes {
				if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
					return !m.ReadOnly && strings.HasPrefix(w, m.MountPath+"/")
				}) {
					t.Errorf("llmgw writes to %s, which is on no writable volume", w)
				}
			}

			// Ports: the container's, the Service's and the probes' are
			// the configuration's listeners.
			ports := map[string]int32{}
			for _, p := range c.Ports {
				ports[p.Name] = p.ContainerPort
			}
			if ports["http"] != port(t, cfg.Server.Listen) || ports["admin"] != port(t, cfg.Server.AdminListen) {
				t.Errorf("container ports %v; the config listens on %s and %s", ports, cfg.Server.Listen, cfg.Server.AdminListen)
			}
			if r.service == nil || r.admin == nil {
				t.Fatalf("the API's Service %v, the admin port's %v", r.service != nil, r.admin != nil)
			}
			for _, s := range []struct {
				svc  *corev1.Service
				want []string
			}{{r.service, []string{"http->http"}}, {r.admin, []string{"admin->admin"}}} {
				var svcPorts []string
				for _, p := range s.svc.Spec.Ports {
					svcPorts = append(svcPorts, p.Name+"->"+p.TargetPort.String())
				}
				if !slices.Equal(svcPorts, s.want) {
					t.Errorf("Service %s ports %v, want %v", s.svc.Name, svcPorts, s.want)
				}
			}
			for _, pr := range []struct {
				name string
				p    *corev1.Probe
				path string
			}{{"liveness", c.LivenessProbe, "/livez"}, {"readiness", c.ReadinessProbe, "/readyz"}, {"startup", c.StartupProbe, ""}} {
				if pr.p == nil || pr.p.HTTPGet == nil {
					t.Errorf("no HTTP %s probe", pr.name)
					continue
				}
				if pr.p.HTTPGet.Port != intstr.FromString("admin") {
					t.Errorf("%s probe on port %s, want the admin listener's", pr.name, pr.p.HTTPGet.Port.String())
				}
				if pr.path != "" && pr.p.HTTPGet.Path != pr.path {
					t.Errorf("%s probe on %s, want %s", pr.name, pr.p.HTTPGet.Path, pr.path)
				}
			}

			// The drain: preStop, then drain_delay, then shutdown_grace,
			// all within the grace period.
			if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil {
				t.Fatal("no preStop sleep")
			}
			preStop := time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
			need := preStop + cfg.Server.DrainDelay + cfg.Server.ShutdownGrace
			grace := time.Duration(*spec.TerminationGracePeriodSeconds) * time.Second
			if grace <= need {
				t.Errorf("terminationGracePeriodSeconds %v, want more than preStop %v + drain_delay %v + shutdown_grace %v",
					grace, preStop, cfg.Server.DrainDelay, cfg.Server.ShutdownGrace)
			}
			if cfg.Server.DrainDelay <= 0 {
				t.Errorf("server.drain_delay %v: the chart should give load balancers time", cfg.Server.DrainDelay)
			}

			// Secrets come from Secrets, never from the ConfigMap.
			env := map[string]*corev1.EnvVarSource{}
			for _, e := range c.Env {
				env[e.Name] = e.ValueFrom
			}
			checkSecretEnv(t, name, env, r)
			if _, text := llmgwConfig(t, r); regexp.MustCompile(`(?i)postgres://|redis://|token:|cache_secret`).MatchString(text) {
				t.Errorf("the ConfigMap holds what belongs in a Secret:\n%s", text)
			}

			if r.pdb == nil {
				t.Error("no PodDisruptionBudget")
			} else if !equalLabels(r.pdb.Spec.Selector.MatchLabels, d.Spec.Selector.MatchLabels) {
				t.Errorf("the PDB selects %v, the Deployment's pods are %v", r.pdb.Spec.Selector.MatchLabels, d.Spec.Selector.MatchLabels)
			}
			if r.account == nil || spec.ServiceAccountName != r.account.Name {
				t.Errorf("the pods run as %q; the chart's ServiceAccount is %+v", spec.ServiceAccountName, r.account)
			}
			checkOptional(t, name, r, d)
		})
	}
}

func equalLabels(a, b map[string]string) bool {
	return len(a) == len(b) && func() bool {
		for k, v := range a {
			if b[k] != v {
				return false
			}
		}
		return true
	}()
}

// checkHPA checks that the HPA scales the Deployment, with a behavior.
func checkHPA(t *testing.T, h *autoscalingv2.HorizontalPodAutoscaler, d *appsv1.Deployment) {
	t.Helper()
	ref := h.Spec.ScaleTargetRef
	if ref.Kind != "Deployment" || ref.Name != d.Name || ref.APIVersion != "apps/v1" {
		t.Errorf("the HPA scales %+v, not the Deployment %s", ref, d.Name)
	}
	if h.Spec.Behavior == nil || h.Spec.Behavior.ScaleDown == nil || h.Spec.Behavior.ScaleUp == nil {
		t.Errorf("the HPA has no behavior for both directions: %+v", h.Spec.Behavior)
	}
	if h.Spec.MaxReplicas < *h.Spec.MinReplicas {
		t.Errorf("the HPA's maxReplicas %d is under its minReplicas %d", h.Spec.MaxReplicas, *h.Spec.MinReplicas)
	}
}

// checkSecretEnv checks the variables that carry secrets: each from a
// Secret, the cache secret always, and the store's and Redis's URLs with
// the production values.
func checkSecretEnv(t *testing.T, values string, env map[string]*corev1.EnvVarSource, r rendered) {
	t.Helper()
	want := []string{"LLMGW_CACHE_SECRET"}
	if values != "default" {
		want = append(want, "LLMGW_ADMIN_TOKEN", "LLMGW_STORE_URL", "LLMGW_REDIS_URL", "OPENAI_API_KEY")
	}
	for _, k := range want {
		if src := env[k]; src == nil || src.SecretKeyRef == nil || src.SecretKeyRef.Name == "" {
			t.Errorf("%s does not come from a Secret: %+v", k, src)
		}
	}
	// Without a Secret given, the chart makes the cache secret, and keeps it.
	made := map[string]*corev1.Secret{}
	for _, s := range r.secrets {
		made[s.Name] = s
	}
	ref := env["LLMGW_CACHE_SECRET"].SecretKeyRef
	s, ok := made[ref.Name]
	if !ok {
		t.Fatalf("LLMGW_CACHE_SECRET comes from %s, which the chart does not make", ref.Name)
	}
	if v := s.Data[ref.Key]; len(v) < config.MinCacheSecret {
		t.Errorf("the chart's cache secret is %d bytes, want %d or more", len(v), config.MinCacheSecret)
	}
	if s.Annotations["helm.sh/resource-policy"] != "keep" {
		t.Error("the chart's cache secret is not kept: an uninstall and install would split the prefix cache")
	}
}

// checkOptional checks the objects only some value sets turn on.
func checkOptional(t *testing.T, values string, r rendered, d *appsv1.Deployment) {
	t.Helper()
	if r.netpol == nil {
		t.Error("no NetworkPolicy: every pod in the cluster reaches the admin port")
	} else if !equalLabels(r.netpol.Spec.PodSelector.MatchLabels, d.Spec.Selector.MatchLabels) {
		t.Errorf("the NetworkPolicy applies to %v, not the Deployment's pods", r.netpol.Spec.PodSelector.MatchLabels)
	}
	if values == "default" {
		for kind, present := range map[string]bool{
			"ServiceMonitor": r.unstructred["ServiceMonitor"] != nil, "PrometheusRule": r.unstructred["PrometheusRule"] != nil,
			"Ingress": r.ingress != nil, "HTTPRoute": r.unstructred["HTTPRoute"] != nil,
		} {
			if present {
				t.Errorf("the default values make a %s, which needs what a cluster may not have", kind)
			}
		}
		return
	}
	sm := r.unstructred["ServiceMonitor"]
	if sm == nil {
		t.Fatal("no ServiceMonitor")
	}
	checkFields(t, "ServiceMonitor", sm, "apiVersion", "kind", "metadata", "spec")
	smSpec, _ := sm["spec"].(map[string]any)
	checkFields(t, "ServiceMonitor.spec", smSpec, "selector", "endpoints")
	eps, _ := smSpec["endpoints"].([]any)
	if len(eps) != 1 {
		t.Fatalf("ServiceMonitor endpoints %v", eps)
	}
	ep, _ := eps[0].(map[string]any)
	checkFields(t, "ServiceMonitor.spec.endpoints[0]", ep, "port", "path", "interval")
	if ep["port"] != "admin" || ep["path"] != "/metrics" {
		t.Errorf("the ServiceMonitor scrapes %v %v, want the admin port's /metrics", ep["port"], ep["path"])
	}
	sel, _ := smSpec["selector"].(map[string]any)
	ml, _ := sel["matchLabels"].(map[string]any)
	for _, svc := range r.services {
		selected := true
		for k, v := range ml {
			selected = selected && svc.Labels[k] == v
		}
		if selected != (svc == r.admin) {
			t.Errorf("the ServiceMonitor's selector %v selects the Service %s: %v; it should select the admin port's alone", ml, svc.Name, selected)
		}
	}
	checkRules(t, r.unstructred["PrometheusRule"])

	if values == "everything" {
		if r.ingress == nil || r.unstructred["HTTPRoute"] == nil {
			t.Fatalf("with everything on: Ingress %v, HTTPRoute %v", r.ingress != nil, r.unstructred["HTTPRoute"] != nil)
		}
		route := r.unstructred["HTTPRoute"]
		checkFields(t, "HTTPRoute", route, "apiVersion", "kind", "metadata", "spec")
		rs, _ := route["spec"].(map[string]any)
		checkFields(t, "HTTPRoute.spec", rs, "parentRefs", "hostnames", "rules")
		if !strings.Contains(fmt.Sprint(rs["rules"]), fmt.Sprintf("name:%s port:%d", r.service.Name, r.service.Spec.Ports[0].Port)) {
			t.Errorf("the HTTPRoute does not send to the Service's API port: %v", rs["rules"])
		}
	}
}

// checkFields fails when m has a key not among known: a field misspelled
// in an object no Go type here decodes.
func checkFields(t *testing.T, what string, m map[string]any, known ...string) {
	t.Helper()
	if m == nil {
		t.Errorf("%s is missing", what)
		return
	}
	for k := range m {
		if !slices.Contains(known, k) {
			t.Errorf("%s has a field %q, not one of %v", what, k, known)
		}
	}
}

// metricName matches a metric's name in an expression; a recording
// rule's name (level:metric:operations) is not matched.
var metricName = regexp.MustCompile(`(?:^|[^a-zA-Z0-9_:])(llmgw_[a-z_]+)`)

const (
	// rulesSource is the one source of the rules: the chart ships a copy.
	rulesSource = "../prometheus/llmgw.rules.yml"
	rulesCopy   = "llmgw/files/llmgw.rules.yml"
)

// TestRulesAreDeployPrometheus: the chart's copy of the rules is
// deploy/prometheus/llmgw.rules.yml, byte for byte.
func TestRulesAreDeployPrometheus(t *testing.T) {
	src, err := os.ReadFile(rulesSource)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := os.ReadFile(rulesCopy)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(src, cp) {
		t.Errorf("%s differs from %s; copy it: cp deploy/prometheus/llmgw.rules.yml deploy/helm/llmgw/files/", rulesCopy, rulesSource)
	}
}

// checkRules checks the PrometheusRule's shape; that its groups are
// deploy/prometheus/llmgw.rules.yml's, every rule the same; and that
// every metric its expressions read is one llmgw exports.
func checkRules(t *testing.T, pr map[string]any) {
	t.Helper()
	if pr == nil {
		t.Fatal("no PrometheusRule")
	}
	checkFields(t, "PrometheusRule", pr, "apiVersion", "kind", "metadata", "spec")
	spec, _ := pr["spec"].(map[string]any)
	checkFields(t, "PrometheusRule.spec", spec, "groups")
	src, err := os.ReadFile(rulesSource)
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	if err := yaml.Unmarshal(src, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(spec["groups"], want["groups"]) {
		t.Errorf("the PrometheusRule's groups are not %s's", rulesSource)
	}
	exported := exportedMetrics(t)
	groups, _ := spec["groups"].([]any)
	n := 0
	for _, g := range groups {
		gm, _ := g.(map[string]any)
		checkFields(t, "PrometheusRule group", gm, "name", "rules")
		rules, _ := gm["rules"].([]any)
		for _, rule := range rules {
			rm, _ := rule.(map[string]any)
			checkFields(t, "PrometheusRule rule", rm, "record", "alert", "expr", "for", "labels", "annotations")
			expr, _ := rm["expr"].(string)
			for _, m := range metricName.FindAllStringSubmatch(expr, -1) {
				base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(m[1], "_bucket"), "_sum"), "_count")
				if !exported[base] {
					t.Errorf("rule %v reads %s, which llmgw does not export", rm["alert"], m[1])
				}
			}
			n++
		}
	}
	if n < 3 {
		t.Errorf("%d rules, want a few", n)
	}
}

// exportedMetrics are the metric families llmgw registers, as
// docs/reference/metrics.md's table lists them (a test in internal/app
// writes it from the registry and fails when it is stale).
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	doc, err := os.ReadFile("../../docs/reference/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z0-9_]+)`").FindAllStringSubmatch(string(doc), -1) {
		names[m[1]] = true
	}
	if len(names) < 30 {
		t.Fatalf("found %d metrics in docs/reference/metrics.md", len(names))
	}
	return names
}

// TestChartProbesAnswer starts llmgw serve in-process from each rendered
// configuration file and sends every probe of the Deployment to its admin
// listener: each must answer 200 on a gateway that serves.
func TestChartProbesAnswer(t *testing.T) {
	t.Setenv(config.EnvStoreURL, "")
	t.Setenv(config.EnvRedisURL, "")
	for name, r := range renderAll(t) {
		t.Run(name, func(t *testing.T) {
			_, text := llmgwConfig(t, r)
			// The drain is TestDrainCutsNothing's; here it would only
			// make each cleanup wait.
			text = regexp.MustCompile(`drain_delay: \S+`).ReplaceAllString(text, "drain_delay: 0s")
			path := filepath.Join(t.TempDir(), "config.yaml")
			if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			admin := serve(t, "--config", path, "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--store", "memory:")
			c := r.deployment.Spec.Template.Spec.Containers[0]
			for _, p := range []*corev1.Probe{c.StartupProbe, c.LivenessProbe, c.ReadinessProbe} {
				resp, err := http.Get(admin + p.HTTPGet.Path)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("GET %s on the admin listener: %d, want 200", p.HTTPGet.Path, resp.StatusCode)
				}
			}
		})
	}
}

// serve runs `llmgw serve args...` in this process until the test ends,
// and returns its admin listener's URL.
func serve(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- app.ServeCommand(ctx, args, pw, io.Discard)
		pw.Close()
	}()
	t.Cleanup(func() { cancel(); <-done })
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			// llmgw: OpenAI API on URL, metrics and admin on URL
			if f := strings.Fields(sc.Text()); len(f) == 10 && f[1] == "OpenAI" {
				found <- f[9]
			}
		}
	}()
	select {
	case u := <-found:
		return u
	case err := <-done:
		t.Fatalf("serve ended before it served: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not start")
	}
	return ""
}

// TestChartConfigChecksum: a change to the configuration changes the
// pods' checksum annotation, so the pods roll; a change elsewhere does
// not; and the chart refuses a field of the configuration it sets itself.
func TestChartConfigChecksum(t *testing.T) {
	c := loadChart(t)
	checksum := func(vals map[string]any) string {
		files, err := render(t, c, vals)
		if err != nil {
			t.Fatal(err)
		}
		return decodeAll(t, files).deployment.Spec.Template.Annotations["checksum/config"]
	}
	base := checksum(map[string]any{})
	if base == "" {
		t.Fatal("no checksum/config annotation")
	}
	withModel := map[string]any{"config": map[string]any{"models": []any{
		map[string]any{"name": "llama-3.1-8b-instruct", "pool": "vllm", "aliases": []any{"default"}},
	}}}
	tests := []struct {
		name    string
		vals    map[string]any
		changes bool
	}{
		{"the same values", map[string]any{}, false},
		{"another replica count", map[string]any{"replicaCount": 4, "autoscaling": map[string]any{"enabled": false}}, false},
		{"another model alias", withModel, true},
		{"another drain delay", map[string]any{"drain": map[string]any{"delaySeconds": 9}}, true},
		{"another admin port", map[string]any{"ports": map[string]any{"admin": 9091}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := checksum(tt.vals) != base; got != tt.changes {
				t.Errorf("checksum changed: %v, want %v", got, tt.changes)
			}
		})
	}

	for _, field := range []string{"listen", "drain_delay", "shutdown_grace"} {
		vals := map[string]any{"config": map[string]any{"server": map[string]any{field: "x"}}}
		if _, err := render(t, c, vals); err == nil || !strings.Contains(err.Error(), "config.server."+field+" is set by the chart") {
			t.Errorf("config.server.%s in the values: %v, want a refusal naming it", field, err)
		}
	}
	if _, err := render(t, c, map[string]any{"config": map[string]any{"store": map[string]any{"url": "postgres://u:p@db/x"}}}); err == nil {
		t.Error("config.store.url in the values was taken: a password would land in the ConfigMap")
	}
	if _, err := render(t, c, map[string]any{"replicaCount": 1}); err == nil {
		t.Error("replicaCount 1 was taken; the schema asks for two or more")
	}
}

// TestChartLint runs helm lint, through Helm's own lint package, with
// each value set: no warning and no error.
func TestChartLint(t *testing.T) {
	for name, vals := range valueSets(t) {
		t.Run(name, func(t *testing.T) {
			res := lint.RunAll(chartDir, vals, namespace)
			for _, m := range res.Messages {
				if m.Severity >= support.WarningSev {
					t.Errorf("helm lint: %s", m)
				} else {
					t.Logf("helm lint: %s", m)
				}
			}
		})
	}
}
