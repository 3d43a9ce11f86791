package testenv

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// OwnKafka starts an in-process Kafka of 3 brokers (kfake, franz-go's
// implementation of the protocol; no Apache Kafka runs here) holding
// topics (3 partitions each) and returns its brokers' addresses,
// comma-separated as a kafka:// sink URL takes them. It stops when the
// test ends.
func OwnKafka(t testing.TB, topics ...string) string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(3, topics...))
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return strings.Join(c.ListenAddrs(), ",")
}

// KafkaRecords reads topic from its start, on the brokers at addrs, until
// a second passes without a record: per event id (the id header), how
// many records, and each one's value.
func KafkaRecords(t testing.TB, addrs, topic string) (count map[string]int, bodies map[string]string) {
	t.Helper()
	cl := KafkaConsumer(t, addrs, topic)
	defer cl.Close()
	count, bodies = map[string]int{}, map[string]string{}
	for {
		n := KafkaPollSecond(cl, func(r *kgo.Record) {
			for _, h := range r.Headers {
				if h.Key == "id" { // streams.KafkaHeaderID
					count[string(h.Value)]++
					bodies[string(h.Value)] = string(r.Value)
				}
			}
		})
		if n == 0 {
			return count, bodies
		}
	}
}

// KafkaConsumer is a client of the brokers at addrs that reads topics
// from their start; the caller closes it.
func KafkaConsumer(t testing.TB, addrs string, topics ...string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(addrs, ",")...), kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatalf("kafka consumer: %v", err)
	}
	return cl
}

// KafkaPollSecond polls cl for up to a second, gives each record fetched
// to each, and returns how many there were: 0 once nothing more comes.
func KafkaPollSecond(cl *kgo.Client, each func(*kgo.Record)) int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	n := 0
	cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
		n++
		each(r)
	})
	return n
}
