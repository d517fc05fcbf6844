{{/* Names and labels shared by every template of the chart. */}}

{{- define "attested-cortex.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "attested-cortex.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "attested-cortex.selectorLabels" -}}
app.kubernetes.io/name: {{ include "attested-cortex.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end -}}

{{- define "attested-cortex.labels" -}}
{{ include "attested-cortex.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: attested-cortex
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "attested-cortex.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "attested-cortex.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "attested-cortex.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- /*
files/operator-permissions.yaml with OWN_KINDS written out: the plurals of the CRDs in
crds-templates/ (generated from crd/kinds.KINDS), so a new kind needs no RBAC edit.
*/ -}}
{{- define "attested-cortex.operatorPermissions" -}}
{{- $plurals := list }}
{{- range $path, $_ := .Files.Glob "crds-templates/*.yaml" }}
{{- $plurals = append $plurals (($.Files.Get $path | fromYaml).spec.names.plural) }}
{{- end }}
{{- $text := .Files.Get "files/operator-permissions.yaml" }}
{{- range $sub := list "status" "finalizers" }}
{{- $each := list }}
{{- range $plurals }}{{ $each = append $each (printf "%s/%s" . $sub) }}{{ end }}
{{- $text = replace (printf "OWN_KINDS/%s" $sub) (join ", " $each) $text }}
{{- end }}
{{- replace "OWN_KINDS" (join ", " $plurals) $text }}
{{- end -}}
