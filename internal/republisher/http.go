package republisher

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

// The local HTTP API, documented in api/republisher/openapi.yaml. Keys, values and header
// values are base64 in JSON (Go's []byte encoding).

// ReceiveRequest asks for records.
type ReceiveRequest struct {
	// MaxRecords bounds the answer; 0 or above the sidecar's limit means its limit.
	MaxRecords int `json:"maxRecords,omitempty"`
	// WaitMs is the long-poll: how long to wait for a record, in milliseconds (0: 5000, at
	// most 30000).
	WaitMs int `json:"waitMs,omitempty"`
}

// RecordHeader is one header of a received record.
type RecordHeader struct {
	Key   string `json:"key"`
	Value []byte `json:"value"`
}

// ReceivedRecord is one record handed to the application.
type ReceivedRecord struct {
	// ID names this delivery attempt; ack with it.
	ID            string         `json:"id"`
	Topic         string         `json:"topic"`
	Partition     int32          `json:"partition"`
	Offset        int64          `json:"offset"`
	DeliveryCount int32          `json:"deliveryCount"`
	Key           []byte         `json:"key,omitempty"`
	Value         []byte         `json:"value,omitempty"`
	Headers       []RecordHeader `json:"headers,omitempty"`
	Timestamp     time.Time      `json:"timestamp"`
	// LeaseExpiresAt is when the record lapses unless acked or renewed.
	LeaseExpiresAt time.Time `json:"leaseExpiresAt"`
}

// ReceiveResponse carries the records (possibly none).
type ReceiveResponse struct {
	Records []ReceivedRecord `json:"records"`
}

// Ack is one acknowledgement: type is accept, release, reject or renew.
type Ack struct {
	ID   string `json:"id"`
	Type string `json:"type"`
}

// AckRequest carries acknowledgements.
type AckRequest struct {
	Acks []Ack `json:"acks"`
}

// AckResult is one acknowledgement's outcome; Error is empty on success, which means the
// brokers took it (for renew: extended the lock).
type AckResult struct {
	ID string `json:"id"`
	// Code is the HTTP status this acknowledgement alone would get: 200 taken; 400 bad type;
	// 404 unknown id; 409 refused by the brokers, or its dead-letter write is retried; 410
	// stale (lease or the brokers' lock ended, delivered again, acknowledged before); 503 not
	// confirmed in time.
	Code int `json:"code"`
	// Reason names why it was not taken (a Refusal* constant); empty on success.
	Reason string `json:"reason,omitempty"`
	Error  string `json:"error,omitempty"`
}

// AckResponse lists the outcome of each acknowledgement, in request order. The HTTP status
// is 200 when every acknowledgement was taken, else the code of the first that was not.
type AckResponse struct {
	Results []AckResult `json:"results"`
}

var ackTypes = map[string]kafka.AckType{"accept": kafka.AckAccept, "release": kafka.AckRelease, "reject": kafka.AckReject, "renew": kafka.AckRenew}

// Handler serves the API: POST /v1/receive, POST /v1/ack, GET /healthz.
func (r *Republisher) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/receive", func(w http.ResponseWriter, req *http.Request) {
		var in ReceiveRequest
		if req.ContentLength != 0 {
			if err := decode(w, req, &in, 1<<16); err != nil {
				httpError(w, http.StatusBadRequest, err)
				return
			}
		}
		if in.MaxRecords < 0 {
			httpError(w, http.StatusBadRequest, fmt.Errorf("maxRecords %d must not be negative", in.MaxRecords))
			return
		}
		if in.WaitMs < 0 || in.WaitMs > 30000 {
			httpError(w, http.StatusBadRequest, fmt.Errorf("waitMs %d must be between 0 and 30000", in.WaitMs))
			return
		}
		wait := 5 * time.Second
		if in.WaitMs > 0 {
			wait = time.Duration(in.WaitMs) * time.Millisecond
		}
		ds, err := r.Receive(req.Context(), in.MaxRecords, wait)
		if err != nil {
			httpError(w, http.StatusServiceUnavailable, err)
			return
		}
		if req.Context().Err() != nil {
			// The client went away during the long-poll: nobody will see these records, so
			// keep them for the next receive instead of letting their leases lapse.
			r.Return(ds)
			return
		}
		out := ReceiveResponse{Records: make([]ReceivedRecord, 0, len(ds))}
		for _, d := range ds {
			rr := ReceivedRecord{ID: d.ID, Topic: d.Record.Topic, Partition: d.Record.Partition, Offset: d.Record.Offset,
				DeliveryCount: d.DeliveryCount, Key: d.Record.Key, Value: d.Record.Value, Timestamp: d.Record.Timestamp, LeaseExpiresAt: d.LeaseExpires}
			for _, h := range d.Record.Headers {
				rr.Headers = append(rr.Headers, RecordHeader{Key: h.Key, Value: h.Value})
			}
			out.Records = append(out.Records, rr)
		}
		if err := writeJSONFlushed(w, out); err != nil && len(ds) > 0 {
			// The answer did not go out whole (the connection broke): as above. A client that
			// vanishes after the kernel took the bytes is not seen here; its leases lapse.
			r.Return(ds)
		}
	})
	mux.HandleFunc("POST /v1/ack", func(w http.ResponseWriter, req *http.Request) {
		var in AckRequest
		if err := decode(w, req, &in, 1<<20); err != nil {
			httpError(w, http.StatusBadRequest, err)
			return
		}
		// Acks of one request are independent: dead-letter writes among them run concurrently.
		out := AckResponse{Results: make([]AckResult, len(in.Acks))}
		var wg sync.WaitGroup
		for i, a := range in.Acks {
			out.Results[i].ID, out.Results[i].Code = a.ID, http.StatusOK
			t, ok := ackTypes[a.Type]
			if !ok {
				out.Results[i].Code, out.Results[i].Reason = http.StatusBadRequest, "BadType"
				out.Results[i].Error = fmt.Sprintf("type %q is not one of accept, release, reject, renew", a.Type)
				continue
			}
			wg.Add(1)
			go func(i int, id string, t kafka.AckType) {
				defer wg.Done()
				if err := r.Ack(req.Context(), id, t); err != nil {
					out.Results[i].Code, out.Results[i].Error = http.StatusInternalServerError, err.Error()
					var rf *AckRefusal
					if errors.As(err, &rf) {
						out.Results[i].Code, out.Results[i].Reason = rf.Code, rf.Reason
					}
				}
			}(i, a.ID, t)
		}
		wg.Wait()
		code := http.StatusOK
		for _, res := range out.Results {
			if res.Code != http.StatusOK {
				code = res.Code
				break
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(out)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	return mux
}

// decode reads a JSON body strictly: unknown fields and trailing data are errors, as the
// OpenAPI schemas say (additionalProperties: false).
func decode(w http.ResponseWriter, req *http.Request, into any, limit int64) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, req.Body, limit))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		if errors.Is(err, io.EOF) {
			return errors.New("body: empty; a JSON object is required")
		}
		return fmt.Errorf("body: %w", err)
	}
	if dec.More() {
		return errors.New("body: more than one JSON value")
	}
	return nil
}

// writeJSONFlushed writes v and flushes it to the connection, returning the first error.
func writeJSONFlushed(w http.ResponseWriter, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	if _, err := w.Write(append(b, '\n')); err != nil {
		return err
	}
	return http.NewResponseController(w).Flush()
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func httpError(w http.ResponseWriter, code int, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
}
