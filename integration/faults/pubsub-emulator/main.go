// Command pubsub-emulator serves cloud.google.com/go/pubsub/v2/pstest over
// the network, for the fault-tolerance tests in integration/faults: the
// bucket's notifications are published to its topic by the GCS emulator and
// pulled by the bridges, each in its own container.
//
// A real Pub/Sub keeps its topics and subscriptions while a client or a zone
// restarts; pstest keeps everything in memory. So this program creates the
// topic and the subscriptions it is given every time it starts, and a
// restart loses only the messages in flight, which is the failure the tests
// want.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
)

func main() {
	listen := flag.String("listen", "0.0.0.0:8085", "host:port to serve the Pub/Sub gRPC API on")
	topic := flag.String("topic", "", "projects/P/topics/T to create at start")
	var subs []string
	flag.Func("subscription", "projects/P/subscriptions/S on -topic to create at start; repeatable", func(v string) error {
		subs = append(subs, v)
		return nil
	})
	ackDeadline := flag.Int("ack-deadline", 10, "seconds before an unacknowledged message is delivered again")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(*listen, *topic, subs, int32(*ackDeadline), log); err != nil {
		fmt.Fprintln(os.Stderr, "pubsub-emulator:", err)
		os.Exit(1)
	}
}

func run(listen, topic string, subs []string, ackDeadline int32, log *slog.Logger) error {
	if topic == "" && len(subs) > 0 {
		return errors.New("-subscription needs -topic")
	}
	if topic != "" && !strings.Contains(topic, "/topics/") {
		return fmt.Errorf("-topic %q: want projects/PROJECT/topics/TOPIC", topic)
	}
	srv := pstest.NewServerWithAddress(listen)
	defer srv.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if topic != "" {
		if _, err := srv.GServer.CreateTopic(ctx, &pubsubpb.Topic{Name: topic}); err != nil {
			return fmt.Errorf("create %s: %w", topic, err)
		}
	}
	for _, s := range subs {
		if !strings.Contains(s, "/subscriptions/") {
			return fmt.Errorf("-subscription %q: want projects/PROJECT/subscriptions/SUBSCRIPTION", s)
		}
		if _, err := srv.GServer.CreateSubscription(ctx, &pubsubpb.Subscription{Name: s, Topic: topic, AckDeadlineSeconds: ackDeadline}); err != nil {
			return fmt.Errorf("create %s: %w", s, err)
		}
	}
	log.Info("pubsub emulator listening", "addr", srv.Addr, "topic", topic, "subscriptions", strings.Join(subs, ","))
	<-ctx.Done()
	return nil
}
