// Package lint validates the Kubernetes examples against the Kubernetes API
// types: every document is decoded strictly into its kind's Go type, so an
// unknown or misspelt field, or a wrong type, is an error. It is its own
// module so egressd itself does not depend on k8s.io.
package lint

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/yaml"
)

func documents(t *testing.T) map[string][]byte {
	files, _ := filepath.Glob("../*.yaml")
	if len(files) == 0 {
		t.Fatal("no Kubernetes examples found")
	}
	docs := map[string][]byte{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range bytes.Split(data, []byte("\n---\n")) {
			docs[f+"#"+string(rune('0'+i))] = doc
		}
	}
	return docs
}

func TestExamplesDecodeStrictly(t *testing.T) {
	kinds := map[string]int{}
	for name, doc := range documents(t) {
		var meta struct{ APIVersion, Kind string }
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var obj any
		switch meta.APIVersion + "/" + meta.Kind {
		case "v1/ConfigMap":
			obj = &corev1.ConfigMap{}
		case "apps/v1/Deployment":
			obj = &appsv1.Deployment{}
		case "networking.k8s.io/v1/NetworkPolicy":
			obj = &networkingv1.NetworkPolicy{}
		default:
			t.Fatalf("%s: kind %s/%s is not linted here; add it", name, meta.APIVersion, meta.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			t.Errorf("%s (%s): %v", name, meta.Kind, err)
		}
		kinds[meta.Kind]++
		if d, ok := obj.(*appsv1.Deployment); ok {
			checkSidecar(t, name, d)
		}
	}
	if kinds["Deployment"] == 0 || kinds["NetworkPolicy"] == 0 || kinds["ConfigMap"] == 0 {
		t.Fatalf("expected a Deployment, a NetworkPolicy and a ConfigMap, got %v", kinds)
	}
}

// checkSidecar holds the example to the rules the README gives.
func checkSidecar(t *testing.T, name string, d *appsv1.Deployment) {
	spec := d.Spec.Template.Spec
	var fence, egressd, app *corev1.Container
	for i := range spec.InitContainers {
		if spec.InitContainers[i].Name == "egress-fence" {
			fence = &spec.InitContainers[i]
		}
	}
	for i := range spec.Containers {
		switch spec.Containers[i].Name {
		case "egressd":
			egressd = &spec.Containers[i]
		default:
			app = &spec.Containers[i]
		}
	}
	if fence == nil || egressd == nil || app == nil {
		t.Fatalf("%s: needs the egress-fence init container, the egressd sidecar and the app", name)
	}
	args := strings.Join(egressd.Args, " ")
	if !strings.Contains(args, "--listen=127.0.0.1:") {
		t.Errorf("%s: egressd must listen on 127.0.0.1, not %q", name, args)
	}
	uid := *egressd.SecurityContext.RunAsUser
	if !strings.Contains(strings.Join(fence.Args, " "), "--uid-owner "+itoa(uid)) {
		t.Errorf("%s: the fence must allow egressd's uid %d only", name, uid)
	}
	proxied := false
	for _, e := range app.Env {
		proxied = proxied || (e.Name == "HTTPS_PROXY" && strings.HasPrefix(e.Value, "http://127.0.0.1:"))
	}
	if !proxied {
		t.Errorf("%s: the app must have HTTPS_PROXY pointing at the sidecar", name)
	}
	if app.SecurityContext == nil || app.SecurityContext.RunAsUser == nil || *app.SecurityContext.RunAsUser == uid {
		t.Errorf("%s: the app must run as a uid other than egressd's", name)
	}
}

func itoa(n int64) string {
	s := ""
	for ; n > 0; n /= 10 {
		s = string(rune('0'+n%10)) + s
	}
	return s
}
