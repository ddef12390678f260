package republisher

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// Client calls a republisher's HTTP API: what a Go application beside the sidecar uses.
type Client struct {
	// BaseURL is the sidecar's address, e.g. "http://127.0.0.1:8787".
	BaseURL string
	// HTTP is the client to use; nil means http.DefaultClient.
	HTTP *http.Client
}

// Receive long-polls for records (POST /v1/receive).
func (c *Client) Receive(ctx context.Context, in ReceiveRequest) (ReceiveResponse, error) {
	var out ReceiveResponse
	return out, c.post(ctx, "/v1/receive", in, &out)
}

// Ack acknowledges records (POST /v1/ack). Per-record outcomes are in the results; when any
// acknowledgement was not taken the answer is not 200 and Ack returns the results with an
// error naming the status.
func (c *Client) Ack(ctx context.Context, in AckRequest) (AckResponse, error) {
	var out AckResponse
	return out, c.post(ctx, "/v1/ack", in, &out)
}

func (c *Client) post(ctx context.Context, path string, in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.BaseURL+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if ack, ok := out.(*AckResponse); ok && json.Unmarshal(msg, ack) == nil && len(ack.Results) > 0 {
			return fmt.Errorf("%s: %s: not every acknowledgement was taken (see the results)", path, resp.Status)
		}
		return fmt.Errorf("%s: %s: %s", path, resp.Status, bytes.TrimSpace(msg))
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
