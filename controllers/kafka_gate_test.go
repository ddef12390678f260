package controllers

import (
	"errors"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"
)

// gateRecorder collects what a gate wakes.
type gateRecorder struct {
	mu        sync.Mutex
	woken     []gateWaiter
	recovered []string
}

func (r *gateRecorder) take() ([]gateWaiter, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w, c := r.woken, r.recovered
	r.woken, r.recovered = nil, nil
	return w, c
}

// fired waits for the trial timer's goroutine after a clock step, then takes what was woken.
func (r *gateRecorder) fired(want int) []gateWaiter {
	for range 200 {
		r.mu.Lock()
		n := len(r.woken)
		r.mu.Unlock()
		if n >= want {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // and no more than want
	w, _ := r.take()
	return w
}

func testGate(t *testing.T) (*kafkaGate, *testingclock.FakeClock, *gateRecorder) {
	t.Helper()
	clk := testingclock.NewFakeClock(time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC))
	g := newKafkaGate(clk, 10*time.Second)
	rec := &gateRecorder{}
	g.wake = func(w gateWaiter) { rec.mu.Lock(); rec.woken = append(rec.woken, w); rec.mu.Unlock() }
	g.recover = func(c string) { rec.mu.Lock(); rec.recovered = append(rec.recovered, c); rec.mu.Unlock() }
	return g, clk, rec
}

func queueWaiter(name string) gateWaiter {
	return gateWaiter{Kind: gateQueue, NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}}
}

var errDown = errors.New("dial tcp 127.0.0.1:9092: connect: connection refused")

// Many reconciles failing together count as one failure; while the cluster backs off none of
// them passes; when the step is over exactly one (the trial) is woken and passes.
func TestGateOneFailureOneTrial(t *testing.T) {
	g, clk, rec := testGate(t)
	const cl = "ns/kc"
	if v := g.admit(cl, queueWaiter("a")); !v.OK {
		t.Fatalf("a cluster with no failure gated: %+v", v)
	}
	for i, name := range []string{"a", "b", "c", "d"} {
		v := g.failure(cl, queueWaiter(name), errDown)
		if v.Step < gateBaseStep || v.Step > time.Duration(float64(gateBaseStep)*(1+gateJitter)) {
			t.Fatalf("failure %d: step %s, want the first step %s (+ ≤%.0f%% jitter): concurrent failures must not escalate", i, v.Step, gateBaseStep, gateJitter*100)
		}
		if v.LastErr != errDown.Error() {
			t.Errorf("last error %q", v.LastErr)
		}
	}
	for _, name := range []string{"a", "b", "e"} {
		if v := g.admit(cl, queueWaiter(name)); v.OK {
			t.Fatalf("%s admitted while the cluster backs off", name)
		} else if !v.Next.After(clk.Now()) {
			t.Fatalf("next attempt %s not after now %s", v.Next, clk.Now())
		}
	}
	if w, _ := rec.take(); len(w) != 0 {
		t.Fatalf("woken before the step ended: %v", w)
	}
	clk.Step(2 * time.Second)
	woken := rec.fired(1)
	if len(woken) != 1 {
		t.Fatalf("woken at the end of the step: %v, want exactly one trial", woken)
	}
	trial := woken[0]
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		w := queueWaiter(name)
		if v := g.admit(cl, w); v.OK != (w == trial) {
			t.Errorf("%s admitted %v; the trial is %s alone", name, v.OK, trial.Name)
		}
	}
}

// A failed trial doubles the step up to the cap; a step never exceeds gateMaxStep.
func TestGateStepsDoubleToCap(t *testing.T) {
	g, clk, rec := testGate(t)
	const cl = "ns/kc"
	g.failure(cl, queueWaiter("a"), errDown)
	var steps []time.Duration
	for range 10 {
		clk.Step(gateMaxStep) // every step is over
		woken := rec.fired(1)
		if len(woken) != 1 {
			t.Fatalf("woken %v, want one trial", woken)
		}
		if v := g.admit(cl, woken[0]); !v.OK {
			t.Fatalf("the trial %s was not admitted", woken[0].Name)
		}
		steps = append(steps, g.failure(cl, woken[0], errDown).Step)
	}
	for i := 1; i < len(steps); i++ {
		if steps[i] < steps[i-1] && steps[i-1] < gateMaxStep {
			t.Errorf("step %d shrank: %v", i, steps)
		}
		if steps[i] > gateMaxStep {
			t.Errorf("step %d is %s, above the cap %s", i, steps[i], gateMaxStep)
		}
	}
	if steps[0] < 2*gateBaseStep {
		t.Errorf("a failed trial did not double the first step: %v", steps)
	}
	if steps[len(steps)-1] != gateMaxStep {
		t.Errorf("after 10 failed trials the step is %s, want the cap %s", steps[len(steps)-1], gateMaxStep)
	}
}

// The first success ends the backoff at once: every waiter and the prober are woken, and the
// next failure starts again from the first step.
func TestGateSuccessWakesAllAndResets(t *testing.T) {
	g, clk, rec := testGate(t)
	const cl = "ns/kc"
	for _, name := range []string{"a", "b", "c"} {
		g.failure(cl, queueWaiter(name), errDown)
	}
	route := gateWaiter{Kind: gateRoute, NamespacedName: types.NamespacedName{Namespace: "ns", Name: "r"}}
	g.admit(cl, route)
	for range 4 { // grow the step
		clk.Step(gateMaxStep)
		woken := rec.fired(1)
		g.admit(cl, woken[0])
		g.failure(cl, woken[0], errDown)
	}
	g.success(cl)
	woken, recovered := rec.take()
	if len(woken) != 4 {
		t.Errorf("woken on success: %v, want a, b, c and route r", woken)
	}
	if len(recovered) != 1 || recovered[0] != cl {
		t.Errorf("prober woken for %v, want [%s]", recovered, cl)
	}
	if v := g.admit(cl, queueWaiter("z")); !v.OK {
		t.Errorf("gated after success: %+v", v)
	}
	if v := g.failure(cl, queueWaiter("a"), errDown); v.Step > time.Duration(float64(gateBaseStep)*(1+gateJitter)) {
		t.Errorf("step after a success and a new failure %s, want the first step again", v.Step)
	}
	clk.Step(time.Hour)
	if w := rec.fired(1); len(w) != 1 {
		t.Errorf("after the reset, woken %v, want one trial", w)
	}
}

// A trial whose reconcile never reports (deleted, paused, stopped before Kafka) does not
// wedge the cluster: after the trial timeout another waiter gets the trial.
func TestGateTrialTimesOut(t *testing.T) {
	g, clk, rec := testGate(t)
	const cl = "ns/kc"
	g.failure(cl, queueWaiter("a"), errDown)
	g.failure(cl, queueWaiter("b"), errDown)
	clk.Step(2 * time.Second)
	first := rec.fired(1)
	if len(first) != 1 {
		t.Fatalf("woken %v", first)
	}
	clk.Step(11 * time.Second) // trialTimeout 10s passes without a report
	second := rec.fired(1)
	if len(second) != 1 || second[0] == first[0] {
		t.Fatalf("after the trial timeout woken %v, want the other waiter (first trial %v)", second, first)
	}
}

// Different clusters back off independently; deleting a cluster forgets its state.
func TestGatePerCluster(t *testing.T) {
	g, _, _ := testGate(t)
	g.failure("ns/down", queueWaiter("a"), errDown)
	if v := g.admit("ns/up", queueWaiter("a")); !v.OK {
		t.Errorf("a healthy cluster gated by another's outage")
	}
	if v := g.admit("ns/down", queueWaiter("b")); v.OK {
		t.Errorf("the failing cluster admitted b")
	}
	g.forget("ns/down")
	if v := g.admit("ns/down", queueWaiter("b")); !v.OK {
		t.Errorf("a forgotten cluster still gated")
	}
}
