// Command kstatus reads one Kubernetes object as JSON on stdin and prints, as JSON, the status
// that sigs.k8s.io/cli-utils' kstatus computes for it: what Flux (and `kubectl wait
// --for=...` style tools built on kstatus) read as an object's health.
//
// Built by hack/k8s/ensure-binaries.sh kstatus; used by tests/gitops/test_kstatus.py, which
// feeds it our custom resources as the operator left them on the API server.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

type answer struct {
	Status     string   `json:"status"`
	Message    string   `json:"message"`
	Conditions []string `json:"conditions"`
}

func main() {
	raw, err := io.ReadAll(os.Stdin)
	if err != nil {
		fail(err)
	}
	// Unstructured's own decoding keeps integers int64 (generation, observedGeneration),
	// which kstatus reads as such; encoding/json would make them float64.
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(raw); err != nil {
		fail(err)
	}
	res, err := status.Compute(obj)
	if err != nil {
		fail(err)
	}
	out := answer{Status: res.Status.String(), Message: res.Message, Conditions: []string{}}
	for _, c := range res.Conditions {
		out.Conditions = append(out.Conditions, fmt.Sprintf("%s=%s", c.Type, c.Status))
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "kstatus:", err)
	os.Exit(1)
}
