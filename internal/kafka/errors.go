package kafka

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Error is a failure of one Kafka operation, on one resource when Resource is set. Err is the
// broker's error (a *kerr.Error when the broker answered with an error code) or a transport
// error; Message is the broker's error message, when it sent one.
type Error struct {
	Op       string
	Resource string
	Err      error
	Message  string
}

func (e *Error) Error() string {
	s := e.Op
	if e.Resource != "" {
		s += " " + e.Resource
	}
	s += ": " + e.Err.Error()
	if e.Message != "" && e.Message != e.Err.Error() {
		s += ": " + e.Message
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

func wrap(op, resource string, err error) error {
	if err == nil {
		return nil
	}
	var ke *Error
	if errors.As(err, &ke) {
		return err
	}
	return &Error{Op: op, Resource: resource, Err: err}
}

func itemErr(op, resource string, code int16, msg *string) error {
	err := kerr.ErrorForCode(code)
	if err == nil {
		return nil
	}
	e := &Error{Op: op, Resource: resource, Err: err}
	if msg != nil {
		e.Message = *msg
	}
	return e
}

// Kafka error codes callers (and tests building results) name, as error values: errors.Is
// matches them inside an *Error.
var (
	// ErrUnknownTopicOrPartition is UNKNOWN_TOPIC_OR_PARTITION (3).
	ErrUnknownTopicOrPartition error = kerr.UnknownTopicOrPartition
	// ErrInvalidConfig is INVALID_CONFIG (40).
	ErrInvalidConfig error = kerr.InvalidConfig
	// ErrTopicAlreadyExists is TOPIC_ALREADY_EXISTS (36).
	ErrTopicAlreadyExists error = kerr.TopicAlreadyExists
)

// IsInvalidConfig reports a config the broker refused (INVALID_CONFIG, e.g. outside the
// KIP-1240 bounds, or a key the broker does not know).
func IsInvalidConfig(err error) bool { return errors.Is(err, kerr.InvalidConfig) }

// IsNotFound reports a topic or group that does not exist.
func IsNotFound(err error) bool {
	return errors.Is(err, kerr.UnknownTopicOrPartition) || errors.Is(err, kerr.GroupIDNotFound) ||
		errors.Is(err, kerr.UnknownTopicID)
}

// ErrNotSent marks a batched call whose caller gave up (its context ended) while all of its
// items were still queued: no request carried them, so a write it asked for was certainly
// not made. It wraps the context's error, so IsRetriable still holds.
var ErrNotSent = errors.New("not sent: the caller gave up while its items were queued for a batched request")

// IsNotSent reports a batched call that was withdrawn before any request carried it
// (ErrNotSent).
func IsNotSent(err error) bool { return errors.Is(err, ErrNotSent) }

// IsAlreadyExists reports a topic that already exists.
func IsAlreadyExists(err error) bool { return errors.Is(err, kerr.TopicAlreadyExists) }

// IsAuthorization reports an ACL denial: the user must grant the operator's principal access.
func IsAuthorization(err error) bool {
	return errors.Is(err, kerr.TopicAuthorizationFailed) || errors.Is(err, kerr.GroupAuthorizationFailed) ||
		errors.Is(err, kerr.ClusterAuthorizationFailed) || errors.Is(err, kerr.SaslAuthenticationFailed)
}

// IsRetriable reports an error that may go away by itself (broker down, leader moving,
// timeouts).
func IsRetriable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	return kerr.IsRetriable(err) || !isKerr(err)
}

// IsUnsupported reports a request or feature the broker does not support.
func IsUnsupported(err error) bool {
	return errors.Is(err, kerr.UnsupportedVersion) || errors.Is(err, kerr.InvalidRequest) ||
		errors.Is(err, kerr.UnsupportedForMessageFormat)
}

// IsUnknownTopic reports a topic the brokers say does not exist (UNKNOWN_TOPIC_OR_PARTITION).
func IsUnknownTopic(err error) bool { return errors.Is(err, kerr.UnknownTopicOrPartition) }

// IsFenced reports a transactional producer another process with the same transactional id
// fenced (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH): that process runs the work now.
func IsFenced(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch)
}

// IsFatalRedrive reports a Redrive failure that retrying cannot fix: an authorization the
// brokers refused (topic, group, transactional id, cluster) or a topic that is gone.
func IsFatalRedrive(err error) bool {
	for _, e := range []error{kerr.TopicAuthorizationFailed, kerr.GroupAuthorizationFailed, kerr.TransactionalIDAuthorizationFailed,
		kerr.ClusterAuthorizationFailed, kerr.UnknownTopicOrPartition, kerr.UnknownTopicID} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// Answered tells a failure Kafka decided (an error code that is not retriable, a member the
// coordinator assigned nothing, a broker too old for the request) from one where Kafka did
// not answer: a broker gone mid-request (connection refused, reset or closed, any
// net.Error, a first read that saw EOF), a retriable code such as
// COORDINATOR_NOT_AVAILABLE, a context that ended, a client closed.
func Answered(err error) bool {
	var ke *kerr.Error
	var ne net.Error
	var eof *kgo.ErrFirstReadEOF
	switch {
	case errors.As(err, &ke):
		return !ke.Retriable
	case errors.As(err, &ne), errors.As(err, &eof),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, net.ErrClosed), errors.Is(err, kgo.ErrClientClosed):
		return false
	}
	return true
}

func isKerr(err error) bool {
	var ke *kerr.Error
	return errors.As(err, &ke)
}

var errNoBrokers = fmt.Errorf("no brokers in metadata")
