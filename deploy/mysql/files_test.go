package mysql_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// yamlDocs decodes every document of a (multi-document) YAML file.
func yamlDocs(t *testing.T, path string) []map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	var out []map[string]any
	for {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err, "parse %s", path)
		if doc != nil {
			out = append(out, doc)
		}
	}
}

func deployFiles(t *testing.T, patterns ...string) []string {
	t.Helper()
	var files []string
	for _, p := range patterns {
		m, err := filepath.Glob(p)
		require.NoError(t, err)
		files = append(files, m...)
	}
	require.NotEmpty(t, files)
	return files
}

// Every YAML file under deploy/compose and deploy/k8s parses.
func TestDeployYAMLParses(t *testing.T) {
	for _, f := range deployFiles(t, "../compose/*.yml", "../compose/grafana/provisioning/*/*.yml", "../k8s/*.yaml") {
		require.NotEmpty(t, yamlDocs(t, f), "%s has no document", f)
	}
}

// Every COUPONLINK_* variable the deploy files set is one couponlink reads
// (named in cmd/couponlink or in the shared flag groups of
// internal/settings, or listed in the generated "Every variable" section
// of docs/configuration.md, which TestReference keeps equal to what the
// commands read, names built in code included), so a renamed flag cannot
// leave them stale.
func TestDeployEnvVarsExist(t *testing.T) {
	var src strings.Builder
	for _, f := range deployFiles(t, "../../cmd/couponlink/*.go", "../../internal/settings/*.go") {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		src.Write(raw)
	}
	page, err := os.ReadFile("../../docs/configuration.md")
	require.NoError(t, err)
	_, vars, ok := strings.Cut(string(page), "## Every variable")
	require.True(t, ok, "docs/configuration.md has no \"Every variable\" section")
	vars, _, _ = strings.Cut(vars, "<!-- end generated: flags -->")
	for _, m := range regexp.MustCompile("`(COUPONLINK_[A-Z0-9_]+)`").FindAllStringSubmatch(vars, -1) {
		src.WriteString(`"` + m[1] + `"`)
	}
	known := map[string]bool{}
	for _, m := range regexp.MustCompile(`"(COUPONLINK_[A-Z0-9_]+)"`).FindAllStringSubmatch(src.String(), -1) {
		known[m[1]] = true
	}
	require.NotEmpty(t, known)
	used := regexp.MustCompile(`\bCOUPONLINK_[A-Z0-9_]+\b`)
	for _, f := range deployFiles(t, "../compose/*.yml", "../compose/Dockerfile", "../k8s/*.yaml", "../systemd/*") {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, v := range used.FindAllString(string(raw), -1) {
			require.True(t, known[v], "%s sets %s, which couponlink does not read", f, v)
		}
	}
}

// The k8s workloads: probes and scrape annotations on the port the process
// listens on; the cdc runs 2 replicas (leader lock), the reconciler 1.
func TestK8sWorkloads(t *testing.T) {
	want := map[string]struct {
		replicas int
		port     int
	}{"couponlink-api": {2, 8080}, "couponlink-cdc": {2, 9464}, "couponlink-reconcile": {1, 9465}}
	seen := map[string]bool{}
	for _, f := range deployFiles(t, "../k8s/*.yaml") {
		for _, doc := range yamlDocs(t, f) {
			if doc["kind"] != "Deployment" {
				continue
			}
			name := dig(t, doc, "metadata", "name").(string)
			w, ok := want[name]
			require.True(t, ok, "unexpected Deployment %s", name)
			seen[name] = true
			require.Equal(t, w.replicas, dig(t, doc, "spec", "replicas"), name)
			tpl := dig(t, doc, "spec", "template").(map[string]any)
			ann := dig(t, tpl, "metadata", "annotations").(map[string]any)
			require.Equal(t, "true", ann["prometheus.io/scrape"], name)
			require.Equal(t, itoa(w.port), ann["prometheus.io/port"], name)
			c := dig(t, tpl, "spec", "containers").([]any)[0].(map[string]any)
			for _, probe := range []string{"readinessProbe", "livenessProbe"} {
				require.Equal(t, "/healthz", dig(t, c, probe, "httpGet", "path"), "%s %s", name, probe)
				require.Equal(t, w.port, dig(t, c, probe, "httpGet", "port"), "%s %s", name, probe)
			}
			args := strings.Join(toStrings(c["args"]), " ")
			if name != "couponlink-api" { // the metrics listener must not stay on 127.0.0.1
				require.Contains(t, args, "-metrics-addr :"+itoa(w.port), name)
			}
		}
	}
	require.Len(t, seen, len(want))
}

// prometheus.yml scrapes the three jobs the alerts name.
func TestComposePrometheusJobs(t *testing.T) {
	doc := yamlDocs(t, "../compose/prometheus.yml")[0]
	jobs := map[string]bool{}
	for _, sc := range doc["scrape_configs"].([]any) {
		jobs[sc.(map[string]any)["job_name"].(string)] = true
	}
	for _, j := range []string{"couponlink-api", "couponlink-cdc", "couponlink-reconcile"} {
		require.True(t, jobs[j], "prometheus.yml does not scrape job %s", j)
	}
	_, err := os.Stat("../../alerts/couponlink.rules.yml")
	require.NoError(t, err, "the rule file docker-compose.yml mounts")
	_, err = os.Stat("../grafana/couponlink.json")
	require.NoError(t, err, "the dashboard docker-compose.yml provisions")
}

func dig(t *testing.T, m map[string]any, keys ...string) any {
	t.Helper()
	var v any = m
	for _, k := range keys {
		mm, ok := v.(map[string]any)
		require.True(t, ok, "%v: %q is not under a mapping", keys, k)
		v, ok = mm[k]
		require.True(t, ok, "%v: no %q", keys, k)
	}
	return v
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

func itoa(n int) string { return strconv.Itoa(n) }
