package helm

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"
)

// inferencePoolCRD is the InferencePool CRD of Gateway API Inference
// Extension v1.6.0 (config/crd/bases/inference.networking.k8s.io_inferencepools.yaml
// at that tag), vendored as released.
const inferencePoolCRD = "testdata/inferencepools-v1.6.0.yaml"

// crdSchema is the v1 schema of the InferencePool CRD, as the API server
// holds it: for validation, for pruning unknown fields, and its CEL rules.
func crdSchema(t *testing.T) (*apiextensions.JSONSchemaProps, *structuralschema.Structural) {
	t.Helper()
	b, err := os.ReadFile(inferencePoolCRD)
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(b, &crd); err != nil {
		t.Fatal(err)
	}
	for _, v := range crd.Spec.Versions {
		if v.Name != "v1" {
			continue
		}
		var s apiextensions.JSONSchemaProps
		if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, &s, nil); err != nil {
			t.Fatal(err)
		}
		st, err := structuralschema.NewStructural(&s)
		if err != nil {
			t.Fatal(err)
		}
		return &s, st
	}
	t.Fatal("the CRD has no version v1")
	return nil, nil
}

// TestChartEPPMode renders the chart in epp mode: llmgw listens for the
// EPP on ports.epp over TLS, the EPP's Service carries that port (ext_proc
// and gRPC health) and the admin port (metrics), and the
// InferencePool names it as its endpoint picker and is valid against the
// released CRD's schema: no field the schema prunes, every field's type,
// enum and pattern, and its CEL rules.
func TestChartEPPMode(t *testing.T) {
	r := renderAll(t)["everything"]
	cfg, _ := llmgwConfig(t, r)
	if cfg.EPP.Listen != ":9002" || !cfg.EPP.TLS {
		t.Errorf("epp.listen %q, tls %v; want :9002 over TLS", cfg.EPP.Listen, cfg.EPP.TLS)
	}
	var eppSvc bool
	for _, s := range r.services {
		if s.Labels["app.kubernetes.io/component"] != "epp" {
			continue
		}
		eppSvc = true
		var ports []string
		for _, p := range s.Spec.Ports {
			ports = append(ports, fmt.Sprintf("%s %d->%s", p.Name, p.Port, p.TargetPort.StrVal))
		}
		want := []string{"grpc-ext-proc 9002->epp", "http-metrics 8081->admin"}
		if s.Name != "gw-llmgw-epp" || !slices.Equal(ports, want) || string(s.Spec.Type) != "ClusterIP" {
			t.Errorf("EPP Service %s, %s, ports %q; want gw-llmgw-epp, ClusterIP, ports %q: ext_proc with its gRPC health, and the metrics", s.Name, s.Spec.Type, ports, want)
		}
	}
	if !eppSvc {
		t.Fatal("no EPP Service")
	}
	var podPort bool
	for _, p := range r.deployment.Spec.Template.Spec.Containers[0].Ports {
		podPort = podPort || p.Name == "epp" && p.ContainerPort == 9002
	}
	if !podPort {
		t.Error("the pod has no epp port 9002")
	}
	pool := r.unstructred["InferencePool"]
	if pool == nil {
		t.Fatal("no InferencePool")
	}
	spec := pool["spec"].(map[string]any)
	ref := spec["endpointPickerRef"].(map[string]any)
	if ref["name"] != "gw-llmgw-epp" || ref["port"].(map[string]any)["number"] != float64(9002) {
		t.Errorf("endpointPickerRef %v, want the EPP Service's port 9002", ref)
	}

	s, st := crdSchema(t)
	obj := roundTrip(t, pool)
	if unknown := pruning.PruneWithOptions(obj, st, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true}); len(unknown) > 0 {
		t.Errorf("fields the CRD's schema does not have: %v", unknown)
	}
	v, _, err := validation.NewSchemaValidator(s)
	if err != nil {
		t.Fatal(err)
	}
	if errs := validation.ValidateCustomResource(nil, roundTrip(t, pool), v); len(errs) > 0 {
		t.Errorf("the InferencePool does not validate: %v", errs.ToAggregate())
	}
	celErrs, _ := cel.NewValidator(st, true, celconfig.PerCallLimit).Validate(context.Background(), field.NewPath(""), st, roundTrip(t, pool), nil, celconfig.RuntimeCELCostBudget)
	if len(celErrs) > 0 {
		t.Errorf("the InferencePool breaks the CRD's rules: %v", celErrs.ToAggregate())
	}
}

// TestChartEPPCatches: the schema check finds a mistake in an
// InferencePool, and the chart refuses epp mode without a selector.
func TestChartEPPCatches(t *testing.T) {
	s, st := crdSchema(t)
	bad := map[string]any{
		"apiVersion": "inference.networking.k8s.io/v1", "kind": "InferencePool", "metadata": map[string]any{"name": "x"},
		"spec": map[string]any{
			"selector":          map[string]any{"matchLabels": map[string]any{"app": "vllm"}},
			"targetPorts":       []any{map[string]any{"number": float64(8000)}},
			"endpointPickerRef": map[string]any{"name": "epp", "failureMode": "Sometimes", "extra": true},
		},
	}
	if unknown := pruning.PruneWithOptions(roundTrip(t, bad), st, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true}); len(unknown) != 1 {
		t.Errorf("pruned %v, want spec.endpointPickerRef.extra", unknown)
	}
	v, _, _ := validation.NewSchemaValidator(s)
	if errs := validation.ValidateCustomResource(nil, roundTrip(t, bad), v); len(errs) == 0 {
		t.Error("a failureMode of Sometimes validated")
	}
	if errs, _ := cel.NewValidator(st, true, celconfig.PerCallLimit).Validate(context.Background(), field.NewPath(""), st, roundTrip(t, bad), nil, celconfig.RuntimeCELCostBudget); len(errs) == 0 {
		t.Error("a Service endpointPickerRef without a port passed the CRD's rules")
	}

	c := loadChart(t)
	_, err := render(t, c, loader.MergeMaps(map[string]any{}, map[string]any{"epp": map[string]any{"enabled": true}}))
	if err == nil || !strings.Contains(err.Error(), "epp.inferencePool.selector") {
		t.Errorf("epp mode without a selector: %v, want a refusal naming epp.inferencePool.selector", err)
	}
}

// roundTrip is v through JSON, as an API server holds a decoded object.
func roundTrip(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := utiljson.Unmarshal(b, &out); err != nil { // whole numbers as int64, as the API server decodes them
		t.Fatal(err)
	}
	return out
}
