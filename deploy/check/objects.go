package check

import (
	"bytes"
	"fmt"
	"regexp"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// ServiceMonitor is the part of prometheus-operator's CRD
// (monitoring.coreos.com/v1) the chart uses; decoding into it strictly
// catches a misspelt field among those.
type ServiceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port          string `json:"port"`
			Path          string `json:"path"`
			Interval      string `json:"interval"`
			ScrapeTimeout string `json:"scrapeTimeout"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// objects are the decoded objects of one rendering, by kind.
type objects struct {
	configMaps  []*corev1.ConfigMap
	deployments []*appsv1.Deployment
	services    []*corev1.Service
	pdbs        []*policyv1.PodDisruptionBudget
	hpas        []*autoscalingv2.HorizontalPodAutoscaler
	monitors    []*ServiceMonitor
	policies    []*networkingv1.NetworkPolicy
}

var docSeparator = regexp.MustCompile(`(?m)^---\s*$`)

// decode splits helm's rendered files into YAML documents and decodes each
// strictly into the type its apiVersion and kind name.
func decode(rendered map[string]string) (*objects, error) {
	names := make([]string, 0, len(rendered))
	for name := range rendered {
		names = append(names, name)
	}
	sort.Strings(names)
	o := &objects{}
	for _, name := range names {
		if strings.HasSuffix(name, ".tpl") || strings.HasSuffix(name, "NOTES.txt") {
			continue
		}
		for i, doc := range docSeparator.Split(rendered[name], -1) {
			if isBlank(doc) {
				continue
			}
			if err := o.add([]byte(doc)); err != nil {
				return nil, fmt.Errorf("%s, document %d: %w", name, i, err)
			}
		}
	}
	return o, nil
}

func isBlank(doc string) bool {
	for _, line := range strings.Split(doc, "\n") {
		if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
			return false
		}
	}
	return true
}

func (o *objects) add(doc []byte) error {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return fmt.Errorf("read apiVersion and kind: %w", err)
	}
	strict := func(v any) error {
		if err := yaml.UnmarshalStrict(doc, v); err != nil {
			return fmt.Errorf("%s %s: %w", tm.APIVersion, tm.Kind, err)
		}
		return nil
	}
	switch key := tm.APIVersion + " " + tm.Kind; key {
	case "v1 ConfigMap":
		return decodeInto(strict, &o.configMaps)
	case "apps/v1 Deployment":
		return decodeInto(strict, &o.deployments)
	case "v1 Service":
		return decodeInto(strict, &o.services)
	case "policy/v1 PodDisruptionBudget":
		return decodeInto(strict, &o.pdbs)
	case "autoscaling/v2 HorizontalPodAutoscaler":
		return decodeInto(strict, &o.hpas)
	case "monitoring.coreos.com/v1 ServiceMonitor":
		return decodeInto(strict, &o.monitors)
	case "networking.k8s.io/v1 NetworkPolicy":
		return decodeInto(strict, &o.policies)
	default:
		return fmt.Errorf("unexpected object %q:\n%s", key, bytes.TrimSpace(doc))
	}
}

func decodeInto[T any](strict func(any) error, list *[]*T) error {
	v := new(T)
	if err := strict(v); err != nil {
		return err
	}
	*list = append(*list, v)
	return nil
}
