package deploy

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/bucketops/bucketops/store"
)

// Where an event came from.
const (
	SourcePush = "push"
	SourcePull = "pull"
	SourcePoll = "poll"
)

// Event says that an app has a new generation in the bucket.
type Event struct {
	App        string
	Generation int64
	// Source is SourcePush, SourcePull or SourcePoll.
	Source string
	// Time is when the generation was written, as the bucket says: what the
	// finalize-to-refresh latency is measured from.
	Time time.Time
	// Received is when the bridge got the event: what the
	// notify-to-refresh latency is measured from.
	Received time.Time
}

var (
	// ErrIgnored marks a well-formed notification that isn't about a
	// release of ours: another event type, bucket or object.
	ErrIgnored = errors.New("ignored notification")
	// ErrMalformed marks a notification that can't be read.
	ErrMalformed = errors.New("malformed notification")
)

// The storage notification's attributes and payload, as documented in
// https://cloud.google.com/storage/docs/pubsub-notifications.
const (
	attrEventType  = "eventType"
	attrBucket     = "bucketId"
	attrObject     = "objectId"
	attrGeneration = "objectGeneration"
	attrEventTime  = "eventTime"
	attrFormat     = "payloadFormat"

	eventFinalize = "OBJECT_FINALIZE"
	formatJSON    = "JSON_API_V1"
)

// objectPayload is the part of a JSON_API_V1 payload we read.
type objectPayload struct {
	Name       string `json:"name"`
	Bucket     string `json:"bucket"`
	Generation string `json:"generation"`
	Updated    string `json:"updated"`
}

// ParseNotification turns a Cloud Storage notification (a Pub/Sub message's
// attributes and data) into an Event for a release object in loc. It
// returns an error wrapping ErrIgnored for events that aren't an
// OBJECT_FINALIZE of a release object in loc, and ErrMalformed for messages
// that don't read as a storage notification; either way the message must
// not be redelivered.
func ParseNotification(loc store.Location, attrs map[string]string, data []byte, received time.Time) (Event, error) {
	for _, k := range []string{attrEventType, attrBucket, attrObject, attrGeneration} {
		if attrs[k] == "" {
			return Event{}, fmt.Errorf("%w: attribute %s missing; is this a Cloud Storage notification?", ErrMalformed, k)
		}
	}
	gen, err := strconv.ParseInt(attrs[attrGeneration], 10, 64)
	if err != nil || gen <= 0 {
		return Event{}, fmt.Errorf("%w: objectGeneration %q is not a positive number", ErrMalformed, attrs[attrGeneration])
	}
	ev := Event{Generation: gen, Time: received, Received: received}
	if t, err := time.Parse(time.RFC3339Nano, attrs[attrEventTime]); err == nil {
		ev.Time = t
	}
	if len(data) > 0 && (attrs[attrFormat] == "" || attrs[attrFormat] == formatJSON) {
		var p objectPayload
		if err := json.Unmarshal(data, &p); err != nil {
			return Event{}, fmt.Errorf("%w: data is not a JSON_API_V1 object: %v", ErrMalformed, err)
		}
		if (p.Name != "" && p.Name != attrs[attrObject]) || (p.Bucket != "" && p.Bucket != attrs[attrBucket]) ||
			(p.Generation != "" && p.Generation != attrs[attrGeneration]) {
			return Event{}, fmt.Errorf("%w: data names %s/%s#%s but the attributes name %s/%s#%s", ErrMalformed,
				p.Bucket, p.Name, p.Generation, attrs[attrBucket], attrs[attrObject], attrs[attrGeneration])
		}
		// updated has sub-second precision; eventTime often doesn't.
		if t, err := time.Parse(time.RFC3339Nano, p.Updated); err == nil {
			ev.Time = t
		}
	}
	if et := attrs[attrEventType]; et != eventFinalize {
		return Event{}, fmt.Errorf("%w: event type %s (only %s publishes a release)", ErrIgnored, et, eventFinalize)
	}
	if b := attrs[attrBucket]; b != loc.Bucket {
		return Event{}, fmt.Errorf("%w: bucket %s is not %s", ErrIgnored, b, loc.Bucket)
	}
	app, ok := loc.App(attrs[attrObject])
	if !ok {
		return Event{}, fmt.Errorf("%w: object %s is not a release object under %s", ErrIgnored, attrs[attrObject], loc)
	}
	ev.App = app
	return ev, nil
}
