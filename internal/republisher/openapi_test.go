package republisher

import (
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The OpenAPI document and the handler's JSON types must name the same fields.
func TestOpenAPIMatchesTheHandlerTypes(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "api", "republisher", "openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths      map[string]any `json:"paths"`
		Components struct {
			Schemas map[string]struct {
				Properties map[string]any `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/v1/receive", "/v1/ack", "/healthz"} {
		if doc.Paths[p] == nil {
			t.Errorf("openapi.yaml lacks path %s", p)
		}
	}
	for name, typ := range map[string]reflect.Type{
		"ReceiveRequest": reflect.TypeOf(ReceiveRequest{}), "ReceiveResponse": reflect.TypeOf(ReceiveResponse{}),
		"ReceivedRecord": reflect.TypeOf(ReceivedRecord{}), "AckRequest": reflect.TypeOf(AckRequest{}), "AckResponse": reflect.TypeOf(AckResponse{}),
	} {
		var fields, documented []string
		for i := 0; i < typ.NumField(); i++ {
			fields = append(fields, strings.Split(typ.Field(i).Tag.Get("json"), ",")[0])
		}
		for k := range doc.Components.Schemas[name].Properties {
			documented = append(documented, k)
		}
		sort.Strings(fields)
		sort.Strings(documented)
		if !reflect.DeepEqual(fields, documented) {
			t.Errorf("%s: Go fields %v, openapi.yaml properties %v", name, fields, documented)
		}
	}
}
