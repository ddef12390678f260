package kafka

import (
	"sync"
	"time"
)

// Pool keeps one long-lived Client per cluster key (namespace/name of a KafkaCluster). A
// client is rebuilt only when the connection fingerprint changes (bootstrap servers, TLS or
// SASL settings, or the content of a referenced Secret).
type Pool struct {
	mu      sync.Mutex
	clients map[string]pooledClient
	writes  []BrokerWriteFunc
	// connects observe every connection attempt (ObserveBrokerConnects).
	connects []BrokerConnectFunc
	observe  func(api string, latency time.Duration, err error)
	batch    Batching
}

// ObserveBrokerWrites adds observers of every request written to a broker to the clients the
// pool builds from now on (Config.BrokerWrites).
func (p *Pool) ObserveBrokerWrites(fns ...BrokerWriteFunc) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.writes = append(p.writes, fns...)
}

// SetBatching sets Config.Batching for the clients the pool builds from now on.
func (p *Pool) SetBatching(b Batching) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.batch = b
}

// SetObserver sets Config.Observe for the clients the pool builds from now on.
func (p *Pool) SetObserver(fn func(api string, latency time.Duration, err error)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.observe = fn
}

type pooledClient struct {
	fingerprint string
	client      *Client
}

// NewPool returns an empty pool whose clients all report their broker writes to fns
// (metrics, request counting).
func NewPool(fns ...BrokerWriteFunc) *Pool {
	return &Pool{clients: map[string]pooledClient{}, writes: fns}
}

// Get returns the client for key, building it with build when there is none or when
// fingerprint differs from the one it was built with (the old client is closed).
func (p *Pool) Get(key, fingerprint string, build func() (Config, error)) (*Client, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pc, ok := p.clients[key]; ok {
		if pc.fingerprint == fingerprint {
			return pc.client, nil
		}
		pc.client.Close()
		delete(p.clients, key)
	}
	cfg, err := build()
	if err != nil {
		return nil, err
	}
	cfg.BrokerWrites = append(append([]BrokerWriteFunc(nil), p.writes...), cfg.BrokerWrites...)
	cfg.BrokerConnects = append(append([]BrokerConnectFunc(nil), p.connects...), cfg.BrokerConnects...)
	if cfg.Observe == nil {
		cfg.Observe = p.observe
	}
	if !cfg.Batching.Enabled {
		cfg.Batching = p.batch
	}
	c, err := NewClient(cfg)
	if err != nil {
		return nil, err
	}
	p.clients[key] = pooledClient{fingerprint: fingerprint, client: c}
	return c, nil
}

// Peek returns the current client for key without building one.
func (p *Pool) Peek(key string) (*Client, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pc, ok := p.clients[key]
	return pc.client, ok
}

// Remove closes and forgets the client for key.
func (p *Pool) Remove(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pc, ok := p.clients[key]; ok {
		pc.client.Close()
		delete(p.clients, key)
	}
}

// Close closes every client.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, pc := range p.clients {
		pc.client.Close()
		delete(p.clients, k)
	}
}

// Clients returns the pool's current clients.
func (p *Pool) Clients() []*Client {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*Client, 0, len(p.clients))
	for _, pc := range p.clients {
		out = append(out, pc.client)
	}
	return out
}
