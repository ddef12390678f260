{{- /*
kqo.withDefaults fills every value the release does not have with the chart's default, from
files/defaults.yaml (a copy of values.yaml, kept current by make manifests). `helm upgrade
--reuse-values` replaces the chart's defaults with the old release's values, so values added
since that release would be missing (nil): the templates would render %!s(<nil>) flags or fail
on a nil map. Every template includes it first; it is idempotent.
*/ -}}
{{- define "kqo.withDefaults" -}}
{{- if not (get .Values "__defaultsMerged") -}}
{{- $given := .Values -}}
{{- $merged := mergeOverwrite (.Files.Get "files/defaults.yaml" | fromYaml) (deepCopy $given) -}}
{{- /* Kubernetes objects given as values are taken whole, as Helm takes them: a key the
user removed with null (securityContext.runAsNonRoot: null) stays removed. */ -}}
{{- range list "securityContext" "podSecurityContext" "resources" "nodeSelector" "affinity" "podAnnotations" "podLabels" -}}
{{- if hasKey $given . -}}{{- $_ := set $merged . (get $given .) -}}{{- end -}}
{{- end -}}
{{- $_ := set . "Values" $merged -}}
{{- $_ := set .Values "__defaultsMerged" true -}}
{{- end -}}
{{- end -}}

{{- /* The chart's name, or nameOverride. */ -}}
{{- define "kqo.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- /* Prefix of every object's name: fullnameOverride, else <release>-<name> (just <release>
       when it already contains the name). At most 55 characters, so the Services
       <fullname>-metrics and <fullname>-webhook stay within DNS labels' 63. */ -}}
{{- define "kqo.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 55 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "kqo.name" . -}}
{{- if contains $name .Release.Name -}}{{ .Release.Name | trunc 55 | trimSuffix "-" }}{{- else -}}{{ printf "%s-%s" .Release.Name $name | trunc 55 | trimSuffix "-" }}{{- end -}}
{{- end -}}
{{- end -}}

{{- /*
The Lease the release's managers elect a leader on: leaderElection.id when set; else
<fullname>.kafkaqueues.io, one per release, so two releases in one namespace (watchNamespaces
mode) both lead. Releases of chart 0.2.0 and earlier all used kafka-queue-operator.kafkaqueues.io:
when that Lease exists and a Pod of this release holds it (an upgrade), the release keeps it,
so the old and the new Pod never lead at once during the rollout. (lookup sees nothing under
helm template or --dry-run: those render the per-release name.)
*/ -}}
{{- define "kqo.leaderID" -}}
{{- $legacy := "kafka-queue-operator.kafkaqueues.io" -}}
{{- if .Values.leaderElection.id -}}
{{- .Values.leaderElection.id -}}
{{- else -}}
{{- $lease := lookup "coordination.k8s.io/v1" "Lease" .Release.Namespace $legacy -}}
{{- $holder := "" -}}
{{- if $lease }}{{ $holder = (($lease.spec | default dict).holderIdentity | default "") }}{{ end -}}
{{- if hasPrefix (printf "%s-" (include "kqo.fullname" .)) $holder -}}
{{- $legacy -}}
{{- else -}}
{{- printf "%s.kafkaqueues.io" (include "kqo.fullname" .) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- /* Combinations of values that the schema cannot refuse on its own. */ -}}
{{- define "kqo.validate" -}}
{{- if and .Values.webhook.enabled (eq (int .Values.webhook.port) (int .Values.metrics.port)) .Values.metrics.enabled -}}
{{- fail (printf "webhook.port and metrics.port are both %v: give them different ports" .Values.webhook.port) -}}
{{- end -}}
{{- if and .Values.webhook.enabled (eq (int .Values.webhook.port) 8081) -}}
{{- fail "webhook.port 8081 is the manager's health probe port: choose another" -}}
{{- end -}}
{{- if and .Values.watchNamespaces .Values.kafka.bootstrapServers (not (has .Release.Namespace .Values.watchNamespaces)) -}}
{{- fail (printf "kafka.bootstrapServers creates KafkaCluster %s in the release namespace %s, which watchNamespaces %v leaves out: no manager would probe it and no queue could use it; add %s to watchNamespaces or create the KafkaCluster in a watched namespace" .Values.kafka.name .Release.Namespace .Values.watchNamespaces .Release.Namespace) -}}
{{- end -}}
{{- $di := toString .Values.manager.depthInterval -}}
{{- if not (regexMatch "^(0+h)?(0+m)?((([0-9]|[12][0-9])(\\.[0-9]+)?|30(\\.0+)?)s|[0-9]+(\\.[0-9]+)?(ns|us|µs)|([0-9]{1,4}|[12][0-9]{4}|30000)(\\.0+)?ms|0+)$" $di) -}}
{{- fail (printf "manager.depthInterval %s: the manager reads queue depth at most every 30s (--depth-interval between 0, off, and 30s): choose 30s or less" $di) -}}
{{- end -}}
{{- if .Values.kedaScaler.enabled -}}
{{- if regexMatch "^(0+(\\.0*)?(ns|us|µs|ms|s|m|h)?)+$" (toString .Values.manager.depthInterval) -}}
{{- fail (printf "kedaScaler.enabled answers from the depth poller, which manager.depthInterval %v turns off: set manager.depthInterval (30s at most) or disable kedaScaler" .Values.manager.depthInterval) -}}
{{- end -}}
{{- $ports := dict "8081" "the health probe port" -}}
{{- if .Values.metrics.enabled -}}{{- $_ := set $ports (toString .Values.metrics.port) "metrics.port" -}}{{- end -}}
{{- if .Values.webhook.enabled -}}{{- $_ := set $ports (toString .Values.webhook.port) "webhook.port" -}}{{- end -}}
{{- with get $ports (toString .Values.kedaScaler.port) -}}
{{- fail (printf "kedaScaler.port %v is also %s: choose another" $.Values.kedaScaler.port .) -}}
{{- end -}}
{{- end -}}
{{- if and (gt (int .Values.replicaCount) 1) (not .Values.leaderElection.enabled) -}}
{{- fail (printf "replicaCount %v with leaderElection.enabled=false would run %v active managers against the same queues: enable leader election" .Values.replicaCount .Values.replicaCount) -}}
{{- end -}}
{{- end -}}

{{- define "kqo.labels" -}}
app.kubernetes.io/name: {{ include "kqo.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "kqo.selector" -}}
app.kubernetes.io/name: {{ include "kqo.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "kqo.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}{{ default (include "kqo.fullname" .) .Values.serviceAccount.name }}{{- else -}}{{ default "default" .Values.serviceAccount.name }}{{- end -}}
{{- end -}}

{{- /* The operator image: repository@digest when image.digest is set, else repository:tag
       (tag defaults to the chart's appVersion). */ -}}
{{- define "kqo.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}
