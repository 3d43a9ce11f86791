package streams_test

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"encoding/hex"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/couponlink/couponlink/internal/cdctest"
	"github.com/couponlink/couponlink/internal/testenv"
	"github.com/couponlink/couponlink/streams"
	"github.com/couponlink/couponlink/webhook"
)

// kafkaCluster is an in-process Kafka of 3 brokers (kfake).
func kafkaCluster(t *testing.T, opts ...kfake.Opt) (*kfake.Cluster, string) {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(3)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c, strings.Join(c.ListenAddrs(), ",")
}

// kafkaMessages are n events of every type, templates 1 to 4 and, every
// fifth, none (keyed by the type).
func kafkaMessages(t testing.TB, n int) []webhook.Message {
	t.Helper()
	out := make([]webhook.Message, n)
	for i := range out {
		e := webhook.Event{ID: webhook.NewID(), Type: webhook.Types[i%len(webhook.Types)], Time: time.Now().UTC(),
			Channel: "app", Data: map[string]any{"seq": i}}
		if i%5 != 0 {
			e.Template = int64(1 + i%4)
		}
		body, err := webhook.JSON(e)
		require.NoError(t, err)
		out[i] = webhook.Message{OutboxID: int64(i + 1), ID: e.ID, Type: e.Type, Body: body}
	}
	return out
}

type kafkaRecord struct {
	topic, key, id, typ string
	partition           int32
	body                string
	headers             map[string]string
}

// consumeKafka reads topics from the start until it has records of at
// least want ids and nothing more comes for a second.
func consumeKafka(t *testing.T, addrs string, want int, topics ...string) []kafkaRecord {
	t.Helper()
	cl := testenv.KafkaConsumer(t, addrs, topics...)
	defer cl.Close()
	var out []kafkaRecord
	ids := map[string]bool{}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		n := testenv.KafkaPollSecond(cl, func(r *kgo.Record) {
			kr := kafkaRecord{topic: r.Topic, key: string(r.Key), partition: r.Partition, body: string(r.Value), headers: map[string]string{}}
			for _, h := range r.Headers {
				kr.headers[h.Key] = string(h.Value)
				switch h.Key {
				case streams.KafkaHeaderID:
					kr.id = string(h.Value)
				case streams.KafkaHeaderType:
					kr.typ = string(h.Value)
				}
			}
			out = append(out, kr)
			ids[kr.id] = true
		})
		if n == 0 && len(ids) >= want {
			return out
		}
	}
	per := map[int32]int{}
	for _, r := range out {
		per[r.partition]++
	}
	t.Fatalf("consumed %d Kafka records of %d ids, not at least %d; per partition %v", len(out), len(ids), want, per)
	return nil
}

// requireEveryEventOnce checks the consumed records against msgs after a
// dedup on the id header: each event once, its body, key and type; per
// key, the first copies in msgs' order, in one partition. It returns how
// many copies were duplicates.
func requireEveryEventOnce(t *testing.T, msgs []webhook.Message, recs []kafkaRecord) int {
	t.Helper()
	return everyEventOnce(t, msgs, recs, true)
}

// everyEventOnce is requireEveryEventOnce; with inOrder false, the order
// per key is not checked (around a refused record, see
// TestKafkaTooLargeRefused).
func everyEventOnce(t *testing.T, msgs []webhook.Message, recs []kafkaRecord, inOrder bool) int {
	t.Helper()
	byID := map[string]webhook.Message{}
	for _, m := range msgs {
		byID[m.ID] = m
	}
	seen := map[string]bool{}
	order := map[string][]string{}  // key: ids as first consumed, per partition in offset order
	partition := map[string]int32{} // key: its partition
	dupes := 0
	for _, r := range recs {
		m, ok := byID[r.id]
		require.True(t, ok, "a record with an unknown id %q", r.id)
		if seen[r.id] {
			dupes++
			continue
		}
		seen[r.id] = true
		require.Equal(t, string(m.Body), r.body)
		require.Equal(t, m.Type, r.typ)
		require.Equal(t, streams.RecordKey(m), r.key)
		if p, ok := partition[r.topic+"/"+r.key]; ok {
			require.Equal(t, p, r.partition, "key %s in two partitions", r.key)
		}
		partition[r.topic+"/"+r.key] = r.partition
		order[r.topic+"/"+r.key] = append(order[r.topic+"/"+r.key], r.id)
	}
	require.Len(t, seen, len(msgs), "not every event consumed")
	want := map[string][]string{}
	for _, m := range msgs {
		for _, r := range recs {
			if r.id == m.ID {
				k := r.topic + "/" + r.key
				want[k] = append(want[k], m.ID)
				break
			}
		}
	}
	if inOrder {
		require.Equal(t, want, order, "per key, not in the sent order")
	}
	return dupes
}

func openKafka(t *testing.T, url string) webhook.Sink {
	t.Helper()
	sinks, err := streams.Open(url, nil)
	require.NoError(t, err)
	require.Len(t, sinks, 1)
	t.Cleanup(func() { _ = sinks[0].Close() })
	return sinks[0]
}

// Events sent in batches are each consumed once, with the template id as
// the key (the type without one), one partition and the sent order per
// key, the headers id and type.
func TestKafkaEveryEventOnceInOrderPerKey(t *testing.T) {
	_, addrs := kafkaCluster(t, kfake.SeedTopics(3, "ev"))
	s := openKafka(t, "kafka://"+addrs+"?topic=ev")
	require.Equal(t, "kafka", s.Name())
	msgs := kafkaMessages(t, 90)
	ctx := context.Background()
	for i := 0; i < len(msgs); i += 30 {
		n, err := s.Send(ctx, msgs[i:i+30])
		require.NoError(t, err)
		require.Equal(t, 30, n)
	}
	recs := consumeKafka(t, addrs, len(msgs), "ev")
	require.Zero(t, requireEveryEventOnce(t, msgs, recs))
	require.Len(t, recs, len(msgs))
}

// topic_per_type=true: each event in <topic>.<type>.
func TestKafkaTopicPerType(t *testing.T) {
	var topics []string
	for _, typ := range webhook.Types {
		topics = append(topics, "ev."+typ)
	}
	_, addrs := kafkaCluster(t, kfake.SeedTopics(2, topics...))
	s := openKafka(t, "kafka://"+addrs+"?topic=ev&topic_per_type=true&name=k2")
	msgs := kafkaMessages(t, 40)
	n, err := s.Send(context.Background(), msgs)
	require.NoError(t, err)
	require.Equal(t, len(msgs), n)
	recs := consumeKafka(t, addrs, len(msgs), topics...)
	require.Zero(t, requireEveryEventOnce(t, msgs, recs))
	for _, r := range recs {
		require.Equal(t, "ev."+r.typ, r.topic)
	}
}

// A broker's retriable error (NOT_LEADER_FOR_PARTITION on the first
// produce) is retried by the idempotent producer itself: Send takes all,
// and no event is written twice.
func TestKafkaRetriableErrorRetried(t *testing.T) {
	c, addrs := kafkaCluster(t, kfake.SeedTopics(3, "ev"))
	var failed atomic.Int32
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		failed.Add(1)
		return produceError(req, kerr.NotLeaderForPartition), nil, true
	})
	s := openKafka(t, "kafka://"+addrs+"?topic=ev")
	msgs := kafkaMessages(t, 40)
	n, err := s.Send(context.Background(), msgs)
	require.NoError(t, err)
	require.Equal(t, len(msgs), n)
	require.EqualValues(t, 1, failed.Load())
	recs := consumeKafka(t, addrs, len(msgs), "ev")
	require.Zero(t, requireEveryEventOnce(t, msgs, recs))
	require.Len(t, recs, len(msgs))
}

// produceError answers a produce request with code on every partition.
func produceError(req kmsg.Request, code *kerr.Error) kmsg.Response {
	r := req.(*kmsg.ProduceRequest)
	resp := r.ResponseKind().(*kmsg.ProduceResponse)
	for _, rt := range r.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.ErrorCode = code.Code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// A broker that fails a produce with a non-retriable error
// (TOPIC_AUTHORIZATION_FAILED, once, for one partition) makes Send return how many from
// the first were acknowledged, with an outage error. Sent again (as the
// Relay does), every event is consumed; the duplicates (later events
// already written to the other partitions) drop out on the id, and per
// key the order holds.
func TestKafkaBrokerErrorPartialCount(t *testing.T) {
	c, addrs := kafkaCluster(t, kfake.SeedTopics(3, "ev"))
	msgs := kafkaMessages(t, 60)
	// each partition led by its own broker; the partition that fails is
	// that of the first event not in the first event's partition (the
	// producer's default partitioner: murmur2 of the key)
	for p := range int32(3) {
		require.NoError(t, c.MoveTopicPartition("ev", p, p))
	}
	part := kgo.StickyKeyPartitioner(nil).ForTopic("ev")
	partOf := func(m webhook.Message) int32 {
		return int32(part.Partition(&kgo.Record{Key: []byte(streams.RecordKey(m))}, 3))
	}
	k := 1
	for partOf(msgs[k]) == partOf(msgs[0]) {
		k++
	}
	bad := partOf(msgs[k])
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		for _, rt := range req.(*kmsg.ProduceRequest).Topics {
			for _, rp := range rt.Partitions {
				if rp.Partition == bad {
					return produceError(req, kerr.TopicAuthorizationFailed), nil, true
				}
			}
		}
		return nil, nil, false
	})
	s := openKafka(t, "kafka://"+addrs+"?topic=ev")
	ctx := context.Background()
	n, err := s.Send(ctx, msgs)
	require.Error(t, err)
	require.False(t, webhook.IsRefused(err), "an outage, not the event's fault")
	require.Equal(t, k, n, "the events before the first of the failed partition")
	require.ErrorContains(t, err, msgs[n].ID)
	t.Logf("first send: %d of %d, %v", n, len(msgs), err)
	taken := n
	for round := 0; taken < len(msgs); round++ {
		require.Less(t, round, 5)
		n, err = s.Send(ctx, msgs[taken:])
		taken += n
		if err != nil {
			t.Logf("send again: %v", err)
		}
	}
	recs := consumeKafka(t, addrs, len(msgs), "ev")
	dupes := requireEveryEventOnce(t, msgs, recs)
	require.Equal(t, len(recs)-len(msgs), dupes)
	t.Logf("%d records, %d duplicates", len(recs), dupes)
	// the consumer saw the partitions the test computed
	for _, r := range recs {
		require.Equal(t, partOf(webhook.Message{ID: r.id, Type: r.typ, Body: []byte(r.body)}), r.partition)
	}
}

// A record larger than the topic takes is refused (the Relay drops it
// after its attempts); the events before and after it go.
func TestKafkaTooLargeRefused(t *testing.T) {
	_, addrs := kafkaCluster(t, kfake.SeedTopics(1, "ev"), kfake.BrokerConfigs(map[string]string{"message.max.bytes": "6000"}))
	s := openKafka(t, "kafka://"+addrs+"?topic=ev")
	msgs := kafkaMessages(t, 12)
	big := webhook.Event{ID: webhook.NewID(), Type: webhook.AnomalyDetected, Template: 1, Data: map[string]string{"detail": randomHex(4000)}}
	body, err := webhook.JSON(big)
	require.NoError(t, err)
	msgs[5] = webhook.Message{OutboxID: 6, ID: big.ID, Type: big.Type, Body: body}
	ctx := context.Background()
	n, err := s.Send(ctx, msgs)
	require.Equal(t, 5, n)
	require.True(t, webhook.IsRefused(err), "%v", err)
	n, err = s.Send(ctx, msgs[6:])
	require.NoError(t, err)
	require.Equal(t, 6, n)
	want := append(append([]webhook.Message{}, msgs[:5]...), msgs[6:]...)
	recs := consumeKafka(t, addrs, len(want), "ev")
	// every event but the refused one, each with its body, key and type,
	// in order per key: the records of its partition around it are not
	// written ahead of earlier ones
	everyEventOnce(t, want, recs, true)
}

// SASL PLAIN: the right password delivers; a wrong one takes nothing,
// with an error (an outage) that does not show the password.
func TestKafkaSASLPlain(t *testing.T) {
	_, addrs := kafkaCluster(t, kfake.SeedTopics(3, "ev"), kfake.EnableSASL(), kfake.Superuser("PLAIN", "cdc", "right-secret"))
	msgs := kafkaMessages(t, 5)
	ctx := context.Background()

	bad := openKafka(t, "kafka://cdc:wrong-secret@"+addrs+"?topic=ev&sasl=plain&delivery_timeout=3s")
	n, err := bad.Send(ctx, msgs)
	require.Zero(t, n)
	require.Error(t, err)
	require.NotContains(t, err.Error(), "wrong-secret")
	require.False(t, webhook.IsRefused(err), "an outage, not the event's fault")
	t.Logf("wrong password: %v", err)

	good := openKafka(t, "kafka://cdc:right-secret@"+addrs+"?topic=ev&sasl=plain&name=good")
	n, err = good.Send(ctx, msgs)
	require.NoError(t, err)
	require.Equal(t, len(msgs), n)
}

// SASL SCRAM-SHA-256 and -512 deliver with the right password.
func TestKafkaSASLSCRAM(t *testing.T) {
	_, addrs := kafkaCluster(t, kfake.SeedTopics(3, "ev"), kfake.EnableSASL(),
		kfake.Superuser("SCRAM-SHA-256", "cdc256", "Pw-256"), kfake.Superuser("SCRAM-SHA-512", "cdc512", "Pw-512"))
	msgs := kafkaMessages(t, 5)
	for _, url := range []string{"kafka://cdc256:Pw-256@" + addrs + "?topic=ev&sasl=scram-sha-256&name=a",
		"kafka://cdc512:Pw-512@" + addrs + "?topic=ev&sasl=scram-sha-512&name=b"} {
		n, err := openKafka(t, url).Send(context.Background(), msgs)
		require.NoError(t, err, url)
		require.Equal(t, len(msgs), n, url)
	}
}

// Open's refusals of a Kafka URL never show its password.
func TestKafkaOpenRefusals(t *testing.T) {
	for url, want := range map[string]string{
		"kafka://u:pw-secret@h:9092?topic=ev":                      "needs sasl=",
		"kafka://u:pw-secret@h:9092?sasl=gssapi":                   "is not plain",
		"kafka://u:pw-secret@h:9092?sasl=plain&topic_per_type=x":   "topic_per_type",
		"kafka://h:9092?tls_ca=ca.pem":                             "kafkas://",
		"kafka://h:9092?bogus=1":                                   "unknown parameters",
		"kafka://u:pw-secret@h:9092?sasl=plain&delivery_timeout=0": "delivery_timeout",
	} {
		_, err := streams.Open(url, nil)
		require.ErrorContains(t, err, want, url)
		require.NotContains(t, err.Error(), "pw-secret", url)
	}
	sinks, err := streams.Open("kafka://h1:9092,h2:9093?topic=ev,kafka://h3?name=k2", nil)
	require.NoError(t, err)
	require.Len(t, sinks, 2)
	for _, s := range sinks {
		require.NoError(t, s.Close())
	}
}

// randomHex is n random bytes in hex: a body that does not compress.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// outboxMessages are the outbox's events, in outbox order.
func outboxMessages(t *testing.T, db *sql.DB) []webhook.Message {
	t.Helper()
	rows, err := db.Query(`SELECT id, event_id, event, body FROM webhook_outbox ORDER BY id`)
	require.NoError(t, err)
	defer rows.Close()
	var out []webhook.Message
	for rows.Next() {
		var m webhook.Message
		require.NoError(t, rows.Scan(&m.OutboxID, &m.ID, &m.Type, &m.Body))
		out = append(out, m)
	}
	require.NoError(t, rows.Err())
	return out
}

// Through a Relay: every outbox event reaches Kafka once per id after
// dedup, per key in outbox order, across an outage (the brokers failing
// every produce for a while: rounds fail, the events wait) and a takeover
// (the position set back by 50, as after a cdc killed between a send and
// saving its position: those 50 sent again, deduped on the id header).
func TestKafkaRelayEveryEventOnceAcrossOutage(t *testing.T) {
	db, _ := testenv.MySQL(t)
	c, addrs := kafkaCluster(t, kfake.SeedTopics(3, "ev"))
	var down atomic.Bool
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if !down.Load() {
			return nil, nil, false
		}
		c.KeepControl()
		return produceError(req, kerr.NotLeaderForPartition), nil, true
	})
	sinks, err := streams.Open("kafka://"+addrs+"?topic=ev&delivery_timeout=1s", nil)
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	relays(t, db, reg, sinks)
	up := func(what string) {
		cdctest.WaitFor(t, 60*time.Second, what, func() bool { return caughtUp(t, db, "kafka") })
	}

	enqueue(t, db, 60)
	up("Kafka takes the first events")

	down.Store(true)
	enqueue(t, db, 60)
	cdctest.WaitFor(t, 30*time.Second, "failed Kafka rounds counted", func() bool {
		v, _ := cdctest.Metric(t, reg, "couponlink_event_deliveries_total", map[string]string{"sink": "kafka", "result": "failed"})
		return v > 0
	})
	require.False(t, caughtUp(t, db, "kafka"))
	down.Store(false)
	up("Kafka catches up once the brokers take produces again")

	_, err = db.Exec(`UPDATE event_sink_position SET last_id = last_id - 50 WHERE sink = 'kafka'`)
	require.NoError(t, err)
	enqueue(t, db, 30)
	up("Kafka takes the resent and the new events")

	msgs := outboxMessages(t, db)
	require.Len(t, msgs, 150)
	recs := consumeKafka(t, addrs, len(msgs), "ev")
	dupes := requireEveryEventOnce(t, msgs, recs)
	require.GreaterOrEqual(t, dupes, 50, "the resent events")
	t.Logf("%d records, %d duplicates", len(recs), dupes)
}

// A kafkas:// sink to brokers serving TLS alone and asking for a client
// certificate: with its own tls_ca, tls_cert and tls_key it produces;
// with the system's CAs, or in clear (kafka://), it cannot.
func TestKafkasSink(t *testing.T) {
	ca := testenv.NewCA(t, "kafka")
	cert, key := ca.Issue("broker", "127.0.0.1")
	pair, err := tls.LoadX509KeyPair(cert, key)
	require.NoError(t, err)
	pem, err := os.ReadFile(ca.File)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(pem))
	_, addrs := kafkaCluster(t, kfake.SeedTopics(3, "ev"),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}))
	ccert, ckey := ca.Issue("cdc")
	msgs := kafkaMessages(t, 10)
	ctx := context.Background()

	s := openKafka(t, "kafkas://"+addrs+"?topic=ev&tls_ca="+ca.File+"&tls_cert="+ccert+"&tls_key="+ckey)
	n, err := s.Send(ctx, msgs)
	require.NoError(t, err)
	require.Equal(t, len(msgs), n)

	for _, url := range []string{"kafkas://" + addrs + "?topic=ev&delivery_timeout=1s&name=system-cas",
		"kafka://" + addrs + "?topic=ev&delivery_timeout=1s&name=clear"} {
		n, err := openKafka(t, url).Send(ctx, msgs)
		require.Zero(t, n, url)
		require.Error(t, err, url)
		require.False(t, webhook.IsRefused(err), url)
		t.Logf("%s: %v", url, err)
	}
}
