// Package externalscaler is KEDA's external scaler API (the ExternalScaler gRPC service),
// generated from the externalscaler.proto of KEDA v2.20.2 by hack/gen-externalscaler.sh
// (make externalscaler). Do not edit the generated files.
package externalscaler
