#!/usr/bin/env bash
# Resolves Apache Kafka's broker jars from Maven Central (cached outside the clone) and prints
# the classpath file's path. Usage: hack/kafka-classpath.sh [KAFKA_VERSION]  (default 4.4.0)
set -euo pipefail
KAFKA_VERSION="${1:-${KAFKA_VERSION:-4.4.0}}"
CACHE="${KQO_CACHE:-$HOME/.cache/kafka-queue-operator}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT="$CACHE/kafka/$KAFKA_VERSION"
CP="$OUT/classpath.txt"
if [[ -s "$CP" ]]; then
  echo "$CP"; exit 0
fi
mkdir -p "$OUT"
exec 9>"$OUT.lock"
flock 9
if [[ -s "$CP" ]]; then
  echo "$CP"; exit 0
fi
mvn -B -q -Dstyle.color=never -f "$HERE/kafka/pom.xml" \
  -Dmaven.repo.local="$CACHE/m2" \
  -Dkafka.version="$KAFKA_VERSION" \
  dependency:build-classpath -Dmdep.outputFile="$CP.tmp" -Dmdep.includeScope=runtime >&2
mv "$CP.tmp" "$CP"
echo "$CP"
