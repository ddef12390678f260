package republisher

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

// Bad requests are refused before any Kafka work (no broker is needed: clients connect lazily).
func TestHTTPRefusesBadRequests(t *testing.T) {
	rp, err := New(kafka.Config{BootstrapServers: []string{"127.0.0.1:1"}}, Options{Topic: "t", Group: "g", DeadLetterTopic: "t.dlq", MaxDeliveryAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer rp.closeClients()
	srv := httptest.NewServer(rp.Handler())
	defer srv.Close()
	for _, tc := range []struct {
		path, body string
		code       int
		want       string
	}{
		{"/v1/receive", `{"maxRecords": 5, "foo": 1}`, 400, `unknown field \"foo\"`},
		{"/v1/receive", `{"waitMs": 40000}`, 400, "waitMs 40000 must be between 0 and 30000"},
		{"/v1/receive", `{"waitMs": -5}`, 400, "waitMs -5"},
		{"/v1/receive", `{"maxRecords": -1}`, 400, "maxRecords -1 must not be negative"},
		{"/v1/receive", `{"maxRecords": 1} {"maxRecords": 2}`, 400, "more than one JSON value"},
		{"/v1/ack", ``, 400, "body: empty"},
		{"/v1/ack", `{"acks": [{"id": "x", "type": "accept", "extra": true}]}`, 400, `unknown field \"extra\"`},
		{"/v1/ack", `{"acks": [{"id": "nope", "type": "accept"}, {"id": "x", "type": "maybe"}]}`, 404, `"error":"type \"maybe\" is not one of accept, release, reject, renew"`},
		{"/v1/ack", `{"acks": [{"id": "nope", "type": "accept"}]}`, 404, `"reason":"UnknownDelivery"`},
	} {
		resp, err := http.Post(srv.URL+tc.path, "application/json", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || !strings.Contains(string(b), tc.want) {
			t.Errorf("POST %s %s: %d %s, want %d containing %q", tc.path, tc.body, resp.StatusCode, b, tc.code, tc.want)
		}
	}
}
