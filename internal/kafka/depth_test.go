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

// A record batch header, possibly cut right after maxTimestamp (a Fetch limited to 64 bytes).
func TestFirstBatchTimestamp(t *testing.T) {
	hdr := make([]byte, 61)
	hdr[16] = 2 // magic
	binary.BigEndian.PutUint64(hdr[27:35], uint64(1_700_000_000_000))
	binary.BigEndian.PutUint64(hdr[35:43], uint64(1_700_000_000_500))
	if ts, ok := firstBatchTimestamp(hdr[:43]); !ok || ts.UnixMilli() != 1_700_000_000_000 {
		t.Errorf("create time: %v %v", ts, ok)
	}
	binary.BigEndian.PutUint16(hdr[21:23], 0x08) // log append time
	if ts, ok := firstBatchTimestamp(hdr); !ok || ts.UnixMilli() != 1_700_000_000_500 {
		t.Errorf("log append time: %v %v", ts, ok)
	}
	if _, ok := firstBatchTimestamp(hdr[:42]); ok {
		t.Error("a header cut before maxTimestamp decoded")
	}
	hdr[16] = 1
	if _, ok := firstBatchTimestamp(hdr); ok {
		t.Error("magic 1 decoded")
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
