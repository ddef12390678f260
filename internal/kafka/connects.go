package kafka

import (
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BrokerConnectFunc observes one connection attempt to a broker (franz-go's
// kgo.HookBrokerConnect): err is nil when the dial (and TLS handshake) succeeded. While a
// broker is down no request can be written, so these attempts are what an outage costs the
// network; metrics count them (kafkaqueues_kafka_broker_connects_total).
type BrokerConnectFunc func(err error)

// brokerConnectHook adapts BrokerConnectFuncs to kgo.HookBrokerConnect.
type brokerConnectHook []BrokerConnectFunc

var _ kgo.HookBrokerConnect = brokerConnectHook(nil)

// OnBrokerConnect implements kgo.HookBrokerConnect.
func (h brokerConnectHook) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	for _, f := range h {
		f(err)
	}
}

// ObserveBrokerConnects adds observers of every connection attempt to the clients the pool
// builds from now on (Config.BrokerConnects).
func (p *Pool) ObserveBrokerConnects(fns ...BrokerConnectFunc) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.connects = append(p.connects, fns...)
}

// IsUnreachable reports a request-level failure: the cluster could not be reached or did not
// answer in time (a transport error, a dial refused, a deadline), as opposed to a broker's
// answer with an error code (INVALID_CONFIG, UNKNOWN_TOPIC_OR_PARTITION, ...), which concerns
// one item and says the broker is up. The controllers' per-cluster backoff counts only these.
// A batched call withdrawn before any request carried it (ErrNotSent) is not one: it waited
// behind this client's own requests, and no broker was asked.
func IsUnreachable(err error) bool {
	if err == nil || IsAuthorization(err) || IsNotSent(err) {
		return false
	}
	return IsRetriable(err) && !isKerr(err)
}
