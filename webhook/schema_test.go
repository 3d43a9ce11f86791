package webhook

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// events.openapi.json (the events' schemas for the OpenAPI document) has
// a webhook entry and a data schema for every event type, and no other.
func TestEventSchemasCoverEveryType(t *testing.T) {
	raw, err := os.ReadFile("events.openapi.json")
	require.NoError(t, err)
	var doc struct {
		Webhooks   map[string]json.RawMessage `json:"webhooks"`
		Components struct {
			Schemas map[string]struct {
				Properties map[string]struct {
					Enum []string `json:"enum"`
				} `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(raw, &doc))
	var hooks []string
	for k := range doc.Webhooks {
		hooks = append(hooks, k)
	}
	require.ElementsMatch(t, Types, hooks, "webhooks of events.openapi.json")
	enum := doc.Components.Schemas["Event"].Properties["type"].Enum
	require.ElementsMatch(t, Types, enum, "Event.type's enum")
}
