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
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(addrs, ",")...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatalf("kafka consumer: %v", err)
	}
	defer cl.Close()
	count, bodies = map[string]int{}, map[string]string{}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			n++
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
