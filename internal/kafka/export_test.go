package kafka

import "github.com/twmb/franz-go/pkg/sasl"

// MechanismOf exposes the franz-go mechanism of s to this package's tests (the exported API
// has no franz-go types).
func MechanismOf(s SASLSettings) (sasl.Mechanism, error) { return s.mechanism(nil) }
