package webhook

import (
	"encoding/json"
	"fmt"
	"time"
)

// Event formats: what the sinks send of a stored body.
const (
	FormatNative      = "native"      // the stored body, byte for byte
	FormatCloudEvents = "cloudevents" // a CloudEvents 1.0 event (CloudEvent)
)

// Format is how the sinks send the events: native, or CloudEvents 1.0
// with Source as the events' source. The zero Format is native.
type Format struct {
	CloudEvents bool
	Source      string // the CloudEvents source, a URI-reference (CloudEventsSource)
}

// ParseFormat is the Format of a -event-format value ("native" or "",
// "cloudevents"); checkpoint names the cdc, the events' source.
func ParseFormat(name, checkpoint string) (Format, error) {
	switch name {
	case "", FormatNative:
		return Format{}, nil
	case FormatCloudEvents:
		return Format{CloudEvents: true, Source: CloudEventsSource(checkpoint)}, nil
	default:
		return Format{}, fmt.Errorf("event format %q: not %s or %s", name, FormatNative, FormatCloudEvents)
	}
}

// CloudEventsSource is the source of a cdc's events: couponlink/cdc/
// followed by its checkpoint name (path-escaped), a relative
// URI-reference.
func CloudEventsSource(checkpoint string) string {
	if checkpoint == "" {
		checkpoint = "default"
	}
	return "couponlink/cdc/" + pathEscape(checkpoint)
}

// pathEscape escapes what a URI path segment cannot hold as is.
func pathEscape(s string) string {
	const hex = "0123456789ABCDEF"
	var b []byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b = append(b, c)
			continue
		}
		b = append(b, '%', hex[c>>4], hex[c&15])
	}
	return string(b)
}

// CloudEvents attribute names and values.
const (
	CloudEventsSpecVersion = "1.0"
	CloudEventsTypePrefix  = "io.couponlink." // + the event type
	CloudEventsContentType = "application/cloudevents+json"
)

// CloudEvent is m as a CloudEvents 1.0 event: the structured-mode JSON
// envelope (specversion, id, source, type, time, datacontenttype, and the
// stored body, whole, as data), and the attributes alone, by name, for a
// binary-mode sink (which sends the stored body as it is, with the
// attributes in its headers; datacontenttype is application/json). It
// fails only on a stored body that is not JSON.
func CloudEvent(m Message, source string) ([]byte, map[string]string, error) {
	var b struct {
		Time string `json:"time"`
	}
	if err := json.Unmarshal(m.Body, &b); err != nil {
		return nil, nil, fmt.Errorf("event %s: the stored body is not JSON: %w", m.ID, err)
	}
	attrs := map[string]string{
		"specversion":     CloudEventsSpecVersion,
		"id":              m.ID,
		"source":          source,
		"type":            CloudEventsTypePrefix + m.Type,
		"datacontenttype": "application/json",
	}
	if t, err := time.Parse(time.RFC3339Nano, b.Time); err == nil {
		attrs["time"] = t.UTC().Format(time.RFC3339Nano)
	}
	env, err := json.Marshal(struct {
		SpecVersion     string          `json:"specversion"`
		ID              string          `json:"id"`
		Source          string          `json:"source"`
		Type            string          `json:"type"`
		Time            string          `json:"time,omitempty"`
		DataContentType string          `json:"datacontenttype"`
		Data            json.RawMessage `json:"data"`
	}{attrs["specversion"], attrs["id"], attrs["source"], attrs["type"], attrs["time"], attrs["datacontenttype"], m.Body})
	if err != nil {
		return nil, nil, fmt.Errorf("event %s: CloudEvents envelope: %w", m.ID, err)
	}
	return env, attrs, nil
}
