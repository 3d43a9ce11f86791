package webhook

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The API's OpenAPI document (coupon/httpapi/openapi.json, served at
// /openapi.json) is the one source of the events' schemas: it has a
// webhook entry and a data schema for every event type, and no other.
func TestEventSchemasCoverEveryType(t *testing.T) {
	raw, err := os.ReadFile("../coupon/httpapi/openapi.json")
	require.NoError(t, err)
	var doc struct {
		Webhooks   map[string]json.RawMessage `json:"webhooks"`
		Components struct {
			Schemas map[string]struct {
				Properties map[string]struct {
					Enum []any `json:"enum"` // some are numbers
				} `json:"properties"`
				OneOf []struct {
					Properties map[string]struct {
						Enum []string `json:"enum"`
						Ref  string   `json:"$ref"`
					} `json:"properties"`
				} `json:"oneOf"`
			} `json:"schemas"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(raw, &doc))
	var hooks []string
	for k := range doc.Webhooks {
		hooks = append(hooks, k)
	}
	require.ElementsMatch(t, Types, hooks, "webhooks of coupon/httpapi/openapi.json")
	event := doc.Components.Schemas["Event"]
	var enum []string
	for _, e := range event.Properties["type"].Enum {
		enum = append(enum, e.(string))
	}
	require.ElementsMatch(t, Types, enum, "Event.type's enum")
	var variants []string
	for _, v := range event.OneOf {
		require.Len(t, v.Properties["type"].Enum, 1)
		variants = append(variants, v.Properties["type"].Enum[0])
		data := strings.TrimPrefix(v.Properties["data"].Ref, "#/components/schemas/")
		assert.Contains(t, doc.Components.Schemas, data, "the data schema of %s", v.Properties["type"].Enum[0])
	}
	assert.ElementsMatch(t, Types, variants, "Event's oneOf has a data schema per type")
}
