package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
)

// kqctl status shows each queue's depth as status.depth has it: backlog, age of the oldest
// record, dead letters in its route's topic, and when they were read.
func TestStatusShowsQueueDepth(t *testing.T) {
	skipShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sq := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kq-depth"}, Spec: kqv1.ShareQueueSpec{
		ClusterRef: kqv1.ClusterReference{Name: "local"}, Topic: kqv1.QueueTopicSpec{Partitions: 1},
		Delivery: kqv1.DeliverySpec{AutoOffsetReset: ptr("earliest")}}}
	route := &kqv1.DeadLetterRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kq-depth-dlq"}, Spec: kqv1.DeadLetterRouteSpec{
		QueueRef: kqv1.QueueReference{Name: sq.Name}, Topic: kqv1.DeadLetterTopicSpec{Name: "dlq.kq-depth"}}}
	for _, o := range []client.Object{sq, route} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	var row *queueRow
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(time.Second) {
		_ = k8s.Get(ctx, client.ObjectKeyFromObject(sq), sq)
		_ = k8s.Get(ctx, client.ObjectKeyFromObject(route), route)
		if sq.Status.TopicName != "" && row == nil {
			recs := []*kgo.Record{}
			for i := 0; i < 7; i++ {
				recs = append(recs, &kgo.Record{Topic: sq.Status.TopicName, Value: []byte(fmt.Sprint(i))})
			}
			if route.Status.TopicName != "" {
				recs = append(recs, &kgo.Record{Topic: route.Status.TopicName, Value: []byte("dead")})
			}
			if len(recs) == 8 {
				if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
					t.Fatal(err)
				}
				row = &queueRow{}
			}
		}
		if d := sq.Status.Depth; row != nil && d != nil && d.Backlog != nil && *d.Backlog == 7 && d.DeadLetters != nil && *d.DeadLetters == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status.depth never showed 7 records and 1 dead letter: %+v (route %+v)", sq.Status.Depth, route.Status)
		}
	}

	var out bytes.Buffer
	if err := runStatus([]string{"--kubeconfig", kubeconfig, "-o", "json"}, &out); err != nil {
		t.Fatal(err)
	}
	var rows []queueRow
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	row = nil
	for i := range rows {
		if rows[i].Name == sq.Name {
			row = &rows[i]
		}
	}
	if row == nil || row.Backlog == nil || *row.Backlog != 7 || row.DeadLetters == nil || *row.DeadLetters != 1 ||
		row.OldestAgeSeconds == nil || *row.OldestAgeSeconds < 0 || row.DepthObservedAt == "" || row.DepthError != "" {
		t.Fatalf("status row %+v", row)
	}
	out.Reset()
	if err := runStatus([]string{"--kubeconfig", kubeconfig}, &out); err != nil {
		t.Fatal(err)
	}
	var header, line string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "NAMESPACE") {
			header = l
		}
		if strings.Contains(l, " "+sq.Name+" ") {
			line = l
		}
	}
	for _, col := range []string{"BACKLOG", "OLDEST", "DEAD-LETTERS", "OBSERVED"} {
		if !strings.Contains(header, col) {
			t.Errorf("table header lacks %s:\n%s", col, out.String())
		}
	}
	f := strings.Fields(line)
	if len(f) < 17 || f[12] != "7" || f[14] != "1" || !strings.Contains(line, "kq-depth-dlq") || !strings.Contains(line, " ago ") {
		t.Errorf("table row %q (fields %q): want backlog 7, dead letters 1, observed … ago", line, f)
	}
}
