package kafka

import (
	"encoding/binary"
	"math"
	"testing"
	"time"
)

func TestParseISODuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"PT1H": time.Hour, "P1D": 24 * time.Hour, "P1DT2H3M4.5S": 26*time.Hour + 3*time.Minute + 4500*time.Millisecond, "PT90S": 90 * time.Second,
	} {
		if got, err := ParseISODuration(in); err != nil || got != want {
			t.Errorf("%s: %v %v, want %v", in, got, err, want)
		}
	}
	// Regression: days beyond time.Duration's range wrapped around to a negative duration,
	// i.e. a reset time in the future.
	for _, huge := range []string{"P1000000D", "PT9999999999999H", "P106751DT23H47M16.854775807S", "P200000DT1S"} {
		if got, err := ParseISODuration(huge); err != nil || got != time.Duration(math.MaxInt64) {
			t.Errorf("%s: %v %v, want the largest duration", huge, got, err)
		}
	}
	for _, bad := range []string{"P", "PT", "1H", "PT1X", "P1DT"} {
		if _, err := ParseISODuration(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

// A record batch header: offsets and the first timestamp (the append time for
// log-append-time batches).
func TestFirstBatch(t *testing.T) {
	hdr := make([]byte, 61)
	binary.BigEndian.PutUint64(hdr[0:8], 100) // base offset
	hdr[16] = 2                               // magic
	binary.BigEndian.PutUint32(hdr[23:27], 9) // last offset delta
	binary.BigEndian.PutUint64(hdr[27:35], uint64(1_700_000_000_000))
	binary.BigEndian.PutUint64(hdr[35:43], uint64(1_700_000_000_500))
	if b, ok := firstBatch(hdr[:43]); !ok || b.at.UnixMilli() != 1_700_000_000_000 || b.base != 100 || b.last != 109 {
		t.Errorf("create time: %+v %v", b, ok)
	}
	binary.BigEndian.PutUint16(hdr[21:23], 0x08) // log append time
	if b, ok := firstBatch(hdr); !ok || b.at.UnixMilli() != 1_700_000_000_500 {
		t.Errorf("log append time: %+v %v", b, ok)
	}
	if _, ok := firstBatch(hdr[:42]); ok {
		t.Error("a header cut before maxTimestamp decoded")
	}
	hdr[16] = 1
	if _, ok := firstBatch(hdr); ok {
		t.Error("magic 1 decoded")
	}
}

// A dated batch dates every offset it holds, for its topic id only, until unused for the TTL.
func TestBatchDates(t *testing.T) {
	var d batchDates
	now := time.Unix(1_000_000, 0)
	id, other := [16]byte{1}, [16]byte{2}
	at := time.Unix(500, 0)
	d.store(id, tp{"t", 0}, batchSpan{base: 10, last: 19, at: at}, now)
	for off, want := range map[int64]bool{9: false, 10: true, 15: true, 19: true, 20: false} {
		if ts, ok := d.lookup(id, tpo{tp{"t", 0}, off}, now); ok != want || (ok && !ts.Equal(at)) {
			t.Errorf("offset %d: %v %v, want found=%v", off, ts, ok, want)
		}
	}
	if _, ok := d.lookup(other, tpo{tp{"t", 0}, 15}, now); ok {
		t.Error("a topic made again under the name (new id) found the old batch")
	}
	if _, ok := d.lookup(id, tpo{tp{"t", 1}, 15}, now); ok {
		t.Error("another partition found the batch")
	}
	d.prune(now.Add(batchDatesTTL - time.Second))
	if _, ok := d.lookup(id, tpo{tp{"t", 0}, 15}, now.Add(batchDatesTTL-time.Second)); !ok {
		t.Error("pruned a batch used within the TTL")
	}
	d.prune(now.Add(2*batchDatesTTL - time.Second + time.Minute))
	if len(d.m) != 0 {
		t.Errorf("kept %v after the TTL", d.m)
	}
}

// A timestamp Fetch asks each partition once (its lowest pending offset), grouped by topic.
func TestDepthFetchRequest(t *testing.T) {
	meta := map[string]topicMeta{"a": {id: [16]byte{1}}, "b": {id: [16]byte{2}}}
	pending := []tpo{{tp{"a", 0}, 5}, {tp{"a", 0}, 9}, {tp{"a", 1}, 3}, {tp{"b", 0}, 7}}
	req, asked := depthFetchRequest(meta, pending)
	if len(req.Topics) != 2 || len(req.Topics[0].Partitions) != 2 || len(req.Topics[1].Partitions) != 1 {
		t.Fatalf("request %+v", req.Topics)
	}
	if p := req.Topics[0].Partitions[0]; p.FetchOffset != 5 || p.PartitionMaxBytes != depthFetchPartitionBytes {
		t.Errorf("a/0 asked %+v, want offset 5", p)
	}
	if req.Topics[1].TopicID != meta["b"].id || asked[tp{"a", 0}].offset != 5 || len(asked) != 3 {
		t.Errorf("asked %v", asked)
	}
}

func TestResetTimestamp(t *testing.T) {
	now := time.UnixMilli(10_000_000)
	if ts, ok := resetTimestamp("earliest", now); !ok || ts != -2 {
		t.Errorf("earliest: %d %v", ts, ok)
	}
	if ts, ok := resetTimestamp("by_duration:PT1S", now); !ok || ts != 9_999_000 {
		t.Errorf("by_duration: %d %v", ts, ok)
	}
	// Regression: by_duration reaching before 1970 gave a negative ListOffsets timestamp,
	// which Kafka reads as a command (-1 latest, -3 max timestamp) or refuses.
	for _, v := range []string{"by_duration:PT10001S", "by_duration:P36500D", "by_duration:P1000000D"} {
		if ts, ok := resetTimestamp(v, now); !ok || ts != 0 {
			t.Errorf("%s: %d %v, want 0 (the epoch)", v, ts, ok)
		}
	}
	for _, v := range []string{"latest", "", "by_duration:P"} {
		if _, ok := resetTimestamp(v, now); ok {
			t.Errorf("%q: ok", v)
		}
	}
}
