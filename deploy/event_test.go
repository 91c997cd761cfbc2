package deploy

import (
	"errors"
	"testing"
	"time"

	"github.com/bucketops/bucketops/store"
)

func TestParseNotification(t *testing.T) {
	loc := store.Location{Bucket: "releases", Prefix: "team"}
	received := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	attrs := func(mod func(map[string]string)) map[string]string {
		a := map[string]string{
			"eventType": "OBJECT_FINALIZE", "bucketId": "releases", "objectId": "team/prod/payments/manifests.yaml",
			"objectGeneration": "1733150000123456", "eventTime": "2026-12-02T09:59:59Z", "payloadFormat": "JSON_API_V1",
		}
		if mod != nil {
			mod(a)
		}
		return a
	}
	payload := `{"kind":"storage#object","name":"team/prod/payments/manifests.yaml","bucket":"releases","generation":"1733150000123456","updated":"2026-12-02T09:59:59.250Z"}`

	tests := []struct {
		name  string
		attrs map[string]string
		data  string
		want  error // nil: an event
	}{
		{"finalize with payload", attrs(nil), payload, nil},
		{"finalize without payload", attrs(func(a map[string]string) { a["payloadFormat"] = "NONE" }), "", nil},
		{"delete", attrs(func(a map[string]string) { a["eventType"] = "OBJECT_DELETE" }), "", ErrIgnored},
		{"archive", attrs(func(a map[string]string) { a["eventType"] = "OBJECT_ARCHIVE" }), "", ErrIgnored},
		{"foreign bucket", attrs(func(a map[string]string) { a["bucketId"] = "other" }), "", ErrIgnored},
		{"outside the prefix", attrs(func(a map[string]string) { a["objectId"] = "prod/payments/manifests.yaml" }), "", ErrIgnored},
		{"not a release object", attrs(func(a map[string]string) { a["objectId"] = "team/prod/payments/notes.txt" }), "", ErrIgnored},
		{"invalid app path", attrs(func(a map[string]string) { a["objectId"] = "team/../x/manifests.yaml" }), "", ErrIgnored},
		{"missing generation", attrs(func(a map[string]string) { delete(a, "objectGeneration") }), "", ErrMalformed},
		{"bad generation", attrs(func(a map[string]string) { a["objectGeneration"] = "12x" }), "", ErrMalformed},
		{"zero generation", attrs(func(a map[string]string) { a["objectGeneration"] = "0" }), "", ErrMalformed},
		{"no attributes", map[string]string{}, payload, ErrMalformed},
		{"garbled payload", attrs(nil), `{"name":`, ErrMalformed},
		{"payload disagrees", attrs(nil), `{"name":"team/prod/other/manifests.yaml","bucket":"releases","generation":"1733150000123456"}`, ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, err := ParseNotification(loc, tt.attrs, []byte(tt.data), received)
			if tt.want != nil {
				if !errors.Is(err, tt.want) {
					t.Fatalf("err = %v, want %v", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ev.App != "prod/payments" || ev.Generation != 1733150000123456 {
				t.Errorf("event = %+v, want prod/payments@1733150000123456", ev)
			}
		})
	}

	// The payload's updated time is the most precise; eventTime next.
	ev, _ := ParseNotification(loc, attrs(nil), []byte(payload), received)
	if want := time.Date(2026, 12, 2, 9, 59, 59, 250e6, time.UTC); !ev.Time.Equal(want) {
		t.Errorf("time = %s, want the payload's updated %s", ev.Time, want)
	}
	ev, _ = ParseNotification(loc, attrs(nil), nil, received)
	if want := time.Date(2026, 12, 2, 9, 59, 59, 0, time.UTC); !ev.Time.Equal(want) {
		t.Errorf("time = %s, want eventTime %s", ev.Time, want)
	}
	ev, _ = ParseNotification(loc, attrs(func(a map[string]string) { delete(a, "eventTime") }), nil, received)
	if !ev.Time.Equal(received) {
		t.Errorf("time = %s, want the receipt time %s", ev.Time, received)
	}
}
