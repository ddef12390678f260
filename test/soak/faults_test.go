//go:build soak

package soak

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
)

// The fault kinds. Broker faults (the first three) touch the 3-broker cluster one broker at
// a time and never overlap each other, so two of three replicas (min.insync.replicas=2 on
// the traffic topics) stay up.
const (
	faultBrokerKill    = "broker-kill9"
	faultISRLoss       = "broker-stop-isr-loss"
	faultBoundChange   = "bound-change-rolling-restart"
	faultManagerKill   = "manager-kill9-mid-batch"
	faultAPIServer     = "apiserver-restart"
	faultSpecEdit      = "spec-edits"
	faultQueueRecreate = "queue-delete-recreate"
	faultRouteRecreate = "route-delete-recreate"
	faultDLTDelete     = "dlt-deleted-outside"
	faultOldOutage     = "old-broker-outage"
)

var faultKinds = []string{faultBrokerKill, faultISRLoss, faultBoundChange, faultManagerKill, faultAPIServer,
	faultSpecEdit, faultQueueRecreate, faultRouteRecreate, faultDLTDelete, faultOldOutage}

func brokerFault(k string) bool {
	return k == faultBrokerKill || k == faultISRLoss || k == faultBoundChange
}

// runEpisode injects 1–3 faults (each starting 0–8 s into the episode, so they may overlap),
// waits for all to end, then requires the truth checker to be clean within settleBound.
// Every choice comes from rng in this goroutine (each fault gets its own seeded generator),
// so one seed gives one schedule.
func (s *soak) runEpisode(ctx context.Context, ep int, rng *rand.Rand) {
	n := 1 + rng.IntN(3)
	var kinds []string
	if ep == 1 {
		// Every run, the 3-minute CI form too, starts with the outage of old's broker: the
		// sidecars' readiness is checked only there.
		kinds = []string{faultOldOutage}
	}
	for len(kinds) < n && !slices.Contains(kinds, faultOldOutage) {
		// Kinds are dealt from a shuffled deck, so every kind comes up once in each
		// len(faultKinds) draws, even in a 3-minute run; a kind that cannot join this
		// episode (a second broker fault, a repeat) goes back under the deck.
		if len(s.deck) == 0 {
			s.deck = slices.Clone(faultKinds)
			rng.Shuffle(len(s.deck), func(i, j int) { s.deck[i], s.deck[j] = s.deck[j], s.deck[i] })
		}
		k := s.deck[0]
		s.deck = s.deck[1:]
		if k == faultOldOutage && len(kinds) > 0 {
			// It runs alone: old's queues, routes and dead-letter topics are unreachable
			// meanwhile, which other faults on old would take for their own failure.
			s.deck = append(s.deck, k)
			break
		}
		if slices.Contains(kinds, k) || brokerFault(k) && slices.ContainsFunc(kinds, brokerFault) {
			s.deck = append(s.deck, k)
			if len(s.deck) == 1 || !slices.ContainsFunc(s.deck, func(d string) bool {
				return !slices.Contains(kinds, d) && !(brokerFault(d) && slices.ContainsFunc(kinds, brokerFault))
			}) {
				break
			}
			continue
		}
		kinds = append(kinds, k)
	}
	s.flog.note("episode %d: %s", ep, strings.Join(kinds, ", "))
	var wg sync.WaitGroup
	for _, k := range kinds {
		delay := time.Duration(rng.IntN(8000)) * time.Millisecond
		frng := rand.New(rand.NewPCG(rng.Uint64(), uint64(ep)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
			if err := s.inject(ctx, ep, k, frng); err != nil {
				s.t.Errorf("episode %d: fault %s could not be injected: %v", ep, k, err)
			}
		}()
	}
	wg.Wait()
	if err := s.checkClean(ctx, fmt.Sprintf("episode %d", ep), time.Now(), false); err != nil {
		s.t.Error(err)
	}
}

func (s *soak) inject(ctx context.Context, ep int, kind string, rng *rand.Rand) error {
	switch kind {
	case faultBrokerKill, faultISRLoss, faultBoundChange:
		from := time.Now()
		defer func() { s.led.brokerWindow(from, time.Now()) }()
	}
	switch kind {
	case faultBrokerKill:
		node := s.main.Nodes[rng.IntN(len(s.main.Nodes))]
		down := time.Duration(3+rng.IntN(15)) * time.Second
		end := s.flog.fault(ep, kind, fmt.Sprintf("SIGKILL broker %d of main, start it again after %s", node.ID, down))
		s.main.KillNode(node)
		time.Sleep(down)
		err := s.main.StartNode(ctx, node, nil)
		end(err)
		return err

	case faultISRLoss:
		node := s.main.Nodes[rng.IntN(len(s.main.Nodes))]
		down := mainLagMax + time.Duration(5+rng.IntN(15))*time.Second
		end := s.flog.fault(ep, kind, fmt.Sprintf("stop broker %d of main for %s (replica.lag.time.max.ms %s): it leaves every ISR", node.ID, down, mainLagMax))
		s.main.StopNode(node)
		time.Sleep(down)
		err := s.main.StartNode(ctx, node, nil)
		end(err)
		return err

	case faultBoundChange:
		s.mu.Lock()
		to := boundNarrow
		if s.boundNarrowed {
			to = boundWide
		}
		s.mu.Unlock()
		end := s.flog.fault(ep, kind, fmt.Sprintf("restart main's brokers one by one with %s=%s (queues with a 50s lock are out of bounds at 45000)", boundConfig, to))
		for _, node := range s.main.Nodes {
			s.main.StopNode(node)
			if err := s.main.StartNode(ctx, node, map[string]string{boundConfig: to}); err != nil {
				end(err)
				return err
			}
		}
		s.mu.Lock()
		s.boundNarrowed = to == boundNarrow
		s.mu.Unlock()
		end(nil)
		return nil

	case faultManagerKill:
		after := time.Duration(300+rng.IntN(1500)) * time.Millisecond
		down := time.Duration(1+rng.IntN(3)) * time.Second
		end := s.flog.fault(ep, kind, fmt.Sprintf("burst of 10 creates and 10 edits; SIGKILL the manager %s into it, start it again %s later", after, down))
		burstDone := make(chan error, 1)
		go func() { burstDone <- s.burst(ctx, ep, rng) }()
		time.Sleep(after)
		s.mgrMu.Lock()
		s.mgr.kill()
		s.mgrMu.Unlock()
		time.Sleep(down)
		s.mgrMu.Lock()
		err := s.mgr.start()
		s.mgrMu.Unlock()
		if berr := <-burstDone; err == nil {
			err = berr
		}
		end(err)
		return err

	case faultAPIServer:
		down := time.Duration(2+rng.IntN(5)) * time.Second
		end := s.flog.fault(ep, kind, fmt.Sprintf("stop kube-apiserver (etcd stays), start it again after %s on the same port and certificates", down))
		s.apiMu.Lock()
		defer s.apiMu.Unlock()
		api := s.env.ControlPlane.GetAPIServer()
		// envtest sends SIGTERM and, when the apiserver has not finished its graceful
		// shutdown within StopTimeout (20 s; measured: a loaded apiserver with the manager's
		// watches open did not), SIGKILL, reporting the timeout as an error. Either way the
		// apiserver is gone: that is the fault.
		if err := api.Stop(); err != nil && !strings.Contains(err.Error(), "timeout waiting for process") {
			end(err)
			return err
		} else if err != nil {
			s.flog.note("episode %d: kube-apiserver did not stop within envtest's StopTimeout; it was killed", ep)
			time.Sleep(2 * time.Second)
		}
		time.Sleep(down)
		err := api.Start()
		end(err)
		return err

	case faultSpecEdit:
		qs := s.pop.take(rng, 8, nil)
		defer s.pop.release(qs)
		var what []string
		for i := range qs {
			switch rng.IntN(3) {
			case 0:
				qs[i].attempts = int32(2 + rng.IntN(7))
				what = append(what, fmt.Sprintf("%s maxDeliveryAttempts=%d", qs[i].name, qs[i].attempts))
			case 1:
				qs[i].lock = []time.Duration{15 * time.Second, 20 * time.Second, 30 * time.Second, 50 * time.Second}[rng.IntN(4)]
				what = append(what, fmt.Sprintf("%s lockDuration=%s", qs[i].name, qs[i].lock))
			case 2:
				if qs[i].partitions < 4 {
					qs[i].partitions++
				}
				what = append(what, fmt.Sprintf("%s partitions=%d", qs[i].name, qs[i].partitions))
			}
		}
		end := s.flog.fault(ep, kind, strings.Join(what, ", "))
		var err error
		for _, q := range qs {
			if err = s.applySpec(ctx, q); err != nil {
				break
			}
			s.pop.update(q)
		}
		end(err)
		return err

	case faultOldOutage:
		return s.oldOutage(ctx, ep, kind, rng)

	case faultQueueRecreate:
		return s.recreate(ctx, ep, kind, s.pop.take(rng, 3, nil), false)

	case faultRouteRecreate:
		return s.recreate(ctx, ep, kind, s.pop.take(rng, 2, func(q queueSpec) bool { return q.route }), true)

	case faultDLTDelete:
		qs := s.pop.take(rng, 1, func(q queueSpec) bool { return q.route })
		defer s.pop.release(qs)
		if len(qs) == 0 {
			return nil
		}
		q := qs[0]
		var r kqv1.DeadLetterRoute
		if err := s.retryK8s(ctx, func() error { return s.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: q.name + "-dlq"}, &r) }); err != nil {
			return err
		}
		if r.Status.TopicName == "" {
			return fmt.Errorf("route %s-dlq has no status.topicName", q.name)
		}
		end := s.flog.fault(ep, kind, fmt.Sprintf("DeleteTopics %s on %s (route %s-dlq, %s), not through the operator", r.Status.TopicName, q.cluster, q.name, r.Status.EffectiveMode))
		bootstrap := s.main.BootstrapServers()
		if q.cluster == "old" {
			bootstrap = s.old.BootstrapServers()
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...))
		if err != nil {
			end(err)
			return err
		}
		defer cl.Close()
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		resp, err := kadm.NewClient(cl).DeleteTopics(dctx, r.Status.TopicName)
		if err == nil {
			err = resp.Error()
		}
		end(err)
		return err
	}
	return fmt.Errorf("unknown fault %q", kind)
}

// sidecarNoticeBound is how long after its only broker stops a republisher sidecar may still
// answer /readyz 200: the members notice at their next heartbeat (share groups: 5 s) or fetch.
const sidecarNoticeBound = 15 * time.Second

// oldOutage stops old's only broker for 15–25 s (issue 30 case 8). Every republisher sidecar
// (they all use old) must answer /readyz 503 within sidecarNoticeBound of the stop and stay
// so while the broker is down, and answer 200 again within settleBound once it is back. A
// sidecar that keeps saying ready while it cannot fetch lets an application start, or stay
// in rotation, on what looks like an empty queue. Whatever is found is a test error naming
// the sidecar and what it answered.
func (s *soak) oldOutage(ctx context.Context, ep int, kind string, rng *rand.Rand) error {
	down := time.Duration(15+rng.IntN(11)) * time.Second
	end := s.flog.fault(ep, kind, fmt.Sprintf("stop old's broker for %s: every republisher sidecar must answer /readyz 503 within %s and 200 again once it is back", down, sidecarNoticeBound))
	node := s.old.Nodes[0]
	s.old.StopNode(node)
	stopped := time.Now()
	hc := &http.Client{Timeout: 2 * time.Second}
	readyz := func(url string) (int, string) {
		resp, err := hc.Get(url)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}
	firstUnready := map[string]time.Time{}
	var problems []string
	for time.Since(stopped) < down {
		for q, url := range s.tr.sidecarHealth {
			code, body := readyz(url)
			switch {
			case code == http.StatusServiceUnavailable:
				if _, seen := firstUnready[q]; !seen {
					firstUnready[q] = time.Now()
					s.flog.note("episode %d: sidecar of %s answered /readyz 503 %s after the stop: %s", ep, q, time.Since(stopped).Round(100*time.Millisecond), body)
				}
			case code == http.StatusOK && (time.Since(stopped) > sidecarNoticeBound || firstUnready[q] != time.Time{}):
				problems = append(problems, fmt.Sprintf("sidecar of %s answered /readyz 200 %s after its only broker stopped", q, time.Since(stopped).Round(100*time.Millisecond)))
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	for q := range s.tr.sidecarHealth {
		if _, seen := firstUnready[q]; !seen {
			problems = append(problems, fmt.Sprintf("sidecar of %s never answered /readyz 503 in a %s outage of its only broker", q, down))
		}
	}
	err := s.old.StartNode(ctx, node, nil)
	if err == nil {
		back := time.Now()
		for q, url := range s.tr.sidecarHealth {
			for {
				code, body := readyz(url)
				if code == http.StatusOK {
					s.flog.note("episode %d: sidecar of %s ready again %s after the broker was back", ep, q, time.Since(back).Round(100*time.Millisecond))
					break
				}
				if time.Since(back) > settleBound {
					problems = append(problems, fmt.Sprintf("sidecar of %s not ready %s after its broker was back: %d %s", q, settleBound, code, body))
					break
				}
				time.Sleep(500 * time.Millisecond)
			}
		}
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		s.t.Errorf("episode %d: %s: %s", ep, kind, strings.Join(problems, "; "))
	}
	end(err)
	return err
}

// recreate deletes the queues (or their routes), waits until they are gone and creates them
// again with the same spec; it releases qs.
func (s *soak) recreate(ctx context.Context, ep int, kind string, qs []queueSpec, routes bool) error {
	defer s.pop.release(qs)
	var what []string
	for _, q := range qs {
		switch {
		case routes:
			what = append(what, q.cluster+"/"+q.name+"-dlq")
		case q.retain:
			what = append(what, q.cluster+"/"+q.name+" (Retain)")
		default:
			what = append(what, q.cluster+"/"+q.name+" (Delete)")
		}
	}
	end := s.flog.fault(ep, kind, "delete, wait until gone, create again: "+strings.Join(what, ", "))
	err := s.deleteAndWait(ctx, qs, routes)
	for _, q := range qs {
		if err != nil {
			break
		}
		var obj client.Object = q.object()
		if routes {
			obj = q.routeObject()
		}
		err = s.retryK8s(ctx, func() error { return ignoreExists(s.c.Create(ctx, obj)) })
	}
	end(err)
	return err
}

// burst creates 10 new queues and edits 10 idle ones at once (the batch the manager is
// killed in).
func (s *soak) burst(ctx context.Context, ep int, rng *rand.Rand) error {
	var news []queueSpec
	for i := range 10 {
		news = append(news, queueSpec{name: fmt.Sprintf("b-%03d-%d", ep, i), cluster: "main", partitions: int32(1 + rng.IntN(3)), rf: int32(1 + rng.IntN(3)), retain: rng.IntN(2) == 0})
	}
	edits := s.pop.take(rng, 10, nil)
	defer s.pop.release(edits)
	for i := range edits {
		edits[i].attempts = int32(2 + rng.IntN(7))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for _, q := range news {
		s.pop.update(q)
		wg.Add(1)
		go func() { defer wg.Done(); errs <- s.createQueue(ctx, q) }()
	}
	for _, q := range edits {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.applySpec(ctx, q)
			if err == nil {
				s.pop.update(q)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// applySpec writes q's delivery settings and partitions onto the live ShareQueue.
func (s *soak) applySpec(ctx context.Context, q queueSpec) error {
	return s.retryK8s(ctx, func() error {
		var sq kqv1.ShareQueue
		if err := s.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: q.name}, &sq); err != nil {
			return err
		}
		sq.Spec.Topic.Partitions = q.partitions
		sq.Spec.Delivery.MaxDeliveryAttempts = nil
		if q.attempts > 0 {
			sq.Spec.Delivery.MaxDeliveryAttempts = ptr.To(q.attempts)
		}
		sq.Spec.Delivery.LockDuration = nil
		if q.lock > 0 {
			sq.Spec.Delivery.LockDuration = &metav1.Duration{Duration: q.lock}
		}
		return s.c.Update(ctx, &sq)
	})
}

// deleteAndWait deletes the queues (or their routes) and waits until the apiserver no
// longer has them (finalizers done).
func (s *soak) deleteAndWait(ctx context.Context, qs []queueSpec, routes bool) error {
	obj := func(q queueSpec) client.Object {
		if routes {
			return &kqv1.DeadLetterRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: q.name + "-dlq"}}
		}
		return &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: q.name}}
	}
	for _, q := range qs {
		if err := s.retryK8s(ctx, func() error { return client.IgnoreNotFound(s.c.Delete(ctx, obj(q))) }); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(3 * time.Minute)
	for _, q := range qs {
		for {
			o := obj(q)
			err := s.c.Get(ctx, client.ObjectKeyFromObject(o), o)
			if apierrors.IsNotFound(err) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s still there 3m after its deletion (err %v, finalizers %v)", o.GetName(), err, o.GetFinalizers())
			}
			time.Sleep(time.Second)
		}
	}
	return nil
}
