package kafka

import "testing"

func TestBrokerOrigin(t *testing.T) {
	h := func(kv ...string) []Header {
		var out []Header
		for i := 0; i+1 < len(kv); i += 2 {
			out = append(out, Header{Key: kv[i], Value: []byte(kv[i+1])})
		}
		return out
	}
	for _, tc := range []struct {
		name string
		hs   []Header
		want originKey
		ok   bool
	}{
		{"broker dead letter of the target", h("__dlq.errors.topic", "q", "__dlq.errors.partition", "2", "__dlq.errors.offset", "41"), originKey{2, 41}, true},
		{"of another topic", h("__dlq.errors.topic", "other", "__dlq.errors.partition", "2", "__dlq.errors.offset", "41"), originKey{}, false},
		{"republisher dead letter", h("kqo.source.topic", "q", "kqo.source.partition", "2", "kqo.source.offset", "41"), originKey{}, false},
		{"offset not a number", h("__dlq.errors.topic", "q", "__dlq.errors.partition", "2", "__dlq.errors.offset", "x"), originKey{}, false},
		{"no partition", h("__dlq.errors.topic", "q", "__dlq.errors.offset", "41"), originKey{}, false},
	} {
		got, ok := brokerOrigin(tc.hs, "q")
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: %+v %v, want %+v %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}
