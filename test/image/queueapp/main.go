// Command queueapp is the test rig's queue application (the /queueapp of image.AppSpec). It
// runs beside the republisher sidecar in a Pod, receives records from the sidecar's local
// API (api/republisher/openapi.yaml) and acknowledges each by its value, a decimal integer
// as text ("17"):
//
//   - value%10 == 0: reject (the sidecar writes it to the dead-letter topic);
//   - value%7 == 3 on its first delivery (deliveryCount 1): abandon — no acknowledgement at
//     all, so its lease lapses and the record is delivered again;
//   - otherwise: accept. A value that is not an integer is rejected.
//
// (Go's %: a negative value has a negative remainder, so -3 is not abandoned.)
//
// After an accept the sidecar answers 200 for, it writes the value to a ledger: one record
// (key and value the value's text, headers "pod" = $HOSTNAME and "delivery-count") produced to
// $KQO_APP_LEDGER_TOPIC and confirmed (ProduceSync, acks=all, idempotent) before it
// receives again. An accept refused (409, 410) or not confirmed (503) is logged and not
// written: the sidecar delivers a record whose accept was not taken again.
//
// Environment: KQO_APP_SIDECAR (default http://127.0.0.1:8787), KQO_APP_BOOTSTRAP (brokers,
// comma-separated; required), KQO_APP_LEDGER_TOPIC (required), HOSTNAME, and
// KQO_APP_EXIT_IDLE (a Go duration; unset: never): as a batch Job does, exit 0 once every
// receive for that long answered 200 with no records (a failed receive is not an empty
// queue: it starts the idle time again).
//
// It receives only once GET /healthz on the sidecar answers 200 (tried every 200ms), with
// POST /v1/receive {"maxRecords":50,"waitMs":2000}. On SIGTERM or SIGINT it stops receiving
// (a receive in flight is read to the end, not cut off: the sidecar keeps records only for a
// client that goes away before the answer is written), acknowledges and writes to the ledger
// what it holds, flushes the producer and exits 0. Abandoned records stay unacknowledged;
// the sidecar releases them when it stops.
//
// It logs one JSON line per action to stdout ("msg" names it: ready, received, abandon,
// accept, reject, refused, unconfirmed, ack-failed, ledger, ledger-failed, malformed...), and
// a "summary" line with the counts at exit. Exit code 2 means a missing setting.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	maxRecords   = 50
	waitMs       = 2000
	readyEvery   = 200 * time.Millisecond
	retryEvery   = 500 * time.Millisecond
	ledgerWithin = 30 * time.Second
)

// The sidecar's API, as api/republisher/openapi.yaml gives it (keys and values are base64
// in JSON, which []byte decodes).
type receivedRecord struct {
	ID            string `json:"id"`
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	Offset        int64  `json:"offset"`
	DeliveryCount int32  `json:"deliveryCount"`
	Value         []byte `json:"value"`
}

type ack struct {
	ID   string `json:"id"`
	Type string `json:"type"`
}

type ackResult struct {
	ID     string `json:"id"`
	Code   int    `json:"code"`
	Reason string `json:"reason"`
	Error  string `json:"error"`
}

// counts is the exit summary.
type counts struct {
	Received, Accepted, Rejected, Abandoned, Malformed   int
	Refused, Unconfirmed, AckFailed, Ledgered, LedgerErr int
}

type app struct {
	sidecar string
	// exitIdle, when not 0, ends run once receives were empty for that long.
	exitIdle time.Duration
	topic    string
	pod      string
	client   *http.Client
	// ledger produces recs and waits for the brokers to confirm them.
	ledger func(ctx context.Context, recs []*kgo.Record) error
	log    *slog.Logger
	n      counts
}

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stdout, nil))
	sidecar := strings.TrimSuffix(envOr("KQO_APP_SIDECAR", "http://127.0.0.1:8787"), "/")
	topic := os.Getenv("KQO_APP_LEDGER_TOPIC")
	var brokers []string
	for _, b := range strings.Split(os.Getenv("KQO_APP_BOOTSTRAP"), ",") {
		if b = strings.TrimSpace(b); b != "" {
			brokers = append(brokers, b)
		}
	}
	if topic == "" || len(brokers) == 0 {
		log.Error("config", "error", "KQO_APP_BOOTSTRAP and KQO_APP_LEDGER_TOPIC are required")
		os.Exit(2)
	}
	pod := os.Getenv("HOSTNAME")
	if pod == "" {
		pod, _ = os.Hostname()
	}
	kc, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		log.Error("config", "error", err.Error())
		os.Exit(2)
	}
	var exitIdle time.Duration
	if v := os.Getenv("KQO_APP_EXIT_IDLE"); v != "" {
		if exitIdle, err = time.ParseDuration(v); err != nil || exitIdle <= 0 {
			log.Error("config", "error", fmt.Sprintf("KQO_APP_EXIT_IDLE %q is not a positive duration", v))
			os.Exit(2)
		}
	}
	a := &app{
		exitIdle: exitIdle,
		sidecar:  sidecar, topic: topic, pod: pod,
		client: &http.Client{Timeout: 35 * time.Second},
		ledger: func(ctx context.Context, recs []*kgo.Record) error {
			return kc.ProduceSync(ctx, recs...).FirstErr()
		},
		log: log,
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	log.Info("start", "sidecar", sidecar, "brokers", brokers, "ledgerTopic", topic, "pod", pod)
	a.run(ctx)
	fctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	if err := kc.Flush(fctx); err != nil {
		log.Error("flush", "error", err.Error())
	}
	cancel()
	kc.Close()
	log.Info("summary", "received", a.n.Received, "accepted", a.n.Accepted, "rejected", a.n.Rejected,
		"abandoned", a.n.Abandoned, "malformed", a.n.Malformed, "refused", a.n.Refused,
		"unconfirmed", a.n.Unconfirmed, "ackFailed", a.n.AckFailed, "ledgered", a.n.Ledgered, "ledgerFailed", a.n.LedgerErr)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// run waits for the sidecar, then receives and handles batches until ctx ends. The batch in
// hand when ctx ends is handled to the end.
func (a *app) run(ctx context.Context) {
	if !a.waitReady(ctx) {
		a.log.Info("stop", "before", "ready")
		return
	}
	idleSince := time.Now()
	for ctx.Err() == nil {
		recs, err := a.receive()
		if err != nil || len(recs) > 0 {
			idleSince = time.Now()
		} else if a.exitIdle > 0 && time.Since(idleSince) >= a.exitIdle {
			a.log.Info("idle", "for", a.exitIdle.String())
			break
		}
		if err != nil {
			a.log.Warn("receive-failed", "error", err.Error())
			select {
			case <-ctx.Done():
			case <-time.After(retryEvery):
			}
			continue
		}
		if len(recs) > 0 {
			a.n.Received += len(recs)
			a.log.Info("received", "records", len(recs))
			a.handle(recs)
		}
	}
	a.log.Info("stop")
}

func (a *app) waitReady(ctx context.Context) bool {
	for first := true; ; first = false {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a.sidecar+"/healthz", nil)
		resp, err := a.client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				a.log.Info("ready")
				return true
			}
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		if first {
			a.log.Info("waiting-for-sidecar", "error", err.Error())
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(readyEvery):
		}
	}
}

// receive long-polls once. It is not cancelled by a signal: its answer is read whole
// (waitMs bounds it), so no record the sidecar handed out is left unread.
func (a *app) receive() ([]receivedRecord, error) {
	status, b, err := a.post("/v1/receive", map[string]int{"maxRecords": maxRecords, "waitMs": waitMs})
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("status %d: %s", status, bytes.TrimSpace(b))
	}
	var out struct {
		Records []receivedRecord `json:"records"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("answer %q: %w", b, err)
	}
	return out.Records, nil
}

// decide returns the acknowledgement for a record, "" to abandon it, and the parsed value.
func decide(value []byte, deliveryCount int32) (ackType string, v int64, err error) {
	v, err = strconv.ParseInt(strings.TrimSpace(string(value)), 10, 64)
	switch {
	case err != nil:
		return "reject", 0, err
	case v%10 == 0:
		return "reject", v, nil
	case v%7 == 3 && deliveryCount == 1:
		return "", v, nil
	default:
		return "accept", v, nil
	}
}

// handle acknowledges a batch in one request, then writes the taken accepts to the ledger.
func (a *app) handle(recs []receivedRecord) {
	var acks []ack
	values := map[string]int64{}
	deliveries := map[string]int32{}
	for _, r := range recs {
		t, v, err := decide(r.Value, r.DeliveryCount)
		attrs := []any{"id", r.ID, "value", v, "deliveryCount", r.DeliveryCount}
		if err != nil {
			a.n.Malformed++
			a.log.Warn("malformed", "id", r.ID, "raw", string(r.Value), "error", err.Error())
		}
		if t == "" {
			a.n.Abandoned++
			a.log.Info("abandon", attrs...)
			continue
		}
		acks = append(acks, ack{ID: r.ID, Type: t})
		values[r.ID], deliveries[r.ID] = v, r.DeliveryCount
	}
	if len(acks) == 0 {
		return
	}
	results, err := a.ack(acks)
	if err != nil {
		a.n.AckFailed += len(acks)
		a.log.Error("ack-failed", "acks", len(acks), "error", err.Error())
		return
	}
	var ledger []*kgo.Record
	for i, res := range results {
		t, v := acks[i].Type, values[acks[i].ID]
		attrs := []any{"id", res.ID, "value", v, "code", res.Code}
		switch {
		case res.Code == http.StatusOK && t == "accept":
			a.n.Accepted++
			a.log.Info("accept", attrs...)
			text := []byte(strconv.FormatInt(v, 10))
			ledger = append(ledger, &kgo.Record{Topic: a.topic, Key: text, Value: text,
				Headers: []kgo.RecordHeader{{Key: "pod", Value: []byte(a.pod)},
					{Key: "delivery-count", Value: []byte(strconv.Itoa(int(deliveries[acks[i].ID])))}}})
		case res.Code == http.StatusOK:
			a.n.Rejected++
			a.log.Info("reject", attrs...)
		case res.Code == http.StatusConflict || res.Code == http.StatusGone:
			a.n.Refused++
			a.log.Warn("refused", append(attrs, "type", t, "reason", res.Reason, "error", res.Error)...)
		case res.Code == http.StatusServiceUnavailable:
			a.n.Unconfirmed++
			a.log.Warn("unconfirmed", append(attrs, "type", t, "reason", res.Reason, "error", res.Error)...)
		default:
			a.n.AckFailed++
			a.log.Error("ack-failed", append(attrs, "type", t, "reason", res.Reason, "error", res.Error)...)
		}
	}
	if len(ledger) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), ledgerWithin)
	defer cancel()
	if err := a.ledger(ctx, ledger); err != nil {
		a.n.LedgerErr += len(ledger)
		a.log.Error("ledger-failed", "records", len(ledger), "error", err.Error())
		return
	}
	for _, r := range ledger {
		a.n.Ledgered++
		a.log.Info("ledger", "value", string(r.Value), "topic", a.topic)
	}
}

// ack sends acks and returns one result per ack, in their order. An answer that is not an
// AckResponse for exactly these acks (a 400 for a malformed body, a broken connection) is an
// error: then nobody knows which were taken.
func (a *app) ack(acks []ack) ([]ackResult, error) {
	status, b, err := a.post("/v1/ack", map[string][]ack{"acks": acks})
	if err != nil {
		return nil, err
	}
	var out struct {
		Results []ackResult `json:"results"`
	}
	if err := json.Unmarshal(b, &out); err != nil || len(out.Results) != len(acks) {
		return nil, fmt.Errorf("status %d: %s", status, bytes.TrimSpace(b))
	}
	for i, r := range out.Results {
		if r.ID != acks[i].ID {
			return nil, errors.New("results out of order: " + r.ID + " answers " + acks[i].ID)
		}
	}
	return out.Results, nil
}

// post sends body as JSON to the sidecar's path and returns the answer's status and body,
// read whole.
func (a *app) post(path string, body any) (int, []byte, error) {
	in, err := json.Marshal(body)
	if err != nil {
		return 0, nil, err
	}
	resp, err := a.client.Post(a.sidecar+path, "application/json", bytes.NewReader(in))
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}
