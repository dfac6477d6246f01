package helm

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestChartSecretMounts: each of secretMounts is its Secret as a
// read-only volume at its mountPath, readable by the pod's group alone,
// every key a file or only the items listed; a mount over the
// configuration, the data volume or another mount, or a path that is not
// absolute, is refused.
func TestChartSecretMounts(t *testing.T) {
	c := loadChart(t)
	mounts := []any{
		map[string]any{"secretName": "vertex-sa", "mountPath": "/var/run/secrets/llmgw/vertex",
			"items": []any{map[string]any{"key": "sa.json"}, map[string]any{"key": "aws", "path": "aws/config"}}},
		map[string]any{"secretName": "gemini", "mountPath": "/var/run/secrets/llmgw/gemini"},
	}
	files, err := render(t, c, map[string]any{"secretMounts": mounts})
	if err != nil {
		t.Fatal(err)
	}
	spec := decodeAll(t, files).deployment.Spec.Template.Spec
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	want := []struct {
		secret, path string
		items        []corev1.KeyToPath
	}{
		{"vertex-sa", "/var/run/secrets/llmgw/vertex", []corev1.KeyToPath{{Key: "sa.json", Path: "sa.json"}, {Key: "aws", Path: "aws/config"}}},
		{"gemini", "/var/run/secrets/llmgw/gemini", nil},
	}
	for _, w := range want {
		var m *corev1.VolumeMount
		for i, vm := range spec.Containers[0].VolumeMounts {
			if vm.MountPath == w.path {
				m = &spec.Containers[0].VolumeMounts[i]
			}
		}
		if m == nil || !m.ReadOnly {
			t.Errorf("%s: mounted %+v, want read-only", w.path, m)
			continue
		}
		s := volumes[m.Name].Secret
		if s == nil || s.SecretName != w.secret || s.DefaultMode == nil || *s.DefaultMode != 0o440 || len(s.Items) != len(w.items) {
			t.Errorf("%s: volume %+v, want Secret %s, mode 0440, items %v", w.path, volumes[m.Name], w.secret, w.items)
			continue
		}
		for i := range w.items {
			if s.Items[i] != w.items[i] {
				t.Errorf("%s: item %d is %+v, want %+v", w.path, i, s.Items[i], w.items[i])
			}
		}
	}

	for _, bad := range []struct {
		path, want string
	}{
		{"/etc/llmgw", "in the configuration's or the data volume's directory"},
		{"/etc/llmgw/keys/", "in the configuration's or the data volume's directory"},
		{"/var/lib/llmgw/keys", "in the configuration's or the data volume's directory"},
		{"/var/run/secrets/llmgw/gemini/", "is another mount's too"},
		{"run/secrets", "secretMounts"},
	} {
		_, err := render(t, c, map[string]any{"secretMounts": append(mounts[1:2:2], map[string]any{"secretName": "k", "mountPath": bad.path})})
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("a Secret mounted at %s rendered (err %v), want %q", bad.path, err, bad.want)
		}
	}
}
