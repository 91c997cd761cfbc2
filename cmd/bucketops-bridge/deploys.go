package main

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"cloud.google.com/go/storage"

	"github.com/bucketops/bucketops/store"
)

var subscriptionName = regexp.MustCompile(`^projects/([^/]+)/subscriptions/[^/]+$`)

// subscribe connects to --subscription with the default credentials.
func subscribe(ctx context.Context, name string) (*pubsub.Subscriber, func(), error) {
	project := subscriptionName.FindStringSubmatch(name)[1]
	client, err := pubsub.NewClient(ctx, project)
	if err != nil {
		return nil, nil, fmt.Errorf("pubsub: %w", err)
	}
	return client.Subscriber(name), func() { client.Close() }, nil
}

// Local mode's Pub/Sub: the in-process pstest server, with the topic the
// emulator's bucket notification publishes to and the subscription the
// bridge pulls from, as a real bucket would have them.
const (
	localProject      = "bucketops-local"
	localTopic        = "projects/" + localProject + "/topics/bucketops-releases"
	localSubscription = "projects/" + localProject + "/subscriptions/bucketops-bridge"
)

// startLocalPubsub starts pstest, points this process's Pub/Sub clients at
// it (fakestorage finds it through PUBSUB_EMULATOR_HOST, as its docs say),
// creates the topic and subscription, and adds the bucket notification
// through the storage API, which is what `gcloud storage buckets
// notifications create` does.
func startLocalPubsub(ctx context.Context, client *storage.Client, loc store.Location) (*pubsub.Subscriber, func(), error) {
	srv := pstest.NewServer()
	if err := os.Setenv("PUBSUB_EMULATOR_HOST", srv.Addr); err != nil {
		srv.Close()
		return nil, nil, err
	}
	ps, err := pubsub.NewClient(ctx, localProject)
	if err != nil {
		srv.Close()
		return nil, nil, fmt.Errorf("local pubsub: %w", err)
	}
	stop := func() {
		ps.Close()
		srv.Close()
	}
	if _, err := ps.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: localTopic}); err != nil {
		stop()
		return nil, nil, fmt.Errorf("local pubsub topic: %w", err)
	}
	if _, err := ps.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
		Name: localSubscription, Topic: localTopic, AckDeadlineSeconds: 10,
	}); err != nil {
		stop()
		return nil, nil, fmt.Errorf("local pubsub subscription: %w", err)
	}
	_, err = client.Bucket(loc.Bucket).AddNotification(ctx, &storage.Notification{
		TopicProjectID: localProject,
		TopicID:        strings.TrimPrefix(localTopic, "projects/"+localProject+"/topics/"),
		PayloadFormat:  storage.JSONPayload,
		EventTypes:     []string{storage.ObjectFinalizeEvent},
	})
	if err != nil {
		stop()
		return nil, nil, fmt.Errorf("local bucket notification: %w", err)
	}
	return ps.Subscriber(localSubscription), stop, nil
}
