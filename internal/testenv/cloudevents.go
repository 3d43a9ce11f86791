package testenv

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/url"
	"time"
)

// CheckCloudEvent checks the attributes of a CloudEvents 1.0 event
// strictly: the required specversion ("1.0"), id (not empty), source (a
// non-empty URI-reference) and type (not empty); time, when present, RFC
// 3339; datacontenttype, when present, a media type; every attribute name
// of lower-case letters and digits only, with a non-empty value.
func CheckCloudEvent(attrs map[string]string) error {
	for _, k := range []string{"specversion", "id", "source", "type"} {
		if _, ok := attrs[k]; !ok {
			return fmt.Errorf("required attribute %s missing", k)
		}
	}
	for k, v := range attrs {
		if k == "" {
			return errors.New("an attribute with an empty name")
		}
		for _, c := range k {
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9') {
				return fmt.Errorf("attribute name %q: not lower-case letters and digits", k)
			}
		}
		if v == "" {
			return fmt.Errorf("attribute %s is empty", k)
		}
	}
	if v := attrs["specversion"]; v != "1.0" {
		return fmt.Errorf("specversion %q, not 1.0", v)
	}
	if _, err := url.Parse(attrs["source"]); err != nil {
		return fmt.Errorf("source %q is not a URI-reference: %w", attrs["source"], err)
	}
	if v, ok := attrs["time"]; ok {
		if _, err := time.Parse(time.RFC3339Nano, v); err != nil {
			return fmt.Errorf("time %q is not RFC 3339: %w", v, err)
		}
	}
	if v, ok := attrs["datacontenttype"]; ok {
		if _, _, err := mime.ParseMediaType(v); err != nil {
			return fmt.Errorf("datacontenttype %q: %w", v, err)
		}
	}
	return nil
}

// StructuredCloudEvent parses a structured-mode CloudEvents JSON envelope
// and checks it (CheckCloudEvent; datacontenttype required and JSON, data
// present; every other member a string): its attributes and its data.
func StructuredCloudEvent(body []byte) (map[string]string, json.RawMessage, error) {
	var members map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&members); err != nil {
		return nil, nil, fmt.Errorf("not a JSON object: %w", err)
	}
	data, ok := members["data"]
	if !ok {
		return nil, nil, errors.New("no data")
	}
	delete(members, "data")
	attrs := map[string]string{}
	for k, raw := range members {
		var v string
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, nil, fmt.Errorf("attribute %s is not a string: %s", k, raw)
		}
		attrs[k] = v
	}
	if err := CheckCloudEvent(attrs); err != nil {
		return nil, nil, err
	}
	if attrs["datacontenttype"] != "application/json" {
		return nil, nil, fmt.Errorf("datacontenttype %q, not application/json", attrs["datacontenttype"])
	}
	return attrs, data, nil
}
