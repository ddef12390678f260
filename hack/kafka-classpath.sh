#!/usr/bin/env bash
# Resolves Apache Kafka's jars from Maven Central (cached outside the clone) and prints the
# classpath file's path. Usage: hack/kafka-classpath.sh [KAFKA_VERSION] [broker|tools]
# (default 4.4.0, broker). "tools" resolves the kafka-tools jar of that version (e.g.
# org.apache.kafka.tools.ShareConsumerPerformance, used by hack/bench-republisher) into
# tools-classpath.txt, apart from the broker's classpath.txt.
set -euo pipefail
KAFKA_VERSION="${1:-${KAFKA_VERSION:-4.4.0}}"
KIND="${2:-broker}"
CACHE="${KQO_CACHE:-$HOME/.cache/kafka-queue-operator}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT="$CACHE/kafka/$KAFKA_VERSION"
case "$KIND" in
  broker) POM="$HERE/kafka/pom.xml"; CP="$OUT/classpath.txt" ;;
  tools) POM="$HERE/kafka/tools/pom.xml"; CP="$OUT/tools-classpath.txt" ;;
  *) echo "kafka-classpath.sh: unknown kind $KIND (broker or tools)" >&2; exit 2 ;;
esac
if [[ -s "$CP" ]]; then
  echo "$CP"; exit 0
fi
mkdir -p "$OUT"
exec 9>"$OUT.lock"
flock 9
if [[ -s "$CP" ]]; then
  echo "$CP"; exit 0
fi
mvn -B -q -Dstyle.color=never -f "$POM" \
  -Dmaven.repo.local="$CACHE/m2" \
  -Dkafka.version="$KAFKA_VERSION" \
  dependency:build-classpath -Dmdep.outputFile="$CP.tmp" -Dmdep.includeScope=runtime >&2
mv "$CP.tmp" "$CP"
echo "$CP"
