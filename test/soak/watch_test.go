//go:build soak

package soak

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// startWatchers starts the Retain-topic recorder (every 500 ms) and the resource sampler
// (every 5 s).
func (s *soak) startWatchers(ctx context.Context) {
	var err error
	s.ids, err = newRetainRecorder(s, map[string][]string{"main": s.main.BootstrapServers(), "old": s.old.BootstrapServers()})
	if err != nil {
		s.t.Fatal(err)
	}
	s.res = &resourceSampler{s: s, phaseAt: map[string]int{}}
	wctx, cancel := context.WithCancel(ctx)
	s.stopW = cancel
	s.watchWG.Add(2)
	go func() {
		defer s.watchWG.Done()
		for wctx.Err() == nil {
			_ = s.ids.poll(wctx)
			select {
			case <-wctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	go func() {
		defer s.watchWG.Done()
		for wctx.Err() == nil {
			s.res.sample()
			select {
			case <-wctx.Done():
			case <-time.After(5 * time.Second):
			}
		}
	}()
}

func (s *soak) stopWatchers() {
	if s.stopW == nil {
		return
	}
	s.stopW()
	s.watchWG.Wait()
	s.stopW = nil
	s.ids.close()
}

// retainRecorder polls every topic's id on both clusters and reports a topic of a queue
// with deletionPolicy Retain that disappears or changes id. A Retain queue's topic must
// outlive the queue itself, so once seen it is tracked to the end of the run, through the
// queue's deletion and re-creation (the soak never changes a queue's deletionPolicy).
type retainRecorder struct {
	s   *soak
	cls map[string]*kgo.Client

	mu      sync.Mutex
	ids     map[string]string // "cluster/topic" → id first seen
	reports map[string]bool
	bad     []string
	n, fail int
}

func newRetainRecorder(s *soak, bootstrap map[string][]string) (*retainRecorder, error) {
	r := &retainRecorder{s: s, cls: map[string]*kgo.Client{}, ids: map[string]string{}, reports: map[string]bool{}}
	for name, b := range bootstrap {
		cl, err := kgo.NewClient(kgo.SeedBrokers(b...))
		if err != nil {
			return nil, err
		}
		r.cls[name] = cl
	}
	return r, nil
}

func (r *retainRecorder) close() {
	for _, cl := range r.cls {
		cl.Close()
	}
}

func (r *retainRecorder) poll(ctx context.Context) error {
	retain := map[string]bool{}
	for _, q := range r.s.pop.all() {
		if q.retain {
			retain[q.cluster+"/"+q.name] = true
		}
	}
	for cluster, cl := range r.cls {
		req := kmsg.NewPtrMetadataRequest()
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		resp, err := req.RequestWith(pctx, cl)
		cancel()
		r.mu.Lock()
		r.n++
		if err != nil {
			r.fail++
			r.mu.Unlock()
			continue
		}
		now := map[string]string{}
		for _, t := range resp.Topics {
			if t.Topic == nil || t.TopicID == ([16]byte{}) {
				continue
			}
			now[cluster+"/"+*t.Topic] = base64.RawURLEncoding.EncodeToString(t.TopicID[:])
		}
		at := time.Now().UTC().Format("15:04:05.000")
		for key := range retain {
			if !strings.HasPrefix(key, cluster+"/") {
				continue
			}
			id, ok := now[key]
			old, seen := r.ids[key]
			switch {
			case ok && !seen:
				r.ids[key] = id
			case !ok && seen && !r.reports[key+"gone"]:
				r.reports[key+"gone"] = true
				r.bad = append(r.bad, fmt.Sprintf("topic %s (id %s) of a Retain queue gone at %s", key, old, at))
			case ok && seen && id != old:
				r.bad = append(r.bad, fmt.Sprintf("topic %s of a Retain queue replaced at %s: id %s became %s", key, at, old, id))
				r.ids[key] = id
			}
		}
		r.mu.Unlock()
	}
	return nil
}

func (r *retainRecorder) violations() []string {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.bad...)
}
func (r *retainRecorder) tracked() int     { r.mu.Lock(); defer r.mu.Unlock(); return len(r.ids) }
func (r *retainRecorder) polls() int       { r.mu.Lock(); defer r.mu.Unlock(); return r.n }
func (r *retainRecorder) failedPolls() int { r.mu.Lock(); defer r.mu.Unlock(); return r.fail }

// resourceSampler samples the manager's RSS (/proc/<pid>/status VmRSS) and its Kafka
// request rate (kafkaqueues_kafka_broker_requests_total, every API, per second between two
// scrapes; a restarted manager's counters start again at zero).
type resourceSampler struct {
	s *soak

	mu       sync.Mutex
	rss      []float64 // MiB
	rate     []float64 // requests/s
	lastReq  float64
	lastAt   time.Time
	phaseAt  map[string]int // phase → index into rss where it began
	phase    string
	failures int
}

func (r *resourceSampler) markPhase(p string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.phase = p
	r.phaseAt[p] = len(r.rss)
}

func (r *resourceSampler) sample() {
	r.s.mgrMu.Lock()
	pid := r.s.mgr.pid()
	url := "http://" + r.s.mgr.metricsAddr + "/metrics"
	r.s.mgrMu.Unlock()
	rss, err1 := rssMiB(pid)
	req, err2 := scrapeSum(url, "kafkaqueues_kafka_broker_requests_total")
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if err1 != nil || err2 != nil {
		r.failures++ // manager down for a fault
		r.lastAt = time.Time{}
		return
	}
	r.rss = append(r.rss, rss)
	if !r.lastAt.IsZero() {
		d := req - r.lastReq
		if d < 0 {
			d = req
		}
		r.rate = append(r.rate, d/now.Sub(r.lastAt).Seconds())
	}
	r.lastReq, r.lastAt = req, now
}

func rssMiB(pid int) (float64, error) {
	if pid == 0 {
		return 0, fmt.Errorf("no manager")
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseFloat(f[1], 64)
			return kb / 1024, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// scrapeSum sums every series of one metric from a Prometheus text endpoint.
func scrapeSum(url, metric string) (float64, error) {
	hc := http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	sum, found := 0.0, false
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, metric+"{") && !strings.HasPrefix(line, metric+" ") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		sum, found = sum+v, true
	}
	if !found {
		return 0, fmt.Errorf("%s: no %s", url, metric)
	}
	return sum, sc.Err()
}

func stats(xs []float64) (peak, mean float64) {
	for _, x := range xs {
		peak = max(peak, x)
		mean += x
	}
	if len(xs) > 0 {
		mean /= float64(len(xs))
	}
	return
}

func (r *resourceSampler) summary() string {
	if r == nil {
		return "not sampled"
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	rp, rm := stats(r.rss)
	qp, qm := stats(r.rate)
	return fmt.Sprintf("manager RSS peak %.0f MiB, mean %.0f MiB; Kafka requests/s peak %.1f, mean %.1f (%d samples, %d while the manager was down)",
		rp, rm, qp, qm, len(r.rss), r.failures)
}

// verdict fails on clearly unbounded growth only. Rule: over the fault phase (at least 24
// samples, two minutes), split in thirds, the mean RSS of the last third must stay below
// twice the first third's plus 64 MiB, and the mean Kafka request rate of the last third
// below three times the first third's plus 20 requests/s. A leak or a request storm that
// grows with time trips it; the spikes of single faults (a restart re-reading every topic)
// do not.
func (r *resourceSampler) verdict() string {
	if r == nil {
		return ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	from, to := r.phaseAt["faults"], r.phaseAt["drain"]
	if to <= from {
		to = len(r.rss)
	}
	rss := r.rss[from:to]
	if len(rss) < 24 {
		return ""
	}
	third := len(rss) / 3
	_, first := stats(rss[:third])
	_, last := stats(rss[len(rss)-third:])
	if last > 2*first+64 {
		return fmt.Sprintf("manager RSS grew without bound: mean %.0f MiB in the last third of the fault phase, %.0f MiB in the first", last, first)
	}
	// rate has one sample fewer than rss per restart; thirds of it are close enough.
	if len(r.rate) >= 24 {
		rt := r.rate[min(from, len(r.rate)):min(to, len(r.rate))]
		if n := len(rt) / 3; n > 0 {
			_, f := stats(rt[:n])
			_, l := stats(rt[len(rt)-n:])
			if l > 3*f+20 {
				return fmt.Sprintf("Kafka request rate grew without bound: mean %.1f/s in the last third of the fault phase, %.1f/s in the first", l, f)
			}
		}
	}
	return ""
}
